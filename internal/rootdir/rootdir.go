// Package rootdir holds what the extractors of untrusted archives
// (artifacts.Unpack, fleet/image.Unpack) share around an os.Root: the
// directory of the entries in hand kept open, and a writer that lets
// io.CopyBuffer use the buffer it is given.
package rootdir

import (
	"io"
	"os"
)

// Open keeps the directory of a root opened last: the entries of one
// directory follow each other in an archive, and a name in an open
// directory resolves one component instead of every one. The zero value
// is not usable; set Root.
type Open struct {
	// Root is the extraction's root; Dir(".") is Root itself.
	Root *os.Root
	cur  *os.Root
	name string
}

// Dir returns the directory dir of Root ("." for Root), which the caller
// checked is a real directory, opened as a Root of its own.
func (o *Open) Dir(dir string) (*os.Root, error) {
	if dir == "." {
		return o.Root, nil
	}
	if o.cur != nil && o.name == dir {
		return o.cur, nil
	}
	o.Close()
	r, err := o.Root.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	o.cur, o.name = r, dir
	return r, nil
}

// Close closes the directory Dir opened last; Root stays open. Callers
// close it before they remove or replace directories.
func (o *Open) Close() {
	if o.cur != nil {
		o.cur.Close()
		o.cur, o.name = nil, ""
	}
}

// WriterOnly hides the ReadFrom of an *os.File from io.CopyBuffer, which
// would call it instead of using the buffer it is given: from a reader
// that is not a file, ReadFrom copies through a new buffer of its own,
// one for each file extracted.
type WriterOnly struct{ W io.Writer }

func (w WriterOnly) Write(p []byte) (int, error) { return w.W.Write(p) }

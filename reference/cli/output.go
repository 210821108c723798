package cli

import (
	"bytes"
	"fmt"
	"io"
	"sync"
)

// maxLine is the longest partial line held back waiting for its newline;
// longer output (progress bars without newlines) is written in pieces.
const maxLine = 64 << 10

// console serialises whole lines from many jobs onto one writer.
type console struct {
	mu sync.Mutex
	w  io.Writer
}

func (c *console) printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = fmt.Fprintf(c.w, format, args...)
}

// prefixWriter writes each line of a job's output to the console as one
// write, preceded by the job's prefix, so lines of parallel jobs never
// interleave within a line.
type prefixWriter struct {
	c      *console
	prefix []byte
	buf    []byte
}

func (c *console) prefixed(prefix string) *prefixWriter {
	return &prefixWriter{c: c, prefix: []byte(prefix)}
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			if len(p.buf) >= maxLine {
				p.emit(p.buf)
				p.buf = p.buf[:0]
			}
			return len(b), nil
		}
		p.emit(p.buf[:i])
		p.buf = p.buf[i+1:]
	}
}

// Flush writes a final line that had no newline.
func (p *prefixWriter) Flush() {
	if len(p.buf) > 0 {
		p.emit(p.buf)
		p.buf = nil
	}
}

func (p *prefixWriter) emit(line []byte) {
	out := make([]byte, 0, len(p.prefix)+len(line)+1)
	out = append(append(append(out, p.prefix...), line...), '\n')
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	_, _ = p.c.w.Write(out)
}

package checkout

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// What the mirror's object store and refs say is read here, without a git
// process: each git the checkout starts costs a few milliseconds, which
// the job waits for. The formats are git's documented on-disk ones (loose
// objects, pack index version 2, loose and packed refs); anything else
// there is an error, never a guess.

// idxMagic starts a pack index of version 2 or later.
var idxMagic = []byte{0xff, 't', 'O', 'c'}

// Git's defaults of gc.auto and gc.autoPackLimit, which the mirrors keep.
const (
	gcAutoLoose = 6700
	gcAutoPacks = 50
)

// isHex reports whether s is lowercase hexadecimal.
func isHex(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool { return (r < '0' || r > '9') && (r < 'a' || r > 'f') })
}

// hasObject reports whether the object store objects holds object sha,
// loose or in a pack, as git's own lookup would find it (alternates of
// the mirror aside: it has none).
func hasObject(objects, sha string) (bool, error) {
	if !isSHA(sha) {
		return false, fmt.Errorf("%q is not a full object name", sha)
	}
	if fileExists(filepath.Join(objects, sha[:2], sha[2:])) {
		return true, nil
	}
	want, _ := hex.DecodeString(sha)
	idxs, err := packIndexes(objects)
	if err != nil {
		return false, err
	}
	for _, idx := range idxs {
		found, err := idxHas(idx, want)
		if err != nil {
			return false, err
		}
		if found {
			return true, nil
		}
	}
	return false, nil
}

// packIndexes returns the index files of the packs in objects/pack that
// have their pack: the ones git reads.
func packIndexes(objects string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(objects, "pack"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var idxs []string
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".idx")
		if !ok || !strings.HasPrefix(base, "pack-") {
			continue
		}
		if fileExists(filepath.Join(objects, "pack", base+".pack")) {
			idxs = append(idxs, filepath.Join(objects, "pack", e.Name()))
		}
	}
	return idxs, nil
}

// idxHeader reads a version 2 pack index's fan-out table: fanout[b] is
// how many objects have a first byte of at most b.
func idxHeader(f *os.File) ([256]uint32, error) {
	var fanout [256]uint32
	var hdr [8 + 256*4]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return fanout, fmt.Errorf("pack index %s: %w", f.Name(), err)
	}
	if !bytes.Equal(hdr[:4], idxMagic) || binary.BigEndian.Uint32(hdr[4:8]) != 2 {
		return fanout, fmt.Errorf("pack index %s is not of version 2", f.Name())
	}
	for i := range fanout {
		fanout[i] = binary.BigEndian.Uint32(hdr[8+4*i:])
	}
	return fanout, nil
}

// idxHas reports whether the pack index at path lists the object named
// want (binary), by a binary search of its sorted names.
func idxHas(path string, want []byte) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	fanout, err := idxHeader(f)
	if err != nil {
		return false, err
	}
	lo, hi := uint32(0), fanout[want[0]]
	if want[0] > 0 {
		lo = fanout[want[0]-1]
	}
	const names = 8 + 256*4
	name := make([]byte, len(want))
	for lo < hi {
		mid := lo + (hi-lo)/2
		if _, err := f.ReadAt(name, names+int64(mid)*int64(len(want))); err != nil {
			return false, fmt.Errorf("pack index %s: %w", path, err)
		}
		switch c := bytes.Compare(name, want); {
		case c == 0:
			return true, nil
		case c < 0:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return false, nil
}

// countObjects is how many objects the object store objects holds, loose
// and packed, as git count-objects counts them.
func countObjects(objects string) (int64, error) {
	var n int64
	for b := range 256 {
		loose, err := countLoose(filepath.Join(objects, fmt.Sprintf("%02x", b)), -1)
		if err != nil {
			return 0, err
		}
		n += int64(loose)
	}
	idxs, err := packIndexes(objects)
	if err != nil {
		return 0, err
	}
	for _, idx := range idxs {
		f, err := os.Open(idx)
		if err != nil {
			return 0, err
		}
		fanout, err := idxHeader(f)
		f.Close()
		if err != nil {
			return 0, err
		}
		n += int64(fanout[255])
	}
	return n, nil
}

// countLoose counts the loose objects in one fan-out directory, stopping
// past limit when limit is not negative.
func countLoose(dir string, limit int) (int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if name := e.Name(); (len(name) == 38 || len(name) == 62) && isHex(name) {
			if n++; limit >= 0 && n > limit {
				break
			}
		}
	}
	return n, nil
}

// gcDue reports whether git gc --auto would find work in the mirror with
// git's default thresholds: more loose objects than gc.auto (estimated,
// as git does, from the directory objects/17) or gc.autoPackLimit packs
// not kept. Only then is git asked, which decides again itself.
func gcDue(mirror string) (bool, error) {
	objects := filepath.Join(mirror, "objects")
	limit := (gcAutoLoose + 255) / 256
	loose, err := countLoose(filepath.Join(objects, "17"), limit)
	if err != nil || loose > limit {
		return err == nil, err
	}
	idxs, err := packIndexes(objects)
	if err != nil {
		return false, err
	}
	packs := 0
	for _, idx := range idxs {
		if !fileExists(strings.TrimSuffix(idx, ".idx") + ".keep") {
			packs++
		}
	}
	return packs >= gcAutoPacks, nil
}

// maxLooseCommit bounds the commit read from a loose object: a larger
// one (a message of megabytes) is left to git.
const maxLooseCommit = 1 << 20

// readLoose returns the type and content of the loose object sha in the
// object store objects; an error when there is none or it cannot be read
// (the caller then asks git, which also finds packed objects).
func readLoose(objects, sha string) (string, []byte, error) {
	if !isSHA(sha) {
		return "", nil, fmt.Errorf("%q is not a full object name", sha)
	}
	f, err := os.Open(filepath.Join(objects, sha[:2], sha[2:]))
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	zr, err := zlib.NewReader(bufio.NewReader(f))
	if err != nil {
		return "", nil, fmt.Errorf("loose object %s: %w", sha, err)
	}
	defer zr.Close()
	b, err := io.ReadAll(io.LimitReader(zr, maxLooseCommit+64))
	if err != nil {
		return "", nil, fmt.Errorf("loose object %s: %w", sha, err)
	}
	// "<type> <size>\x00<content>"
	hdr, body, ok := bytes.Cut(b, []byte{0})
	typ, size, ok2 := strings.Cut(string(hdr), " ")
	if !ok || !ok2 || size != strconv.Itoa(len(body)) {
		return "", nil, fmt.Errorf("loose object %s: not a whole object of at most %d bytes", sha, maxLooseCommit)
	}
	return typ, body, nil
}

// hasRefs reports whether the git directory holds a ref, loose or packed.
func hasRefs(gitDir string) (bool, error) {
	found := errors.New("found")
	err := filepath.WalkDir(filepath.Join(gitDir, "refs"), func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.Type().IsRegular() && !strings.HasSuffix(p, ".lock"):
			return found
		}
		return nil
	})
	switch {
	case err == found:
		return true, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return false, err
	}
	f, err := os.Open(filepath.Join(gitDir, "packed-refs"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); line != "" && line[0] != '#' && line[0] != '^' {
			return true, nil
		}
	}
	return false, sc.Err()
}

package image

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// TestReadAheadKeepsBytesAndError: the read-ahead yields every byte of
// its reader, in order, whatever the reads' sizes, then the reader's own
// error; and Close stops it mid-stream.
func TestReadAheadKeepsBytesAndError(t *testing.T) {
	t.Parallel()
	data := make([]byte, 3*readAheadChunkSize+123)
	for i := range data {
		data[i] = byte(i * 7)
	}
	ra := newReadAhead(iotest.HalfReader(bytes.NewReader(data)))
	got, err := io.ReadAll(iotest.OneByteReader(io.LimitReader(ra, 1<<30)))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes (want %d), equal %v, err %v", len(got), len(data), bytes.Equal(got, data), err)
	}
	ra.Close()

	bad := errors.New("the layer is cut short")
	ra = newReadAhead(io.MultiReader(bytes.NewReader(data[:1000]), iotest.ErrReader(bad)))
	got, err = io.ReadAll(ra)
	if !errors.Is(err, bad) || !bytes.Equal(got, data[:1000]) {
		t.Fatalf("read %d bytes, err %v; want 1000 bytes and %v", len(got), err, bad)
	}
	ra.Close()

	ra = newReadAhead(bytes.NewReader(data))
	if _, err := ra.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	ra.Close()
}

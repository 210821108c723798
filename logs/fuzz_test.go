package logs_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/cikit/cikit/logs"
)

// FuzzDecodeChunk feeds arbitrary path ids, queries, Content-Range headers
// and bodies to DecodeChunk.
//
// Invariant: DecodeChunk never panics, and a chunk it accepts has a key
// that passes Validate, Offset >= 0, Step >= 0, Seq >= 0,
// len(Data) == end-start+1 for the Content-Range's start and end (so
// Offset == start and End() == end+1 without overflow), and Data is the
// body.
func FuzzDecodeChunk(f *testing.F) {
	f.Add("run-1", "build", "attempt=1&step=0&seq=0", "bytes 0-4", []byte("hello"))
	f.Add("run-1", "build", "attempt=2&step=3&seq=17", "bytes 100-104/*", []byte("world"))
	f.Add("run-1", "build", "attempt=1&step=0&seq=1", "5-9", []byte("again"))
	f.Add("run-1", "build", "attempt=1&step=0&seq=1", "bytes 0-9223372036854775807", []byte("x"))
	f.Add("..", "build", "attempt=1&step=0&seq=1", "bytes 0-0", []byte("x"))
	f.Add("r", "j", "attempt=1&step=-1&seq=+1", "bytes +0-0/10", []byte("x"))
	f.Fuzz(func(t *testing.T, runID, jobID, rawQuery, contentRange string, body []byte) {
		query, err := url.ParseQuery(rawQuery)
		if err != nil {
			return
		}
		header := http.Header{}
		header.Set("Content-Range", contentRange)
		c, err := logs.DecodeChunk(runID, jobID, query, header, body)
		if err != nil {
			if c != nil {
				t.Fatalf("an error with a chunk: %v", err)
			}
			return
		}
		if err := c.Key.Validate(); err != nil {
			t.Fatalf("accepted an invalid key %+v: %v", c.Key, err)
		}
		if c.Offset < 0 || c.Step < 0 || c.Seq < 0 {
			t.Fatalf("accepted offset %d, step %d, seq %d", c.Offset, c.Step, c.Seq)
		}
		if c.End() < c.Offset || c.End()-c.Offset != int64(len(body)) || len(c.Data) != len(body) {
			t.Fatalf("accepted offset %d end %d for %d bytes", c.Offset, c.End(), len(body))
		}
		if len(body) == 0 {
			t.Fatalf("accepted an empty chunk")
		}
		if c.Key.RunID != runID || c.Key.JobID != jobID {
			t.Fatalf("the key %+v is not the path's %q/%q", c.Key, runID, jobID)
		}
	})
}

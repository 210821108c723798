package logs_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/cikit/cikit/logs"
)

// A runner streams a job's log in chunks while a viewer follows it; the
// finished log is stored per step.
func Example() {
	ctx := context.Background()
	hub, err := logs.NewHub(logs.Config{
		Sink:     &logs.MemorySink{},
		Segments: &logs.MemorySegmentStore{},
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	key := logs.Key{RunID: "run-42", JobID: "build", Attempt: 1}
	send := func(step int, seq, offset int64, data string) {
		res, err := hub.Append(ctx, &logs.Chunk{Key: key, Step: step, Seq: seq, Offset: offset, Data: []byte(data)})
		if gap, ok := errors.AsType[*logs.GapError](err); ok {
			fmt.Println("gap: send again from", gap.Expected)
			return
		}
		if err != nil {
			panic(err)
		}
		fmt.Println("next offset", res.NextOffset)
	}

	send(0, 0, 0, "$ go build\n")
	send(0, 1, 11, "ok\n")
	send(0, 1, 11, "ok\n")        // a retry: no change
	send(1, 3, 20, "PASS\n")      // a chunk got lost before this one
	send(1, 2, 14, "$ go test\n") // the runner rewinds
	send(1, 3, 24, "PASS\n")

	// A viewer that connects mid-stream still gets the log from offset 0.
	f, err := hub.Follow(ctx, key, 0)
	if err != nil {
		panic(err)
	}
	defer f.Close()

	whole := "$ go build\nok\n$ go test\nPASS\n"
	sum := sha256.Sum256([]byte(whole))
	res, err := hub.Finish(ctx, key, logs.FinishParams{TotalBytes: int64(len(whole)), SHA256: hex.EncodeToString(sum[:])})
	if err != nil {
		panic(err)
	}
	fmt.Println("complete:", res.Complete)

	for {
		ev, err := f.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			panic(err)
		}
		fmt.Printf("step %d at %d: %q\n", ev.Step, ev.Offset, ev.Data)
	}
	// Output:
	// next offset 11
	// next offset 14
	// next offset 14
	// gap: send again from 14
	// next offset 24
	// next offset 29
	// complete: true
	// step 0 at 0: "$ go build\nok\n"
	// step 1 at 14: "$ go test\nPASS\n"
}

// A server mounts the Handler; a runner appends a chunk over HTTP.
func ExampleHandler() {
	hub, err := logs.NewHub(logs.Config{Sink: &logs.MemorySink{}, Segments: &logs.MemorySegmentStore{}})
	if err != nil {
		panic(err)
	}
	h, err := logs.NewHandler(logs.HandlerConfig{
		Hub: hub,
		// A real server checks the runner's token for this job attempt,
		// and the reader's session, returning logs.ErrUnauthenticated,
		// logs.ErrForbidden or cikit.ErrConflict.
		AuthorizeWrite:  logs.AllowAll,
		AuthorizeFollow: logs.AllowAll,
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/jobs/", h) // or mux.HandleFunc(logs.PatternAppend, h.Append) and so on
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, c := range []struct{ seq, contentRange, body string }{
		{"0", "bytes 0-5", "hello\n"},
		{"2", "bytes 9-11", "!!\n"}, // the chunk before it was lost
	} {
		req, _ := http.NewRequest(http.MethodPatch, srv.URL+"/v1/jobs/run-42/build/log?attempt=1&step=0&seq="+c.seq, strings.NewReader(c.body))
		req.Header.Set("Content-Range", c.contentRange)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		fmt.Print(res.StatusCode, " ", res.Header.Get("Range"), " ", string(body))
	}
	// Output:
	// 202  {"next_offset":6}
	// 416 0-6 {"error":"log run-42/build#1: chunk 2 starts at offset 9 but the log ends at 6; send again from 6","expected_offset":6}
}

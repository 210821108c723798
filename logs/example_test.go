package logs_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"

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

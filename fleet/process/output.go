package process

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"time"
)

// jobOutput carries a job's output from the pipe its steps write to, to
// the job's writer, through the job's filter (the workflow-command writer
// of a GitHub job). The executor marks the end of each step in the pipe
// (step); once the copy has passed the mark, every byte the step's own
// processes wrote has passed the filter, so what the filter recorded
// (outputs, annotations) belongs to that step. The filter is flushed at
// each mark and at the end: what it holds back (the masking does) is
// written before the next step's header, and before the job ends. A background process the
// step left may still write afterwards: that is the next step's output.
type jobOutput struct {
	pr, pw *os.File
	dst    io.Writer
	// flush, when set, is called at each mark and at the end, to end
	// the filter's partial line and write what it holds back.
	flush  func()
	mark   []byte
	passed chan struct{} // one value per mark passed
	done   chan struct{} // closed when the copy ends
}

// newJobOutput starts copying a new pipe's output to dst.
func newJobOutput(dst io.Writer, flush func()) (*jobOutput, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	var r [12]byte
	_, _ = rand.Read(r[:])
	o := &jobOutput{pr: pr, pw: pw, dst: dst, flush: flush,
		mark:   []byte("\x00cikit-step-end-" + hex.EncodeToString(r[:]) + "\n"),
		passed: make(chan struct{}, 1), done: make(chan struct{})}
	go o.copy()
	return o, nil
}

// copy copies the pipe to dst, taking the marks out.
func (o *jobOutput) copy() {
	defer close(o.done)
	buf := make([]byte, 0, 64<<10)
	chunk := make([]byte, 32<<10)
	for {
		n, err := o.pr.Read(chunk)
		buf = append(buf, chunk[:n]...)
		for {
			i := bytes.Index(buf, o.mark)
			if i < 0 {
				break
			}
			o.write(buf[:i])
			if o.flush != nil {
				o.flush()
			}
			buf = buf[i+len(o.mark):]
			select {
			case o.passed <- struct{}{}:
			default: // an earlier mark's wait gave up
			}
		}
		// Write what cannot be the start of a mark.
		keep := markPrefix(buf, o.mark)
		o.write(buf[:len(buf)-keep])
		buf = append(buf[:0], buf[len(buf)-keep:]...)
		if err != nil {
			o.write(buf)
			if o.flush != nil {
				o.flush()
			}
			return
		}
	}
}

func (o *jobOutput) write(b []byte) {
	if len(b) > 0 {
		_, _ = o.dst.Write(b)
	}
}

// markPrefix returns the length of the longest end of b that begins
// mark.
func markPrefix(b, mark []byte) int {
	for n := min(len(b), len(mark)-1); n > 0; n-- {
		if bytes.HasPrefix(mark, b[len(b)-n:]) {
			return n
		}
	}
	return 0
}

// step marks the end of a step and waits until the copy has passed the
// mark, at most wait (the job's writer may be stuck).
func (o *jobOutput) step(wait time.Duration) bool {
	if _, err := o.pw.Write(o.mark); err != nil {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-o.passed:
		return true
	case <-t.C:
		return false
	}
}

// close ends the output once whatever still holds the pipe lets go, at
// most wait; it reports whether the copy ended in time.
func (o *jobOutput) close(wait time.Duration) bool {
	_ = o.pw.Close()
	t := time.NewTimer(wait)
	defer t.Stop()
	inTime := true
	select {
	case <-o.done:
	case <-t.C:
		inTime = false
	}
	_ = o.pr.Close()
	<-o.done
	return inTime
}

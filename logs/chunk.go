package logs

import (
	"errors"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/cikit/cikit"
)

// Key names one log: the output of one attempt of one job.
type Key struct {
	RunID   string
	JobID   string
	Attempt int
}

func (k Key) String() string {
	return k.RunID + "/" + k.JobID + "#" + strconv.Itoa(k.Attempt)
}

// maxIDLen bounds RunID and JobID, which become parts of URLs and blob
// keys.
const maxIDLen = 256

// Validate reports whether k can name a log: RunID and JobID are 1 to 256
// bytes of valid UTF-8 without control characters — job IDs of matrix
// variants hold spaces, parentheses and commas, those of GitLab's
// parallel jobs a slash ("test 1/3") — and Attempt is at least 1. BlobKey
// escapes the IDs, so any valid key is a safe path.
func (k Key) Validate() error {
	if err := validID("run id", k.RunID); err != nil {
		return err
	}
	if err := validID("job id", k.JobID); err != nil {
		return err
	}
	if k.Attempt < 1 {
		return fmt.Errorf("the attempt must be at least 1, got %d", k.Attempt)
	}
	return nil
}

func validID(what, s string) error {
	if s == "" {
		return fmt.Errorf("the %s is empty", what)
	}
	if len(s) > maxIDLen {
		return fmt.Errorf("the %s is longer than %d bytes", what, maxIDLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("the %s %q is not UTF-8", what, s)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("the %s %q has a control character", what, s)
		}
	}
	return nil
}

// Chunk is a piece of a log as a runner sends it.
type Chunk struct {
	Key
	// Step is the index of the job's step the bytes belong to. Steps
	// appear in order: a chunk's step is never lower than the step of
	// the bytes before it.
	Step int
	// Seq numbers the runner's chunks, one more per chunk. The offset,
	// not Seq, decides where bytes go; errors name Seq, so that a refused
	// chunk can be found in the runner's log.
	Seq int64
	// Offset is the position of Data's first byte in the whole log of
	// the attempt, one byte stream across all its steps.
	Offset int64
	// Data is the bytes. A Hub copies them; the caller may reuse Data
	// once Append returns.
	Data []byte
}

// End is the offset just after the chunk's last byte.
func (c *Chunk) End() int64 { return c.Offset + int64(len(c.Data)) }

// Errors of Hub and Handler. Callers test for them with errors.Is.
var (
	// ErrBusy: the live logs together hold Config.MaxLiveBytes; the
	// chunk may be sent again once finished logs have made room. Nothing
	// was appended.
	ErrBusy = errors.New("the server holds as many live log bytes as it may; send the chunk again later")
	// ErrFinished: the log was finished, so it takes no more chunks, or
	// it was finished with other totals. It matches cikit.ErrConflict.
	ErrFinished = fmt.Errorf("the log is finished: %w", cikit.ErrConflict)
)

// GapError refuses a chunk that starts after the end of the log: bytes
// between are missing. The runner sends again from Expected.
type GapError struct {
	Key      Key
	Seq      int64 // of the refused chunk
	Offset   int64 // where the refused chunk started
	Expected int64 // the end of the log: the offset the next chunk must start at or before
}

func (e *GapError) Error() string {
	return fmt.Sprintf("log %s: chunk %d starts at offset %d but the log ends at %d; send again from %d", e.Key, e.Seq, e.Offset, e.Expected, e.Expected)
}

// ConflictError refuses a chunk that disagrees with the log: different
// bytes for a range already written, or a step that goes backwards. It
// matches cikit.ErrConflict.
type ConflictError struct {
	Key    Key
	Seq    int64  // of the refused chunk
	Offset int64  // the first offset in disagreement
	Reason string // for people
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("log %s: chunk %d conflicts at offset %d: %s", e.Key, e.Seq, e.Offset, e.Reason)
}

// Is makes errors.Is(err, cikit.ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == cikit.ErrConflict }

package api

import (
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/cikit/cikit/dag"
)

// EncodeCursor returns the opaque form of c that the list of runs hands
// out as "next" and takes as ?before=: base64url, without padding, of the
// creation time (RFC 3339 with nanoseconds, UTC), "|" and the run ID.
func EncodeCursor(c *dag.RunCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.CreatedAt.UTC().Format(time.RFC3339Nano) + "|" + c.ID))
}

// DecodeCursor reads a cursor EncodeCursor made.
func DecodeCursor(s string) (*dag.RunCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("the cursor is not base64url")
	}
	at, id, ok := strings.Cut(string(b), "|")
	if !ok {
		return nil, errors.New("the cursor has no run ID")
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return nil, errors.New("the cursor has no valid time")
	}
	return &dag.RunCursor{CreatedAt: t, ID: id}, nil
}

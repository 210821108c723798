package api_test

import (
	"testing"
	"time"

	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/reference/api"
)

// FuzzDecodeCursor: any ?before= value either is refused or decodes to a
// cursor that encodes and decodes back to the same position.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(api.EncodeCursor(&dag.RunCursor{CreatedAt: time.Date(2026, 3, 2, 10, 2, 0, 0, time.UTC), ID: "run-2"}))
	f.Add(api.EncodeCursor(&dag.RunCursor{CreatedAt: time.Date(2026, 3, 2, 10, 2, 0, 123456789, time.UTC), ID: "a|b"}))
	f.Add("MjAyNi0wMy0wMlQxMDowMjowMCswMjowMHxy")
	f.Add("")
	f.Add("not base64!")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := api.DecodeCursor(s)
		if err != nil {
			return
		}
		again, err := api.DecodeCursor(api.EncodeCursor(c))
		if err != nil {
			t.Fatalf("a decoded cursor %q does not survive encoding: %v", s, err)
		}
		if !again.CreatedAt.Equal(c.CreatedAt) || again.ID != c.ID {
			t.Fatalf("cursor %q: %v|%q became %v|%q", s, c.CreatedAt, c.ID, again.CreatedAt, again.ID)
		}
	})
}

package dag

import (
	"testing"

	"pgregory.net/rapid"
)

// TestJobKeyUnambiguous: two (run, job) pairs share a key only when they
// are the same pair, whatever the IDs hold (a plain concatenation would
// give "ab"+"c" and "a"+"bc" one key).
func TestJobKeyUnambiguous(t *testing.T) {
	t.Parallel()
	if jobKey("ab", "c") == jobKey("a", "bc") || jobKey("1:a", "b") == jobKey("1", ":ab") {
		t.Fatal("jobKey gives two pairs one key")
	}
	rapid.Check(t, func(t *rapid.T) {
		alphabet := rapid.StringOf(rapid.SampledFrom([]rune("ab1:")))
		r1, j1, r2, j2 := alphabet.Draw(t, "r1"), alphabet.Draw(t, "j1"), alphabet.Draw(t, "r2"), alphabet.Draw(t, "j2")
		if (jobKey(r1, j1) == jobKey(r2, j2)) != (r1 == r2 && j1 == j2) {
			t.Fatalf("jobKey(%q, %q) = %q, jobKey(%q, %q) = %q", r1, j1, jobKey(r1, j1), r2, j2, jobKey(r2, j2))
		}
	})
}

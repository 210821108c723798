package compiler

import (
	"strings"
	"testing"
)

// FuzzExpandGLRefs: expanding GitLab variable references never panics;
// its result is final for the runner's expansion, which it is made for:
// expanding it again changes nothing, whether references resolve (to a
// value without "$") or stay, and no "$$" is lost; a value without "$"
// comes out as written.
func FuzzExpandGLRefs(f *testing.F) {
	for _, s := range []string{"", "$", "$$", "$A", "${A}", "${A", "${}", "$1", "a$A$B${C}d", "$$A", "$$$A", "${A}${A}", "x${A_1}y", "$A-b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		none := func(string) (string, bool) { return "", false }
		kept := expandGLRefs(s, none)
		if twice := expandGLRefs(kept, none); twice != kept {
			t.Fatalf("nothing resolves: %q became %q, then %q", s, kept, twice)
		}
		if !strings.Contains(s, "$") && kept != s {
			t.Fatalf("%q has no reference, yet became %q", s, kept)
		}
		every := func(string) (string, bool) { return "v", true }
		once := expandGLRefs(s, every)
		if twice := expandGLRefs(once, every); twice != once {
			t.Fatalf("%q expanded to %q, then to %q", s, once, twice)
		}
		if strings.Count(once, "$$") < strings.Count(s, "$$") {
			t.Fatalf("%q lost a $$ in %q", s, once)
		}
	})
}

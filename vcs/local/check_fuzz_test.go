package local

import (
	"os/exec"
	"path"
	"strings"
	"testing"
)

// FuzzCheckRef: a name checkRef accepts is one git itself accepts as a
// branch name, so it can never be read as an option or revision syntax.
func FuzzCheckRef(f *testing.F) {
	for _, s := range []string{"main", "feature/x", "v1.2.3", "-x", "a..b", "main~1", "main@{1}", "a/.b", "x.lock", "refs/heads/main", "@", "a b", "ä"} {
		f.Add(s)
	}
	git, err := exec.LookPath("git")
	if err != nil {
		f.Skip("git is not installed")
	}
	f.Fuzz(func(t *testing.T, ref string) {
		if checkRef(ref) != nil {
			return
		}
		if strings.HasPrefix(ref, "-") {
			t.Fatalf("accepted %q, which starts with '-'", ref)
		}
		out, err := exec.Command(git, "check-ref-format", "--branch", ref).CombinedOutput()
		if err != nil {
			t.Fatalf("checkRef accepted %q, which git refuses: %s", ref, out)
		}
	})
}

// FuzzCheckPath: a path checkPath accepts is relative and clean, and no
// part of it can be read as an option.
func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"a", "a/b.txt", "../x", "./a", "a//b", "-rf", "a/-b", "/etc/passwd", "a/..", "x\x00y", "dir with space/%.yml"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if checkPath(p) != nil {
			return
		}
		if path.IsAbs(p) || path.Clean(p) != p || p == "." {
			t.Fatalf("accepted %q, which is not a clean relative path", p)
		}
		for part := range strings.SplitSeq(p, "/") {
			if part == ".." || strings.HasPrefix(part, "-") {
				t.Fatalf("accepted %q, whose part %q is '..' or an option", p, part)
			}
		}
		if strings.ContainsAny(p, "\x00\n\r") {
			t.Fatalf("accepted %q, with a control character", p)
		}
	})
}

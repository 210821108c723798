package local

import (
	"fmt"
	"strings"
)

// isSHA reports whether s is a full SHA-1 or SHA-256 object name in
// lowercase hexadecimal.
func isSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// checkPath accepts a relative, slash-separated path with no empty, "."
// or ".." part, no part starting with '-', and no control characters.
func checkPath(p string) error {
	if p == "" {
		return fmt.Errorf("local: empty path")
	}
	for part := range strings.SplitSeq(p, "/") {
		if part == "" || part == "." || part == ".." || part[0] == '-' {
			return fmt.Errorf("local: path %q is not a clean relative path", p)
		}
	}
	if hasControl(p) {
		return fmt.Errorf("local: path %q has a control character", p)
	}
	return nil
}

// checkRef accepts a branch or tag name as git does (git
// check-ref-format) and refuses what would not be one: revision syntax
// ("main~1", "main@{1}", "a..b"), a leading '-', spaces.
func checkRef(ref string) error {
	bad := ref == "" || ref == "@" || ref[0] == '-' || ref[0] == '/' || strings.HasSuffix(ref, "/") ||
		strings.HasSuffix(ref, ".") || strings.HasSuffix(ref, ".lock") || strings.Contains(ref, "..") ||
		strings.Contains(ref, "//") || strings.Contains(ref, "@{") || strings.Contains(ref, "/.") || ref[0] == '.' ||
		strings.ContainsAny(ref, " ~^:?*[\\") || hasControl(ref)
	if bad {
		return fmt.Errorf("local: %q is not a valid branch or tag name", ref)
	}
	return nil
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f })
}

// Package refslug computes GitLab's CI_COMMIT_REF_SLUG, which both the
// compiler (rules and variables decided at compile time) and the runner
// (the job's predefined variables) give, and which must agree.
package refslug

import "strings"

// MaxLen is the most bytes a slug has.
const MaxLen = 63

// Of is the slug of a ref name: lowercased, every byte but a-z and 0-9
// replaced by "-", cut to MaxLen bytes, without a leading or trailing "-".
func Of(ref string) string {
	b := []byte(strings.ToLower(ref))
	for i, c := range b {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			b[i] = '-'
		}
	}
	if len(b) > MaxLen {
		b = b[:MaxLen]
	}
	return strings.Trim(string(b), "-")
}

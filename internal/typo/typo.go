// Package typo finds the name a person probably meant: the "did you mean"
// of the compiler's and the expression checker's findings.
package typo

import "strings"

// maxLen bounds the names compared: long names are not typos of short
// keywords, and the work is quadratic in the length.
const maxLen = 64

// Nearest returns the candidate nearest to name, or "" when none is near
// enough to be a likely typo: an edit distance of at most max(2, len/3)
// that changes less than half of name, so "allowed_failure" suggests
// "allow_failure" and "job" suggests "jobs", but "zz_0" does not suggest
// "aA_0". Ties go to the earlier candidate. With foldCase, case is
// ignored. budget, when not nil, is the work left (characters compared):
// each comparison spends from it, and the search stops when it runs out.
func Nearest(name string, candidates []string, foldCase bool, budget *int) string {
	if foldCase {
		name = strings.ToLower(name)
	}
	a := []rune(name)
	if len(a) == 0 || len(a) > maxLen {
		return ""
	}
	best, bestDist := "", max(2, len(a)/3)+1
	for _, cand := range candidates {
		c := cand
		if foldCase {
			c = strings.ToLower(cand)
		}
		b := []rune(c)
		if len(b) > maxLen || abs(len(a)-len(b)) >= bestDist {
			continue
		}
		if budget != nil {
			if *budget -= len(a) * len(b); *budget < 0 {
				return best
			}
		}
		if d := Distance(a, b); d < bestDist && 2*d < len(a) {
			best, bestDist = cand, d
		}
	}
	return best
}

// Distance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and transpositions of neighbours
// each cost 1. Transpositions count once because swapped letters are the
// commonest typo.
func Distance(a, b []rune) int {
	// Three rows of the dynamic programme: the row two back is needed for
	// transpositions.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

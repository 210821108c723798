package compiler

import (
	"fmt"
	"strings"
)

// suggest returns the candidate nearest to name, or "" when none is near
// enough to be a likely typo. Near enough is an edit distance of at most
// max(2, len/3) that changes less than half of name: "allowed_failure"
// suggests "allow_failure" and "job" suggests "jobs", but "zz_0" does not
// suggest "aA_0". Ties go to the earlier candidate.
func (c *checker) suggest(name string, candidates []string) string {
	a := []rune(name)
	// Long names are not typos of short keywords, and the work is
	// quadratic in the length.
	if len(a) == 0 || len(a) > 64 {
		return ""
	}
	limit := max(2, len(a)/3)
	best, bestDist := "", limit+1
	for _, cand := range candidates {
		b := []rune(cand)
		if abs(len(a)-len(b)) >= bestDist || len(b) > 64 {
			continue
		}
		c.suggestWork += len(a) * len(b)
		if c.suggestWork > maxSuggestWork {
			return best
		}
		if d := distance(a, b); d < bestDist && 2*d < len(a) {
			best, bestDist = cand, d
		}
	}
	return best
}

// distance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and transpositions of neighbours
// each cost 1. Transpositions count once because swapped letters are the
// commonest typo.
func distance(a, b []rune) int {
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

// didYouMean formats a suggestion for the end of a message.
func didYouMean(s string) string {
	if s == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", s)
}

// maxListed bounds the names listed in a message: a pipeline can have
// hundreds of jobs and a message is repeated for each mistake.
const maxListed = 12

// list joins names for a message, eliding past maxListed.
func list(names []string) string {
	if len(names) <= maxListed {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, … (%d more)", strings.Join(names[:maxListed], ", "), len(names)-maxListed)
}

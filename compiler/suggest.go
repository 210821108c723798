package compiler

import (
	"fmt"
	"strings"

	"github.com/cikit/cikit/internal/typo"
)

// suggest returns the candidate nearest to name, or "" when none is near
// enough to be a likely typo (see typo.Nearest). The edit-distance work of
// a compilation is bounded by maxSuggestWork, so a hostile file with
// thousands of unknown names stays cheap.
func (c *checker) suggest(name string, candidates []string) string {
	budget := maxSuggestWork - c.suggestWork
	hint := typo.Nearest(name, candidates, false, &budget)
	c.suggestWork = maxSuggestWork - budget
	return hint
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

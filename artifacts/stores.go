package artifacts

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// checkText refuses what the stores cannot keep the same in memory and in
// PostgreSQL: invalid UTF-8 and NUL bytes (PostgreSQL's text holds
// neither), and more than max bytes when max is positive.
func checkText(what, s string, max int) error {
	switch {
	case max > 0 && len(s) > max:
		return fmt.Errorf("artifacts: %s is %d bytes long, expected at most %d: %w", what, len(s), max, ErrRefused)
	case !utf8.ValidString(s):
		return fmt.Errorf("artifacts: %s %q is not valid UTF-8: %w", what, s, ErrRefused)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("artifacts: %s %q contains a NUL byte: %w", what, s, ErrRefused)
	}
	return nil
}

// checkName is checkText for an artifact's name or a cache key, which
// must also not be empty.
func checkName(what, s string) error {
	if s == "" {
		return fmt.Errorf("artifacts: %s is empty, expected 1 to %d bytes: %w", what, MaxNameLen, ErrRefused)
	}
	return checkText(what, s, MaxNameLen)
}

// checkTexts runs checkText over several fields, named in pairs of name
// and value, without a length limit.
func checkTexts(fields ...string) error {
	for i := 0; i+1 < len(fields); i += 2 {
		if err := checkText(fields[i], fields[i+1], 0); err != nil {
			return err
		}
	}
	return nil
}

// checkLimit refuses a limit that is not positive.
func checkLimit(limit int) error {
	if limit <= 0 {
		return fmt.Errorf("artifacts: limit is %d, expected a positive number: %w", limit, ErrRefused)
	}
	return nil
}

// storedTime is t as PostgreSQL's timestamptz keeps it: UTC, to the
// microsecond. The memory stores keep times the same way, so that both
// answer alike.
func storedTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}

// prefixEnd returns a string greater than every key that begins with p,
// and less than every other key greater than p, in byte order: the keys
// with prefix p are then the range [p, end), which an index serves, with
// nothing in p to escape as a LIKE pattern would need for %, _ and \.
// Keys are valid UTF-8 of at most MaxNameLen bytes (checkName).
func prefixEnd(p string) string {
	runes := []rune(p)
	for i := len(runes) - 1; i >= 0; i-- {
		if runes[i] == utf8.MaxRune {
			continue
		}
		next := runes[i] + 1
		if next == 0xD800 { // surrogates are not valid in UTF-8
			next = 0xE000
		}
		runes[i] = next
		return string(runes[:i+1])
	}
	// p is empty or all U+10FFFF: every key of p's is made of U+10FFFF
	// up to its first other rune, and no key holds more than this many.
	return strings.Repeat(string(utf8.MaxRune), MaxNameLen/utf8.UTFMax+1)
}

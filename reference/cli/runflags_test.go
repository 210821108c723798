package cli

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseValues(t *testing.T) {
	t.Parallel()
	vals, err := parseValues([]byte("# a comment\n\nA=1\r\nexport B = two words \nC=\"quoted=yes\"\nD='single'\nE=\nF=\"unbalanced'\n"), varName)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"A": "1", "B": "two words", "C": "quoted=yes", "D": "single", "E": "", "F": "\"unbalanced'"}, vals)

	for data, want := range map[string]string{
		"A=1\nA=2\n":        "2: A is given twice",
		"A=1\nnot a pair\n": "2: want NAME=VALUE",
		"9LIVES=1\n":        `1: invalid name: names start with a letter or _ and hold only letters, digits and _`,
		"A=" + strings.Repeat("x", maxValueBytes+1): "1: the value of A is 65537 bytes, more than the 65536 allowed",
	} {
		_, err := parseValues([]byte(data), varName)
		require.EqualError(t, err, want)
	}
}

// fileError is every error parseValues returns: the line it is about and
// what is wrong, quoting at most a valid name, never a value.
var fileError = regexp.MustCompile(`^(\d+: (want NAME=VALUE|invalid name: names start with a letter or _ and hold only letters, digits and _|[A-Za-z_][A-Za-z0-9_]* is given twice|the value of [A-Za-z_][A-Za-z0-9_]* is \d+ bytes, more than the \d+ allowed)|0: bufio.Scanner: token too long)$`)

// FuzzParseValues: whatever a -var-file or -secret-file holds, parsing
// never panics; it returns valid names with bounded values, or an error
// that names a line and quotes no value, not even a malformed name (a
// secret file's values are never shown).
func FuzzParseValues(f *testing.F) {
	for _, s := range []string{"A=1\n", "export B='x'\n# c\n", "A=1\nA=2", "bad line", "\r\n=\n", "X=\"" + strings.Repeat("y", 70000) + "\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		vals, err := parseValues(data, varName)
		if err != nil {
			require.Regexp(t, fileError, err.Error())
			return
		}
		for k, v := range vals {
			require.Regexp(t, varName, k)
			require.LessOrEqual(t, len(v), maxValueBytes)
			require.NotContains(t, v, "\n")
		}
	})
}

// FuzzParsePayload: an -event-path file either is one JSON object, which
// parsing returns as such, or is refused with an error; never a panic.
func FuzzParsePayload(f *testing.F) {
	for _, s := range []string{`{}`, `{"ref": "refs/heads/main", "pull_request": {"number": 7}}`, `[]`, `null`, `{} {}`, `{"a":`, ` {"x": 1} `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, err := parsePayload(data)
		if err != nil {
			require.Nil(t, obj)
			return
		}
		require.NotNil(t, obj)
		_, err = json.Marshal(obj)
		require.NoError(t, err)
		require.True(t, json.Valid(data))
	})
}

package runtime

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// DefaultEnvFileBytes is the size limit the executor applies to each
// environment file a step writes (GITHUB_ENV, GITHUB_OUTPUT, GITHUB_PATH):
// 1 MiB, GitHub's limit on a job's outputs.
const DefaultEnvFileBytes = 1 << 20

// KV is one variable of an environment file: a name and its value.
type KV struct {
	Name  string
	Value string
}

// FileError is a malformed line of an environment file. Line counts from
// 1; it is 0 for an error about the file as a whole (its size).
type FileError struct {
	Line int
	Msg  string
}

// Error says where the file is wrong and how.
func (e *FileError) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// ErrFileTooLarge is wrapped by the error of a parser given a file larger
// than its limit.
var ErrFileTooLarge = errors.New("file too large")

// readLimited reads all of r, at most limit bytes.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("runtime: the limit of an environment file must be positive, not %d", limit)
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrFileTooLarge, limit)
	}
	return data, nil
}

// lines splits data into lines without their "\n" or "\r\n" ends; a last
// line without an end counts.
func lines(data []byte) []string {
	s := string(data)
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	out := strings.Split(s, "\n")
	for i, l := range out {
		out[i] = strings.TrimSuffix(l, "\r")
	}
	return out
}

// ParseEnvFile reads a GITHUB_ENV or GITHUB_OUTPUT file, at most limit
// bytes, with GitHub's rules:
//
//   - an empty line is skipped;
//   - NAME=value sets NAME to the rest of the line (an "=" before any
//     "<<" makes the line of this form, so values may hold "<<");
//   - NAME<<DELIMITER starts a multi-line value: the lines up to the next
//     line that is exactly DELIMITER, joined with "\n" and without a
//     final newline; a delimiter that never closes is an error;
//   - lines end with "\n" or "\r\n".
//
// A name is not empty and holds no "=", space or control character; a value holds no
// NUL (no process environment could carry it). The variables come in the
// order written; a name written twice appears twice, the last one wins
// where they are applied. Errors are *FileError naming the line, or wrap
// ErrFileTooLarge.
func ParseEnvFile(r io.Reader, limit int64) ([]KV, error) {
	data, err := readLimited(r, limit)
	if err != nil {
		return nil, err
	}
	ls := lines(data)
	var out []KV
	for i := 0; i < len(ls); i++ {
		line := ls[i]
		if line == "" {
			continue
		}
		eq := strings.IndexByte(line, '=')
		hd := strings.Index(line, "<<")
		switch {
		case eq >= 0 && (hd < 0 || eq < hd):
			name, value := line[:eq], line[eq+1:]
			if err := checkName(name, i+1); err != nil {
				return nil, err
			}
			if strings.IndexByte(value, 0) >= 0 {
				return nil, &FileError{Line: i + 1, Msg: fmt.Sprintf("the value of %q holds a NUL byte", name)}
			}
			out = append(out, KV{Name: name, Value: value})
		case hd >= 0:
			name, delim := line[:hd], line[hd+2:]
			if err := checkName(name, i+1); err != nil {
				return nil, err
			}
			if delim == "" {
				return nil, &FileError{Line: i + 1, Msg: fmt.Sprintf("%q<< has no delimiter: write NAME<<DELIMITER, the value's lines, then DELIMITER alone on a line", name)}
			}
			start := i + 1
			end := -1
			for j := start; j < len(ls); j++ {
				if ls[j] == delim {
					end = j
					break
				}
			}
			if end < 0 {
				return nil, &FileError{Line: i + 1, Msg: fmt.Sprintf("the value of %q is not closed: no line %q follows", name, delim)}
			}
			value := strings.Join(ls[start:end], "\n")
			if strings.IndexByte(value, 0) >= 0 {
				return nil, &FileError{Line: i + 1, Msg: fmt.Sprintf("the value of %q holds a NUL byte", name)}
			}
			out = append(out, KV{Name: name, Value: value})
			i = end
		default:
			return nil, &FileError{Line: i + 1, Msg: fmt.Sprintf("%q is neither NAME=value nor NAME<<DELIMITER", clip(line))}
		}
	}
	return out, nil
}

func checkName(name string, line int) error {
	switch {
	case name == "":
		return &FileError{Line: line, Msg: "the name is empty"}
	case strings.ContainsFunc(name, func(r rune) bool { return r == '=' || r == ' ' || r < 0x20 || r == 0x7f }):
		return &FileError{Line: line, Msg: fmt.Sprintf("the name %q holds \"=\", a space or a control character", clip(name))}
	}
	return nil
}

// clip shortens s for an error message.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

// ParsePathFile reads a GITHUB_PATH file, at most limit bytes: one
// directory a line, prepended to PATH for the later steps, the last line
// first, as GitHub does. Blank lines are skipped and surrounding spaces
// trimmed; a directory holding NUL is an error (a *FileError naming the
// line).
func ParsePathFile(r io.Reader, limit int64) ([]string, error) {
	data, err := readLimited(r, limit)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, line := range lines(data) {
		dir := strings.TrimSpace(line)
		if dir == "" {
			continue
		}
		if strings.IndexByte(dir, 0) >= 0 {
			return nil, &FileError{Line: i + 1, Msg: "the directory holds a NUL byte"}
		}
		out = append(out, dir)
	}
	return out, nil
}

// PrependPath returns the value of PATH with dirs added in front, in the
// order GitHub gives directories added through GITHUB_PATH: the last added
// first. sep is the list separator (os.PathListSeparator as a string).
func PrependPath(path string, dirs []string, sep string) string {
	parts := make([]string, 0, len(dirs)+1)
	for i := len(dirs) - 1; i >= 0; i-- {
		parts = append(parts, dirs[i])
	}
	if path != "" {
		parts = append(parts, path)
	}
	return strings.Join(parts, sep)
}

package expr_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cikit/cikit/compiler/expr"
)

// FuzzParseGitHub feeds arbitrary text to the GitHub parser, seeded with
// the sources of the table tests.
//
// Invariant: ParseGitHub never panics. It fails with a *SyntaxError whose
// Offset is within [0, len(src)], or returns a tree whose nodes lie within
// src and whose String, when within MaxGitHubLength, parses back to the
// same tree. CheckGitHub, References and EvalGitHub (against a small
// environment with known and Unknown contexts) never panic on that tree,
// and evaluation fails only with an *EvalError with an offset within src.
func FuzzParseGitHub(f *testing.F) {
	for _, tt := range githubTrees {
		f.Add(tt.src)
	}
	for _, tt := range githubSyntaxErrors {
		f.Add(tt.src)
	}
	for _, tt := range githubValues {
		f.Add(tt.src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		n, err := expr.ParseGitHub(src)
		if err != nil {
			var se *expr.SyntaxError
			if !errors.As(err, &se) || n != nil {
				t.Fatalf("error %T %v with tree %v", err, err, n)
			}
			if se.Offset < 0 || se.Offset > len(src) || se.Msg == "" {
				t.Fatalf("syntax error %+v for %d bytes", se, len(src))
			}
			return
		}
		checkOffsets(t, n, src)
		printed := n.String()
		if len(printed) <= expr.MaxGitHubLength {
			again, err := expr.ParseGitHub(printed)
			if err != nil {
				t.Fatalf("%q printed as %q, which does not parse: %v", src, printed, err)
			}
			if diff := cmp.Diff(n, again, treeOpts); diff != "" {
				t.Fatalf("%q printed as %q, which parses to another tree (-want +got):\n%s", src, printed, diff)
			}
		}
		expr.CheckGitHub(n, map[string]bool{"github": true, "a": true})
		expr.References(n)
		expr.UsesStatus(n)
		_, err = expr.EvalGitHub(n, fuzzEnv())
		if err != nil {
			var ee *expr.EvalError
			if !errors.As(err, &ee) {
				t.Fatalf("evaluation error %T %v", err, err)
			}
			if ee.Offset < 0 || ee.Offset > len(src) || ee.Msg == "" {
				t.Fatalf("evaluation error %+v for %d bytes", ee, len(src))
			}
		}
	})
}

func fuzzEnv() *expr.GitHubEnv {
	return &expr.GitHubEnv{
		Contexts: map[string]any{
			"github": map[string]any{"ref": "refs/heads/main", "list": []any{1.0, "a", nil, map[string]any{"b": []any{true}}}},
			"a":      []any{map[string]any{"x": 1.0}, map[string]any{"x": expr.Unknown}, []any{}},
		},
		Unknown: map[string]bool{"needs": true},
		Status:  &expr.Status{},
		HashFiles: func(patterns []string) (string, error) {
			return strings.Join(patterns, "|"), nil
		},
	}
}

// FuzzSplitTemplate feeds arbitrary text to SplitTemplate, seeded with the
// templates of the table tests.
//
// Invariant: SplitTemplate never panics. It fails with a *SyntaxError
// whose Offset is that of a "${{" in s, or returns segments that rebuild s
// exactly (literal text as is, expressions within ${{ and }}), each Text
// being s[Offset:Offset+len(Text)], with no empty or adjacent literal
// segments and no expression holding a "}}" outside a string.
func FuzzSplitTemplate(f *testing.F) {
	for _, tt := range templates {
		f.Add(tt.s)
	}
	for _, tt := range templateErrors {
		f.Add(tt.s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		segs, err := expr.SplitTemplate(s)
		if err != nil {
			var se *expr.SyntaxError
			if !errors.As(err, &se) || segs != nil {
				t.Fatalf("error %T %v with segments %v", err, err, segs)
			}
			if se.Offset < 0 || !strings.HasPrefix(s[se.Offset:], "${{") {
				t.Fatalf("syntax error %+v not at a ${{ in %q", se, s)
			}
			return
		}
		var b strings.Builder
		for i, seg := range segs {
			if seg.Offset < 0 || seg.Offset+len(seg.Text) > len(s) || s[seg.Offset:seg.Offset+len(seg.Text)] != seg.Text {
				t.Fatalf("segment %d %+v is not where it says in %q", i, seg, s)
			}
			if !seg.Expr {
				if seg.Text == "" || i > 0 && !segs[i-1].Expr {
					t.Fatalf("segment %d: empty or adjacent literal in %+v", i, segs)
				}
				b.WriteString(seg.Text)
				continue
			}
			if seg.Offset < 3 || s[seg.Offset-3:seg.Offset] != "${{" {
				t.Fatalf("expression segment %d does not follow a ${{", i)
			}
			inString := false
			for k := 0; k < len(seg.Text); k++ {
				switch {
				case seg.Text[k] == '\'':
					inString = !inString
				case !inString && strings.HasPrefix(seg.Text[k:], "}}"):
					t.Fatalf("expression segment %q holds }}", seg.Text)
				}
			}
			b.WriteString("${{" + seg.Text + "}}")
		}
		if b.String() != s {
			t.Fatalf("segments rebuild %q, not %q", b.String(), s)
		}
	})
}

// FuzzParseGitLab feeds arbitrary text to the GitLab parser, seeded with
// the sources of the table tests.
//
// Invariant: ParseGitLab never panics. It fails with a *SyntaxError whose
// Offset is within [0, len(src)], or returns a tree whose nodes lie within
// src and whose String parses back to the same tree. EvalGitLab and
// EvalGitLabPartial never panic on that tree and fail only with an
// *EvalError, their result then being False.
func FuzzParseGitLab(f *testing.F) {
	for _, tt := range gitlabTrees {
		f.Add(tt.src)
	}
	for _, tt := range gitlabSyntaxErrors {
		f.Add(tt.src)
	}
	for _, tt := range gitlabValues {
		f.Add(tt.src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		n, err := expr.ParseGitLab(src)
		if err != nil {
			var se *expr.SyntaxError
			if !errors.As(err, &se) || n != nil {
				t.Fatalf("error %T %v with tree %v", err, err, n)
			}
			if se.Offset < 0 || se.Offset > len(src) || se.Msg == "" {
				t.Fatalf("syntax error %+v for %d bytes", se, len(src))
			}
			return
		}
		checkOffsets(t, n, src)
		printed := n.String()
		again, err := expr.ParseGitLab(printed)
		if err != nil {
			t.Fatalf("%q printed as %q, which does not parse: %v", src, printed, err)
		}
		if diff := cmp.Diff(n, again, treeOpts); diff != "" {
			t.Fatalf("%q printed as %q, which parses to another tree (-want +got):\n%s", src, printed, diff)
		}
		expr.VariableRefs(n)
		for _, partial := range []bool{false, true} {
			var got expr.Tri
			if partial {
				got, err = expr.EvalGitLabPartial(n, func(name string) (string, bool, bool) {
					v, ok := gitlabVars[name]
					return v, ok, len(name)%2 == 0
				})
			} else {
				got, err = expr.EvalGitLab(n, vars(gitlabVars))
			}
			if err != nil {
				var ee *expr.EvalError
				if !errors.As(err, &ee) || got != expr.False {
					t.Fatalf("evaluation gave %v and error %T %v", got, err, err)
				}
			}
		}
	})
}

// FuzzRenderCacheKey checks RenderCacheKey on any key: it never panics;
// on an error it returns ""; a key without "{{" is returned unchanged;
// a rendered key, whose hashes hold no "{{", holds no template, so
// rendering it again changes nothing; and every hash call sees at least
// one glob, none of them empty.
func FuzzRenderCacheKey(f *testing.F) {
	for _, tt := range cacheKeys {
		f.Add(tt.key)
	}
	for _, tt := range cacheKeyErrors {
		f.Add(tt.key)
	}
	f.Fuzz(func(t *testing.T, key string) {
		hash := func(globs []string) (string, error) {
			if len(globs) == 0 || slices.Contains(globs, "") {
				t.Fatalf("hash called with globs %q for key %q", globs, key)
			}
			return "H", nil
		}
		got, err := expr.RenderCacheKey(key, hash)
		if err != nil {
			if got != "" {
				t.Fatalf("error %v with result %q", err, got)
			}
			return
		}
		if !strings.Contains(key, "{{") && got != key {
			t.Fatalf("key %q without templates rendered as %q", key, got)
		}
		again, err := expr.RenderCacheKey(got, hash)
		if err != nil || again != got {
			t.Fatalf("rendered key %q of %q renders again as %q, %v", got, key, again, err)
		}
	})
}

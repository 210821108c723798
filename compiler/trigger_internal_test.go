package compiler

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestMatchFilterCheatSheet checks matchFilter against every example of
// GitHub's filter pattern cheat sheet (workflow syntax reference, "Filter
// pattern cheat sheet"): the names each pattern is documented to match,
// and names it must not match by the same descriptions.
func TestMatchFilterCheatSheet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		patterns []string
		match    []string
		noMatch  []string
	}{
		// Patterns to match branches and tags.
		{[]string{"feature/*"}, []string{"feature/my-branch", "feature/your-branch"}, []string{"feature/beta-a/my-branch", "feature", "features/x"}},
		{[]string{"feature/**"}, []string{"feature/beta-a/my-branch", "feature/your-branch", "feature/mona/the/octocat"}, []string{"feature", "other/feature/x"}},
		{[]string{"main", "releases/mona-the-octocat"}, []string{"main", "releases/mona-the-octocat"}, []string{"mainline", "releases/mona"}},
		{[]string{"*"}, []string{"main", "releases"}, []string{"releases/v1"}},
		{[]string{"**"}, []string{"all/the/branches", "every/tag", "main"}, nil},
		{[]string{"*feature"}, []string{"mona-feature", "feature", "ver-10-feature"}, []string{"feature-x", "a/feature"}},
		{[]string{"v2*"}, []string{"v2", "v2.0", "v2.9"}, []string{"v1", "v3.2"}},
		{[]string{"v[12].[0-9]+.[0-9]+"}, []string{"v1.10.1", "v2.0.0"}, []string{"v3.0.0", "v1.x.1", "v1..1", "v1.10"}},
		// Patterns to match file paths.
		{[]string{"*"}, []string{"README.md", "server.rb"}, []string{"docs/README.md"}},
		{[]string{"*.jsx?"}, []string{"page.js", "page.jsx"}, []string{"page.jsxx", "src/page.js"}},
		{[]string{"**"}, []string{"all/the/files.md"}, nil},
		{[]string{"*.js"}, []string{"app.js", "index.js"}, []string{"js/index.js"}},
		{[]string{"**.js"}, []string{"index.js", "js/index.js", "src/js/app.js"}, []string{"index.jsx"}},
		{[]string{"docs/*"}, []string{"docs/README.md", "docs/file.txt"}, []string{"docs/mona/octocat.txt", "src/docs/x"}},
		{[]string{"docs/**"}, []string{"docs/README.md", "docs/mona/octocat.txt"}, []string{"src/docs/x", "docs"}},
		{[]string{"docs/**/*.md"}, []string{"docs/README.md", "docs/mona/hello-world.md", "docs/a/markdown/file.md"}, []string{"docs/a.txt", "README.md"}},
		{[]string{"**/docs/**"}, []string{"docs/hello.md", "dir/docs/my-file.txt", "space/docs/plan/space.doc"}, []string{"documents/x", "dir/docsx/y"}},
		{[]string{"**/README.md"}, []string{"README.md", "js/README.md"}, []string{"README.mdx", "js/NOTREADME.md"}},
		{[]string{"**/*src/**"}, []string{"a/src/app.js", "my-src/code/js/app.js"}, []string{"src", "a/source/app.js"}},
		{[]string{"**/*-post.md"}, []string{"my-post.md", "path/their-post.md"}, []string{"post.md", "path/post.md"}},
		{[]string{"**/migrate-*.sql"}, []string{"migrate-10909.sql", "db/migrate-v1.0.sql", "db/sept/migrate-v1.sql"}, []string{"migrate.sql", "db/migrate-1.txt"}},
		{[]string{"*.md", "!README.md"}, []string{"hello.md"}, []string{"README.md", "docs/hello.md"}},
		{[]string{"*.md", "!README.md", "README*"}, []string{"hello.md", "README.md", "README.doc"}, []string{"docs/hello.md"}},
		// The examples of on.<push>.<branches|tags> and of paths.
		{[]string{"releases/**", "!releases/**-alpha"}, []string{"releases/10", "releases/beta/mona"}, []string{"releases/10-alpha", "releases/beta/3-alpha", "main"}},
		{[]string{"sub-project/**", "!sub-project/docs/**"}, []string{"sub-project/main.go"}, []string{"sub-project/docs/readme.md"}},
		// The rest of the syntax: character classes, '+', '?' and '\'.
		{[]string{"[CB]at"}, []string{"Cat", "Bat"}, []string{"cat", "Rat"}},
		{[]string{"[1-2]00"}, []string{"100", "200"}, []string{"300"}},
		{[]string{"[0-9a-z]"}, []string{"7", "q"}, []string{"Q", "-"}},
		{[]string{"ab+c"}, []string{"abc", "abbbc"}, []string{"ac"}},
		{[]string{"colou?r"}, []string{"color", "colour"}, []string{"colouur"}},
		{[]string{`a\*b`}, []string{"a*b"}, []string{"axb"}},
		{[]string{"!main"}, nil, []string{"main", "dev"}},
		{[]string{"[unclosed"}, []string{"[unclosed"}, []string{"u"}},
		{nil, nil, []string{"main"}},
	}
	for _, tt := range tests {
		name := strings.Join(tt.patterns, " ")
		for _, s := range tt.match {
			if !matchFilter(tt.patterns, s) {
				t.Errorf("patterns %q do not match %q", name, s)
			}
		}
		for _, s := range tt.noMatch {
			if matchFilter(tt.patterns, s) {
				t.Errorf("patterns %q match %q", name, s)
			}
		}
	}
}

// TestMatchFilterLastMatchWins checks the order rule on generated lists:
// the result is decided by the last pattern that matches, and a list whose
// patterns all fail to match decides false. '*' and literal names keep
// the single-pattern answers obvious.
func TestMatchFilterLastMatchWins(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		name := rapid.SampledFrom([]string{"main", "dev", "a/b"}).Draw(t, "name")
		pats := rapid.SliceOfN(rapid.SampledFrom([]string{"main", "!main", "dev", "!dev", "*", "!*", "**", "!**", "a/*", "!a/*"}), 0, 6).Draw(t, "patterns")
		want := false
		for _, p := range pats {
			neg := strings.HasPrefix(p, "!")
			body := strings.TrimPrefix(p, "!")
			if globMatch(compileGlob(body), name) {
				want = !neg
			}
		}
		if got := matchFilter(pats, name); got != want {
			t.Fatalf("matchFilter(%q, %q) = %v, want %v", pats, name, got, want)
		}
	})
}

// TestGlobMatchCost checks that a hostile pattern costs polynomial time:
// many stars against a long name that almost matches.
func TestGlobMatchCost(t *testing.T) {
	t.Parallel()
	pattern := strings.Repeat("*a", 40) + "b"
	name := strings.Repeat("a", 2000)
	if matchFilter([]string{pattern}, name) {
		t.Fatal("matched")
	}
	if !matchFilter([]string{strings.Repeat("**", 50) + "a"}, name) {
		t.Fatal("did not match")
	}
}

package compiler

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestShellWords(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  --cpus 2\n\t-e A=1 ", []string{"--cpus", "2", "-e", "A=1"}},
		{`--health-cmd "pg_isready -U postgres"`, []string{"--health-cmd", "pg_isready -U postgres"}},
		{`--health-cmd 'redis-cli ping' -e ""`, []string{"--health-cmd", "redis-cli ping", "-e", ""}},
		{`-e "A=\"q\" \$HOME \n" -e B=a\ b`, []string{"-e", `A="q" $HOME \n`, "-e", "B=a b"}},
		{`a'b c'"d e"f`, []string{"ab cd ef"}},
		{"--user ${{ matrix.user }} -e X=${{ env.A }}b", []string{"--user", "${{ matrix.user }}", "-e", "X=${{ env.A }}b"}},
	} {
		got, err := shellWords(c.in)
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, got, c.in)
	}
	for _, bad := range []string{`--health-cmd "unclosed`, "-e 'x", `a\`, "--user ${{ matrix.u"} {
		_, err := shellWords(bad)
		require.Error(t, err, bad)
	}
}

// TestGitLabEntrypointKeptAsGiven: GitLab's entrypoint [""] means "no
// entrypoint", so it must not become nil ("the image's entrypoint").
func TestGitLabEntrypointKeptAsGiven(t *testing.T) {
	t.Parallel()
	plan, diags, err := CompileBytes(".gitlab-ci.yml", []byte(`
a:
  image: {name: alpine, entrypoint: [""]}
  services:
    - {name: redis, entrypoint: [""], pull_policy: [never, always]}
  script: echo
b:
  image: {name: alpine, entrypoint: []}
  script: echo
`), Options{Format: FormatGitLab})
	require.NoError(t, err)
	for _, d := range diags {
		require.Equal(t, RuleUnsupported, d.Rule, d.String())
	}
	a, b := plan.Jobs[0], plan.Jobs[1]
	require.Equal(t, []string{""}, a.ImageOptions.Entrypoint)
	require.Equal(t, []string{""}, a.Services[0].ImageOptions.Entrypoint)
	require.Equal(t, []string{"never", "always"}, a.Services[0].ImageOptions.PullPolicy)
	require.Nil(t, b.ImageOptions, "an empty entrypoint sets nothing")
}

// FuzzShellWords checks that shellWords never panics, and that options
// without quotes, backslashes or expressions split as strings.Fields
// splits them.
func FuzzShellWords(f *testing.F) {
	for _, s := range []string{"--cpus 2", `--health-cmd "pg_isready -U x"`, "-e 'a b'", `a\ b`, "--user ${{ matrix.u }}", `"\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := shellWords(s)
		if strings.ContainsAny(s, `'"\`) || strings.Contains(s, "${{") {
			return
		}
		require.NoError(t, err)
		want := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' })
		if len(want) == 0 {
			want = nil
		}
		require.Equal(t, want, got)
	})
}

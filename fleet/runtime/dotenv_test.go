package runtime_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/runtime"
)

func TestParseDotenv(t *testing.T) {
	t.Parallel()
	many := ""
	for i := range cikit.MaxDotenvVariables + 1 {
		many += fmt.Sprintf("V%d=%d\n", i, i)
	}
	for _, tt := range []struct {
		name    string
		in      string
		want    map[string]string
		wantErr string
	}{
		{name: "lines", in: "VERSION=1.2.3\n DEPLOY_URL = https://x.example/?a=b \nQUOTED=\"kept\"\r\nEMPTY=\n",
			want: map[string]string{"VERSION": "1.2.3", "DEPLOY_URL": "https://x.example/?a=b", "QUOTED": `"kept"`, "EMPTY": ""}},
		{name: "later wins", in: "A=1\nA=2", want: map[string]string{"A": "2"}},
		{name: "empty file", in: "", want: map[string]string{}},
		{name: "empty line", in: "A=1\n\nB=2\n", wantErr: "line 2: want NAME=VALUE"},
		{name: "comment", in: "# note\nA=1\n", wantErr: "line 1"},
		{name: "bad name", in: "export A=1\n", wantErr: `"export A" is no variable name`},
		{name: "no name", in: "=1\n", wantErr: "no variable name"},
		{name: "too many", in: many, wantErr: "sets 21 variables; at most 20"},
		{name: "too large", in: "A=" + strings.Repeat("x", cikit.MaxDotenvBytes), wantErr: "at most 5120 are allowed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := runtime.ParseDotenv([]byte(tt.in))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("ParseDotenv (-want +got):\n%s", d)
			}
		})
	}
}

// FuzzParseDotenv parses arbitrary report files.
//
// Invariant: ParseDotenv never panics; what it accepts holds at most
// cikit.MaxDotenvVariables variables, each with a valid name and a value
// on one line, and an error comes with no variables.
func FuzzParseDotenv(f *testing.F) {
	for _, s := range []string{"A=1\n", "A=1\r\nB = 2", "\n", "=", "A==\n", "é=1", "A=1\n\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		vars, err := runtime.ParseDotenv(data)
		if err != nil {
			if vars != nil {
				t.Fatalf("an error with variables: %v", vars)
			}
			return
		}
		if len(vars) > cikit.MaxDotenvVariables {
			t.Fatalf("%d variables", len(vars))
		}
		for k, v := range vars {
			if k == "" || strings.TrimFunc(k, func(r rune) bool {
				return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
			}) != "" {
				t.Fatalf("bad name %q", k)
			}
			if strings.Contains(v, "\n") {
				t.Fatalf("a value over lines: %q", v)
			}
		}
	})
}

func TestOverridesRankManualOverDotenv(t *testing.T) {
	t.Parallel()
	jc := &cikit.JobContext{
		RunContext: cikit.RunContext{Inputs: map[string]string{"DEPLOY": "manual"}},
		Needs: map[string]cikit.NeedResult{
			"build":  {Result: cikit.JobSucceeded, Outputs: map[string]string{"VERSION": "1.2", "DEPLOY": "dotenv", "FROM": "build"}},
			"lint":   {Result: cikit.JobSucceeded, Outputs: map[string]string{"FROM": "lint"}},
			"secret": {Result: cikit.JobSucceeded, Outputs: map[string]string{"TOKEN": "not for you"}},
		},
	}
	spec := &cikit.JobSpec{Format: "gitlab", Needs: []string{"build", "lint", "secret"}, NoArtifactsFrom: []string{"secret"}}
	p := runtime.Params{Spec: spec, Context: jc}
	if d := cmp.Diff(map[string]string{"VERSION": "1.2", "DEPLOY": "dotenv", "FROM": "lint"}, runtime.NeedsDotenv(p)); d != "" {
		t.Errorf("NeedsDotenv (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"VERSION": "1.2", "DEPLOY": "manual", "FROM": "lint"}, runtime.Overrides(p)); d != "" {
		t.Errorf("Overrides (-want +got):\n%s", d)
	}
	// Above the job's own variables, which may refer to them.
	env := runtime.GitLabEnv(map[string]string{"VERSION": "yaml", "IMAGE": "app:$VERSION"}, nil, runtime.Overrides(p))
	require.Equal(t, "app:1.2", env["IMAGE"])
	require.Nil(t, runtime.NeedsDotenv(runtime.Params{Spec: &cikit.JobSpec{Format: "github", Needs: []string{"build"}}, Context: jc}))
}

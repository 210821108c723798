package policy

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/stretchr/testify/require"
)

// TestValueIsJSON: the input document built for Rego is the Input's
// JSON, field for field; the test fails when Input gains a field value
// does not carry.
func TestValueIsJSON(t *testing.T) {
	t.Parallel()
	in := &Input{
		Event: "pull_request", Repository: "acme/api", Actor: "ada", PullRequest: 7, Fork: true,
		Ref:               Ref{Type: "branch", Name: "patch-1", Protected: true, Default: true, Base: "main"},
		AuthorAssociation: "NONE", FirstTimeContributor: true,
		ChangedFiles: []string{"a.go", "b.go"}, ChangedFilesTruncated: true, PipelineFileChanged: true,
		Pipeline: ".github/workflows/ci.yml",
		Job: Job{
			ID: "build", Environment: "production", Secrets: []string{"A"},
			Permissions: map[string]string{"contents": "read", "id-token": "write"}, RunsOn: []string{"linux"},
			DefaultSecretsScopes: []string{"repo:acme/api"}, DefaultCacheScope: "pr/7",
		},
	}
	requireAllSet(t, reflect.ValueOf(*in), "Input")
	requireSameValue(t, in)

	// Nil lists and maps are empty, omitempty fields absent.
	bare := &Input{}
	got := value(bare).(ast.Object)
	require.Zero(t, ast.NewArray().Compare(got.Get(ast.StringTerm("changed_files")).Value))
	require.Nil(t, got.Get(ast.StringTerm("changed_files_truncated")))
	job := got.Get(ast.StringTerm("job")).Value.(ast.Object)
	for _, k := range []string{"secrets", "runs_on", "default_secrets_scopes"} {
		require.Zero(t, ast.NewArray().Compare(job.Get(ast.StringTerm(k)).Value), k)
	}
	require.Zero(t, ast.NewObject().Compare(job.Get(ast.StringTerm("permissions")).Value))
	requireSameValue(t, &Input{ChangedFiles: []string{}, Job: Job{Secrets: []string{}, Permissions: map[string]string{}, RunsOn: []string{}, DefaultSecretsScopes: []string{}}})
}

func requireSameValue(t *testing.T, in *Input) {
	t.Helper()
	b, err := json.Marshal(in)
	require.NoError(t, err)
	want, err := ast.ValueFromReader(bytes.NewReader(b))
	require.NoError(t, err)
	require.Equal(t, 0, want.Compare(value(in)), "value:\n%v\nJSON:\n%v", value(in), want)
}

func requireAllSet(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	for i := range v.NumField() {
		f, name := v.Field(i), path+"."+v.Type().Field(i).Name
		require.False(t, f.IsZero(), "%s is not set: set it here and carry it in value", name)
		if f.Kind() == reflect.Struct {
			requireAllSet(t, f, name)
		}
	}
}

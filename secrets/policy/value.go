package policy

import (
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
)

// value is in as the Rego input document, built directly rather than
// through JSON (which costs more than the policy's evaluation). It has
// the JSON names and omitempty rules of Input, but nil lists and maps
// are empty, not null, so that a policy can count them.
func value(in *Input) ast.Value {
	ref := ast.NewObject(
		item("type", ast.String(in.Ref.Type)),
		item("name", ast.String(in.Ref.Name)),
		item("protected", ast.Boolean(in.Ref.Protected)),
		item("default", ast.Boolean(in.Ref.Default)),
	)
	if in.Ref.Base != "" {
		ref.Insert(keys["base"], ast.StringTerm(in.Ref.Base))
	}
	perms := ast.NewObject()
	for _, k := range sortedKeys(in.Job.Permissions) {
		perms.Insert(ast.StringTerm(k), ast.StringTerm(in.Job.Permissions[k]))
	}
	job := ast.NewObject(
		item("id", ast.String(in.Job.ID)),
		item("environment", ast.String(in.Job.Environment)),
		item("secrets", stringArray(in.Job.Secrets)),
		item("permissions", perms),
		item("runs_on", stringArray(in.Job.RunsOn)),
		item("default_secrets_scopes", stringArray(in.Job.DefaultSecretsScopes)),
		item("default_cache_scope", ast.String(in.Job.DefaultCacheScope)),
	)
	doc := ast.NewObject(
		item("event", ast.String(in.Event)),
		item("repository", ast.String(in.Repository)),
		item("ref", ref),
		item("actor", ast.String(in.Actor)),
		item("pull_request", ast.IntNumberTerm(in.PullRequest).Value),
		item("fork", ast.Boolean(in.Fork)),
		item("author_association", ast.String(in.AuthorAssociation)),
		item("first_time_contributor", ast.Boolean(in.FirstTimeContributor)),
		item("changed_files", stringArray(in.ChangedFiles)),
		item("pipeline_file_changed", ast.Boolean(in.PipelineFileChanged)),
		item("pipeline", ast.String(in.Pipeline)),
		item("job", job),
	)
	if in.ChangedFilesTruncated {
		doc.Insert(keys["changed_files_truncated"], ast.BooleanTerm(true))
	}
	return doc
}

func item(key string, v ast.Value) [2]*ast.Term {
	return ast.Item(keys[key], ast.NewTerm(v))
}

// keys are the input's keys as terms, made once: making them per input
// costs a quarter of building it.
var keys = func() map[string]*ast.Term {
	m := map[string]*ast.Term{}
	for _, k := range []string{
		"event", "repository", "ref", "actor", "pull_request", "fork", "author_association",
		"first_time_contributor", "changed_files", "changed_files_truncated", "pipeline_file_changed",
		"pipeline", "job", "type", "name", "protected", "default", "base", "id", "environment",
		"secrets", "permissions", "runs_on", "default_secrets_scopes", "default_cache_scope",
	} {
		m[k] = ast.StringTerm(k)
	}
	return m
}()

func stringArray(l []string) ast.Value {
	terms := make([]*ast.Term, len(l))
	for i, s := range l {
		terms[i] = ast.StringTerm(s)
	}
	return ast.NewArray(terms...)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

package expr_test

import (
	"fmt"

	"github.com/cikit/cikit/compiler/expr"
)

func Example() {
	// A job's if: condition, evaluated when the workflow is compiled: the
	// push is known, the needed job's result is not.
	n, err := expr.ParseGitHub("github.event_name == 'push' && needs.build.result == 'success'")
	if err != nil {
		panic(err)
	}
	for _, r := range expr.References(n) {
		fmt.Println("reads", r)
	}
	env := &expr.GitHubEnv{
		Contexts: map[string]any{"github": map[string]any{"event_name": "push"}},
		Unknown:  map[string]bool{"needs": true},
	}
	v, err := expr.EvalGitHub(n, env)
	if err != nil {
		panic(err)
	}
	fmt.Println("at compile time:", expr.Condition(v))

	// For a pull request, the known part decides.
	env.Contexts["github"] = map[string]any{"event_name": "pull_request"}
	v, _ = expr.EvalGitHub(n, env)
	fmt.Println("for a pull request:", expr.Condition(v))
	// Output:
	// reads github.event_name
	// reads needs.build.result
	// at compile time: unknown
	// for a pull request: false
}

func ExampleCheckGitHub() {
	n, err := expr.ParseGitHub("startWith(matrx.os, 'ubuntu')")
	if err != nil {
		panic(err)
	}
	known := map[string]bool{"github": true, "matrix": true, "needs": true}
	for _, p := range expr.CheckGitHub(n, known) {
		fmt.Printf("offset %d: %s\n", p.Offset, p.Msg)
	}
	// Output:
	// offset 0: unknown function "startWith"; did you mean "startsWith"?
	// offset 10: unknown context "matrx"; did you mean "matrix"? (available: github, matrix, needs)
}

func ExampleEvalTemplate() {
	env := &expr.GitHubEnv{Contexts: map[string]any{
		"matrix": map[string]any{"os": "linux", "go": 1.26},
	}}
	name, err := expr.EvalTemplate("test-${{ matrix.os }}-go${{ matrix.go }}", env)
	if err != nil {
		panic(err)
	}
	fmt.Println(name)
	// Output:
	// test-linux-go1.26
}

func ExampleParseGitHub_syntaxError() {
	_, err := expr.ParseGitHub("contains(github.ref, 'v1'")
	fmt.Println(err)
	// Output:
	// syntax error at offset 25: unexpected end of input: expected ',' or ')' to close the arguments of contains( at offset 8
}

func ExampleEvalGitLabPartial() {
	n, err := expr.ParseGitLab(`$CI_COMMIT_BRANCH == "main" && $DEPLOY_TOKEN`)
	if err != nil {
		panic(err)
	}
	fmt.Println("reads", expr.VariableRefs(n))
	// The branch is known when the pipeline is compiled; the token is a
	// variable that only the runner will see.
	for _, branch := range []string{"main", "feature"} {
		got, err := expr.EvalGitLabPartial(n, func(name string) (string, bool, bool) {
			if name == "CI_COMMIT_BRANCH" {
				return branch, true, true
			}
			return "", false, false
		})
		if err != nil {
			panic(err)
		}
		fmt.Println(branch+":", got)
	}
	// Output:
	// reads [CI_COMMIT_BRANCH DEPLOY_TOKEN]
	// main: unknown
	// feature: false
}

package runtime

import (
	"cmp"
	"encoding/json"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/internal/refslug"
)

// Params is what the run-time semantics of one job depend on: its spec,
// its run's context and where it runs.
type Params struct {
	// Spec is the job. Required.
	Spec *cikit.JobSpec
	// Context is the job's run context; nil for a job that knows no run
	// (a runner given a fixed directory), which then sees empty values.
	Context *cikit.JobContext
	// Workspace is the job's working tree, absolute.
	Workspace string
	// Temp is a directory for the job's temporary files, emptied between
	// jobs (RUNNER_TEMP).
	Temp string
	// EventPath is where the executor writes EventJSON
	// (GITHUB_EVENT_PATH); empty means Temp/EventFile.
	EventPath string
	// Runner describes the runner; empty fields take this machine's
	// values.
	Runner Runner
	// Vars are the configuration variables of the repository (GitHub's
	// vars context).
	Vars map[string]string
	// Secrets are the secrets the job may read (GitHub's secrets
	// context). The executor masks their values in the job's output.
	Secrets map[string]string
}

// Runner describes the runner of a job, as GitHub's runner context and
// RUNNER_* variables do.
type Runner struct {
	// Name is the runner's name.
	Name string
	// OS is "Linux", "macOS" or "Windows"; Arch "X64", "ARM64", "ARM"
	// or "X86". Empty: this machine's.
	OS   string
	Arch string
	// ToolCache is a directory of tools kept between jobs, when the
	// runner has one.
	ToolCache string
}

// EventFile is the name of the event payload's file in Params.Temp.
const EventFile = "event.json"

func (p *Params) eventPath() string {
	if p.EventPath != "" {
		return p.EventPath
	}
	return filepath.Join(p.Temp, EventFile)
}

func (p *Params) rc() cikit.RunContext {
	if p.Context == nil {
		return cikit.RunContext{}
	}
	return p.Context.RunContext
}

func (p *Params) runner() Runner {
	r := p.Runner
	if r.OS == "" {
		r.OS = runnerOS(runtime.GOOS)
	}
	if r.Arch == "" {
		r.Arch = runnerArch(runtime.GOARCH)
	}
	return r
}

// EventJSON is the event payload of a job's run, for the file at
// GITHUB_EVENT_PATH: the payload the forge sent, or {} when there is none
// or it is not a JSON object.
func EventJSON(jc *cikit.JobContext) []byte {
	if jc != nil && len(jc.Payload) > 0 {
		var obj map[string]json.RawMessage
		if json.Unmarshal(jc.Payload, &obj) == nil && obj != nil {
			return jc.Payload
		}
	}
	return []byte("{}")
}

// Env returns the predefined variables of a job, which its own variables
// (Spec.Env) overlay:
//
//   - always CI=true and CIKIT_* (CIKIT_PROVIDER, CIKIT_REPOSITORY,
//     CIKIT_SHA, CIKIT_REF, CIKIT_REF_NAME, CIKIT_REF_TYPE, CIKIT_EVENT,
//     CIKIT_ACTOR, CIKIT_BASE_REF, CIKIT_HEAD_REF, CIKIT_PR_NUMBER,
//     CIKIT_DEFAULT_BRANCH, CIKIT_RUN_ID, CIKIT_RUN_NUMBER, CIKIT_ATTEMPT,
//     CIKIT_PIPELINE_URL,
//     CIKIT_JOB_ID, CIKIT_JOB_NAME, CIKIT_WORKSPACE, CIKIT_TEMP), those
//     the run knows;
//   - for a GitHub workflow (Spec.Format "github") GitHub's default
//     variables, all of them, empty when unknown as on GitHub;
//   - for a GitLab file GitLab's predefined variables, those the run
//     knows (CI_COMMIT_MESSAGE, CI_COMMIT_TITLE, CI_COMMIT_DESCRIPTION,
//     CI_COMMIT_AUTHOR and CI_COMMIT_TIMESTAMP when the event's payload
//     describes the commit).
//
// GitHub's per-step variables (GITHUB_ENV, GITHUB_OUTPUT …) come from
// GitHubFiles.Vars.
func Env(p Params) map[string]string {
	rc := p.rc()
	env := map[string]string{"CI": "true"}
	set := func(name, value string) {
		if value != "" {
			env[name] = value
		}
	}
	var runID, runURL string
	attempt := 1
	if p.Context != nil {
		runID, runURL = p.Context.RunID, p.Context.RunURL
		attempt = max(p.Context.Attempt, 1)
	}
	pr := ""
	if rc.PRNumber > 0 {
		pr = strconv.Itoa(rc.PRNumber)
	}
	set("CIKIT_PROVIDER", rc.Provider)
	set("CIKIT_REPOSITORY", rc.Repository)
	set("CIKIT_SHA", rc.SHA)
	set("CIKIT_REF", rc.Ref)
	set("CIKIT_REF_NAME", rc.RefName)
	set("CIKIT_REF_TYPE", rc.RefType)
	set("CIKIT_EVENT", rc.Event)
	set("CIKIT_ACTOR", rc.Actor)
	set("CIKIT_BASE_REF", rc.BaseRef)
	set("CIKIT_HEAD_REF", rc.HeadRef)
	set("CIKIT_PR_NUMBER", pr)
	set("CIKIT_DEFAULT_BRANCH", rc.DefaultBranch)
	set("CIKIT_RUN_ID", runID)
	set("CIKIT_RUN_NUMBER", runNumber(p.Context))
	set("CIKIT_ATTEMPT", strconv.Itoa(attempt))
	set("CIKIT_PIPELINE_URL", runURL)
	set("CIKIT_JOB_ID", p.Spec.ID)
	set("CIKIT_JOB_NAME", p.Spec.Name)
	set("CIKIT_WORKSPACE", p.Workspace)
	set("CIKIT_TEMP", p.Temp)

	switch p.Spec.Format {
	case "github":
		r := p.runner()
		server := serverURL(rc)
		for k, v := range map[string]string{
			"GITHUB_ACTIONS":          "true",
			"GITHUB_SHA":              rc.SHA,
			"GITHUB_REF":              rc.Ref,
			"GITHUB_REF_NAME":         rc.RefName,
			"GITHUB_REF_TYPE":         rc.RefType,
			"GITHUB_REPOSITORY":       rc.Repository,
			"GITHUB_REPOSITORY_OWNER": owner(rc.Repository),
			"GITHUB_RUN_ID":           runID,
			"GITHUB_RUN_NUMBER":       runNumber(p.Context),
			"GITHUB_RUN_ATTEMPT":      strconv.Itoa(attempt),
			"GITHUB_WORKSPACE":        p.Workspace,
			"GITHUB_EVENT_NAME":       rc.Event,
			"GITHUB_EVENT_PATH":       p.eventPath(),
			"GITHUB_ACTOR":            rc.Actor,
			"GITHUB_TRIGGERING_ACTOR": rc.Actor,
			"GITHUB_HEAD_REF":         rc.HeadRef,
			"GITHUB_BASE_REF":         rc.BaseRef,
			"GITHUB_SERVER_URL":       server,
			"GITHUB_API_URL":          apiURL(server),
			"GITHUB_GRAPHQL_URL":      graphqlURL(server),
			"GITHUB_JOB":              jobKey(p.Spec),
			"RUNNER_OS":               r.OS,
			"RUNNER_ARCH":             r.Arch,
			"RUNNER_NAME":             r.Name,
			"RUNNER_TEMP":             p.Temp,
			"RUNNER_TOOL_CACHE":       r.ToolCache,
			"RUNNER_ENVIRONMENT":      "self-hosted",
		} {
			env[k] = v
		}
	case "gitlab":
		for k, v := range gitlabVars(p, rc, runID, runURL) {
			env[k] = v
		}
	}
	return env
}

// Overrides returns the variables that rank above the job's own
// (Spec.Env), as in GitLab's precedence, for a GitLab file: the
// variables of a manual trigger (Context.Inputs) over those of the
// dotenv reports of the jobs it needs (NeedsDotenv). GitHub workflows
// read their inputs through the inputs context and their needs' outputs
// through the needs context instead; nil for them.
func Overrides(p Params) map[string]string {
	if p.Spec.Format != "gitlab" || p.Context == nil {
		return nil
	}
	out := NeedsDotenv(p)
	if len(p.Context.Inputs) > 0 && out == nil {
		out = make(map[string]string, len(p.Context.Inputs))
	}
	for k, v := range p.Context.Inputs {
		out[k] = v
	}
	return out
}

// runNumber is the run's number (JobContext.RunNumber) as the variables
// spell it: 1 for a run the platform did not number, as a first run is.
func runNumber(c *cikit.JobContext) string {
	if c == nil {
		return "1"
	}
	return strconv.FormatInt(max(c.RunNumber, 1), 10)
}

// nullSHA is GitLab's CI_COMMIT_BEFORE_SHA when there is no previous
// commit (a new branch, a pipeline not started by a push).
const nullSHA = "0000000000000000000000000000000000000000"

func gitlabVars(p Params, rc cikit.RunContext, runID, runURL string) map[string]string {
	env := map[string]string{"GITLAB_CI": "true", "CI_SERVER": "yes"}
	set := func(name, value string) {
		if value != "" {
			env[name] = value
		}
	}
	set("CI_COMMIT_SHA", rc.SHA)
	if len(rc.SHA) >= 8 {
		env["CI_COMMIT_SHORT_SHA"] = rc.SHA[:8]
	}
	refName := rc.RefName
	if rc.PRNumber > 0 && rc.HeadRef != "" {
		refName = rc.HeadRef // GitLab's ref of a merge request pipeline is its source branch
	}
	set("CI_COMMIT_REF_NAME", refName)
	set("CI_COMMIT_REF_SLUG", refslug.Of(refName))
	switch {
	case rc.RefType == "tag":
		set("CI_COMMIT_TAG", rc.RefName)
	case rc.PRNumber == 0 && rc.RefName != "":
		env["CI_COMMIT_BRANCH"] = rc.RefName
	}
	if rc.SHA != "" {
		env["CI_COMMIT_BEFORE_SHA"] = cmp.Or(beforeSHA(rc.Payload), nullSHA)
	}
	set("CI_PIPELINE_ID", runID)
	set("CI_PIPELINE_IID", runNumber(p.Context))
	set("CI_PIPELINE_URL", runURL)
	set("CI_PIPELINE_SOURCE", pipelineSource(rc.Event))
	set("CI_JOB_ID", p.Spec.ID)
	set("CI_JOB_NAME", p.Spec.Name)
	set("CI_JOB_STAGE", p.Spec.Stage)
	set("CI_PROJECT_PATH", rc.Repository)
	set("CI_PROJECT_DIR", p.Workspace)
	set("CI_BUILDS_DIR", filepath.Dir(p.Workspace))
	if i := strings.LastIndexByte(rc.Repository, '/'); i >= 0 {
		env["CI_PROJECT_NAMESPACE"] = rc.Repository[:i]
		env["CI_PROJECT_NAME"] = rc.Repository[i+1:]
	} else {
		set("CI_PROJECT_NAME", rc.Repository)
	}
	set("CI_PROJECT_URL", rc.RepositoryURL)
	set("CI_SERVER_URL", serverURL(rc))
	set("CI_DEFAULT_BRANCH", rc.DefaultBranch)
	if rc.PRNumber > 0 {
		env["CI_MERGE_REQUEST_IID"] = strconv.Itoa(rc.PRNumber)
		set("CI_MERGE_REQUEST_SOURCE_BRANCH_NAME", rc.HeadRef)
		set("CI_MERGE_REQUEST_TARGET_BRANCH_NAME", rc.BaseRef)
	}
	if c := payloadCommit(rc.Payload, rc.SHA); c != nil {
		msg := strings.ReplaceAll(c.Message, "\r\n", "\n")
		title, desc, _ := strings.Cut(strings.TrimRight(msg, "\n"), "\n")
		env["CI_COMMIT_MESSAGE"] = msg
		env["CI_COMMIT_TITLE"] = title
		desc = strings.TrimLeft(desc, "\n")
		if len(title) >= 100 {
			desc = msg // GitLab's rule: a long title leaves the description whole
		}
		env["CI_COMMIT_DESCRIPTION"] = desc
		set("CI_COMMIT_TIMESTAMP", c.Timestamp)
		if c.Author.Name != "" {
			env["CI_COMMIT_AUTHOR"] = c.Author.Name + " <" + c.Author.Email + ">"
		}
	}
	set("GITLAB_USER_LOGIN", rc.Actor)
	set("CI_RUNNER_DESCRIPTION", p.Runner.Name)
	if p.Temp != "" {
		env["TMPDIR"] = p.Temp
	}
	return env
}

// beforeSHA is the "before" commit of a push payload (GitHub's and
// GitLab's push events both name it so), when it is one.
func beforeSHA(payload json.RawMessage) string {
	var p struct {
		Before string `json:"before"`
	}
	if len(payload) == 0 || json.Unmarshal(payload, &p) != nil || len(p.Before) != 40 {
		return ""
	}
	return p.Before
}

// commit is a commit as push and merge request payloads describe it.
type commit struct {
	ID        string `json:"id"`
	Message   string `json:"message"`
	Timestamp string `json:"timestamp"`
	Author    struct {
		Name  string `json:"name"`
		Email string `json:"email"`
	} `json:"author"`
}

// payloadCommit finds the commit sha in a payload: among a push's commits
// (GitLab's and GitHub's), as GitHub's head_commit, or as a GitLab merge
// request's last commit; nil when the payload does not describe it.
func payloadCommit(payload json.RawMessage, sha string) *commit {
	if len(payload) == 0 || sha == "" {
		return nil
	}
	var p struct {
		Commits          []commit `json:"commits"`
		HeadCommit       *commit  `json:"head_commit"`
		ObjectAttributes *struct {
			LastCommit *commit `json:"last_commit"`
		} `json:"object_attributes"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return nil
	}
	cands := p.Commits
	if p.HeadCommit != nil {
		cands = append(cands, *p.HeadCommit)
	}
	if p.ObjectAttributes != nil && p.ObjectAttributes.LastCommit != nil {
		cands = append(cands, *p.ObjectAttributes.LastCommit)
	}
	for i := range cands {
		if cands[i].ID == sha {
			return &cands[i]
		}
	}
	return nil
}

// pipelineSource names an event as GitLab's CI_PIPELINE_SOURCE does.
func pipelineSource(event string) string {
	switch event {
	case "push", "tag", "tag_push":
		return "push"
	case "pull_request", "merge_request", "merge_request_event":
		return "merge_request_event"
	case "manual", "workflow_dispatch":
		return "web"
	}
	return event
}

// serverURL is the forge's base URL: the repository's URL without its
// path, or GitHub's for a GitHub run that does not say.
func serverURL(rc cikit.RunContext) string {
	if rc.RepositoryURL != "" && rc.Repository != "" {
		if base, ok := strings.CutSuffix(strings.TrimSuffix(rc.RepositoryURL, "/"), "/"+rc.Repository); ok {
			return base
		}
	}
	if rc.Provider == "github" {
		return "https://github.com"
	}
	return ""
}

// apiURL and graphqlURL are GitHub's API endpoints for a server: api.
// github.com for github.com, /api/v3 and /api/graphql on GitHub Enterprise
// Server.
func apiURL(server string) string {
	switch server {
	case "":
		return ""
	case "https://github.com":
		return "https://api.github.com"
	}
	return server + "/api/v3"
}

func graphqlURL(server string) string {
	switch server {
	case "":
		return ""
	case "https://github.com":
		return "https://api.github.com/graphql"
	}
	return server + "/api/graphql"
}

// owner is the owner of a repository's full name: "acme" of "acme/api".
func owner(repo string) string {
	o, _, _ := strings.Cut(repo, "/")
	return o
}

// jobKey is the job's key in its file, GitHub's github.job: the same for
// every variant of a matrix.
func jobKey(spec *cikit.JobSpec) string {
	if spec.MatrixOf != "" {
		return spec.MatrixOf
	}
	return spec.ID
}

// runnerOS and runnerArch name a Go platform as GitHub's runner context
// does.
func runnerOS(goos string) string {
	switch goos {
	case "darwin":
		return "macOS"
	case "windows":
		return "Windows"
	}
	return "Linux"
}

func runnerArch(goarch string) string {
	switch goarch {
	case "arm64":
		return "ARM64"
	case "arm":
		return "ARM"
	case "386":
		return "X86"
	}
	return "X64"
}

// Files are the environment files of one step of a GitHub workflow: the
// step writes them, the executor reads them when it ends.
type Files struct {
	Env, Path, Output, StepSummary, State string
}

// GitHubFiles names the environment files of the step with index step in
// dir (a directory of the job's own, RUNNER_TEMP's _runner_file_commands,
// say). The executor creates them empty before the step.
func GitHubFiles(dir string, step int) Files {
	f := func(kind string) string { return filepath.Join(dir, kind+"_"+strconv.Itoa(step)) }
	return Files{Env: f("set_env"), Path: f("add_path"), Output: f("set_output"), StepSummary: f("step_summary"), State: f("save_state")}
}

// Vars are the variables that point a step at its files: GITHUB_ENV,
// GITHUB_PATH, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY and GITHUB_STATE.
func (f Files) Vars() map[string]string {
	return map[string]string{
		"GITHUB_ENV": f.Env, "GITHUB_PATH": f.Path, "GITHUB_OUTPUT": f.Output,
		"GITHUB_STEP_SUMMARY": f.StepSummary, "GITHUB_STATE": f.State,
	}
}

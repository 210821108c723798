package compiler_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler"
	"github.com/cikit/cikit/internal/testenv"
)

// realGitLabFindings are the findings expected in the real .gitlab-ci.yml
// files, by file; files not listed compile without any. Every one is a
// true finding: these files include local files of their repositories that
// were not collected with them, and a local include that is missing is an
// error in GitLab too ("Local file ... does not exist"). Other findings
// these includes would have caused (jobs extending or needing jobs defined
// in them) are not reported on top: the include is the cause.
var realGitLabFindings = map[string][]string{
	// KiCad includes seven files of its .gitlab directory; its only job
	// of its own, test_formatting, is fine.
	"KiCad__kicad-source-mirror__gitlab-ci.yml": {
		`KiCad__kicad-source-mirror__gitlab-ci.yml:40:12: included file ".gitlab/templates.yml" does not exist at this commit [include]`,
		`KiCad__kicad-source-mirror__gitlab-ci.yml:41:12: included file ".gitlab/Fedora-Linux-CI.yml" does not exist at this commit [include]`,
		`KiCad__kicad-source-mirror__gitlab-ci.yml:42:12: included file ".gitlab/Ubuntu-20.04-CI.yml" does not exist at this commit [include]`,
		`KiCad__kicad-source-mirror__gitlab-ci.yml:43:12: included file ".gitlab/Windows-CI.yml" does not exist at this commit [include]`,
		`KiCad__kicad-source-mirror__gitlab-ci.yml:44:12: included file ".gitlab/coverity.yml" does not exist at this commit [include]`,
		`KiCad__kicad-source-mirror__gitlab-ci.yml:45:12: included file ".gitlab/linux-metadata-validate.yml" does not exist at this commit [include]`,
		`KiCad__kicad-source-mirror__gitlab-ci.yml:46:12: included file ".gitlab/doxygen.yml" does not exist at this commit [include]`,
	},
	// libvirt-perl's jobs extend .gitlab_native_build_job and need
	// x86_64-almalinux-8, both defined in the missing ci/gitlab.yml.
	"libvirt__libvirt-perl__gitlab-ci.yml": {
		`libvirt__libvirt-perl__gitlab-ci.yml:38:10: included file "ci/gitlab.yml" does not exist at this commit [include]`,
	},
	// cryptsetup's jobs all live in its two included files; without an
	// event both include rules may match ($TEST_VALGRIND is unknown).
	"mbroz__cryptsetup__gitlab-ci.yml": {
		`mbroz__cryptsetup__gitlab-ci.yml:10:12: included file ".gitlab/ci/default_test_suite.yml" does not exist at this commit [include]`,
		`mbroz__cryptsetup__gitlab-ci.yml:13:12: included file ".gitlab/ci/valgrind.yml" does not exist at this commit [include]`,
	},
	// QEMU includes four files of .gitlab-ci.d, among them the container
	// builds its build jobs run in.
	"qemu__qemu__gitlab-ci.yml": {
		`qemu__qemu__gitlab-ci.yml:11:12: included file ".gitlab-ci.d/edk2.yml" does not exist at this commit [include]`,
		`qemu__qemu__gitlab-ci.yml:12:12: included file ".gitlab-ci.d/opensbi.yml" does not exist at this commit [include]`,
		`qemu__qemu__gitlab-ci.yml:13:12: included file ".gitlab-ci.d/containers.yml" does not exist at this commit [include]`,
		`qemu__qemu__gitlab-ci.yml:14:12: included file ".gitlab-ci.d/crossbuilds.yml" does not exist at this commit [include]`,
	},
}

// TestGitLabRealFiles compiles the .gitlab-ci.yml files of real projects,
// with their directory as the repository, and expects exactly the
// findings of realGitLabFindings. It also records how many jobs each has
// in lint mode, in testdata/gitlab/real_counts.out, reading missing local
// includes as empty files so that the rest of the file is counted.
//
// Hand-checked counts (against the files, job by job):
//   - gitlabhq__gitlab-runner: 55 = 10 prepare/prebuild jobs, 19 in test
//     (unit test and unit test with race × 5, two windows tests × 3,
//     code_quality, docs lint, git 1.7.1), 5 coverage, 4 binaries, 2
//     packages, 15 release; the License-Management template is not read.
//   - libvirt__libvirt-ci: 24 = 6 container builds, check-dco, flake8,
//     unittests, check-prepare and 14 x86_64-check-* jobs.
//   - xiph__rnnoise: 4 = autoconf-gcc, autoconf-clang, enable-assertions,
//     enable-dnn-debug-float; .autoconf is a template.
func TestGitLabRealFiles(t *testing.T) {
	t.Parallel()
	dir := testenv.SharedTestdata(t, "gitlab")
	files, err := filepath.Glob(filepath.Join(dir, "*.yml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)

	var counts strings.Builder
	counts.WriteString("# Jobs of the real files in lint mode; missing local includes read as empty files.\n")
	unsupported := newUnsupportedSummary()
	defer unsupported.check(t, filepath.Join("testdata", "gitlab", "real_unsupported.out"))
	for _, file := range files {
		name := filepath.Base(file)
		opts := compiler.Options{Format: compiler.FormatGitLab}

		plan, diags, err := compiler.Compile(t.Context(), compiler.DirSource(dir), name, opts)
		require.NoError(t, err, name)
		diags = unsupported.add(t, name, plan, diags)
		got := make([]string, len(diags))
		for i, d := range diags {
			got[i] = d.String()
		}
		if diff := gocmp.Diff(realGitLabFindings[name], got, cmpEmpty); diff != "" {
			t.Errorf("%s: findings (-want +got):\n%s", name, diff)
		}
		if len(diags) == 0 {
			require.NotNil(t, plan, name)
			checkPlan(t, plan)
		}

		plan, diags, err = compiler.Compile(t.Context(), emptyMissing{compiler.DirSource(dir), name}, name, opts)
		require.NoError(t, err, name)
		if plan == nil {
			fmt.Fprintf(&counts, "%s: no plan without its includes:\n", name)
			for _, d := range diags {
				if d.Rule != compiler.RuleUnsupported {
					fmt.Fprintf(&counts, "  %s\n", d)
				}
			}
			continue
		}
		fmt.Fprintf(&counts, "%s: %d %s\n", name, len(plan.Jobs), map[bool]string{true: "job", false: "jobs"}[len(plan.Jobs) == 1])
	}

	out := filepath.Join("testdata", "gitlab", "real_counts.out")
	if *update {
		require.NoError(t, os.WriteFile(out, []byte(counts.String()), 0o644))
		return
	}
	want, err := os.ReadFile(out)
	require.NoError(t, err, "run go test -update to create it")
	if diff := gocmp.Diff(string(want), counts.String()); diff != "" {
		t.Errorf("%s (-want +got):\n%s", out, diff)
	}
}

// cmpEmpty makes nil and empty slices equal.
var cmpEmpty = gocmp.FilterValues(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 }, gocmp.Ignore())

// emptyMissing reads the files of a directory, and files it lacks as
// empty ones, except the pipeline file itself.
type emptyMissing struct {
	src  compiler.FileSource
	main string
}

func (e emptyMissing) ReadFile(ctx context.Context, path string) ([]byte, error) {
	data, err := e.src.ReadFile(ctx, path)
	if errors.Is(err, fs.ErrNotExist) && path != e.main {
		return nil, nil
	}
	return data, err
}

// checkPlan checks what every plan must be: unique IDs, a graph over the
// jobs in order with their needs, and something to run in every job.
func checkPlan(t *testing.T, plan *compiler.Plan) {
	t.Helper()
	require.NotNil(t, plan)
	checkCompiled(t, plan, nil, "")
}

// TestGitLabEvents compiles one real-world shape for several events and
// checks which jobs the pipeline has.
func TestGitLabEvents(t *testing.T) {
	t.Parallel()
	src := []byte(`
stages: [build, test, deploy]
build:
  stage: build
  script: make
test:
  script: make test
  except: [/^docs-/]
mr:
  script: make review
  rules:
    - if: $CI_PIPELINE_SOURCE == "merge_request_event"
deploy:
  stage: deploy
  script: make deploy
  rules:
    - if: $CI_COMMIT_TAG
      when: manual
    - if: $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH
`)
	for _, tc := range []struct {
		name  string
		event *compiler.Event
		jobs  []string
	}{
		{"lint", nil, []string{"build", "test", "mr", "deploy"}},
		{"main", &compiler.Event{Name: "push", Branch: "main", DefaultBranch: "main"}, []string{"build", "test", "deploy"}},
		{"branch", &compiler.Event{Name: "push", Branch: "feature", DefaultBranch: "main"}, []string{"build", "test"}},
		{"docs", &compiler.Event{Name: "push", Ref: "refs/heads/docs-fix", DefaultBranch: "main"}, []string{"build"}},
		{"merge request", &compiler.Event{Name: "merge_request", Branch: "feature", BaseBranch: "main", DefaultBranch: "main"}, []string{"mr"}},
		{"tag", &compiler.Event{Name: "tag", Ref: "refs/tags/v1.0.0", DefaultBranch: "main"}, []string{"build", "test", "deploy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			plan, diags, err := compiler.CompileBytes(".gitlab-ci.yml", src, compiler.Options{Event: tc.event})
			require.NoError(t, err)
			require.Empty(t, diags)
			var ids []string
			for _, j := range plan.Jobs {
				ids = append(ids, j.ID)
			}
			require.Equal(t, tc.jobs, ids)
			if tc.name == "tag" {
				require.Equal(t, cikit.WhenManual, plan.Job("deploy").When)
				require.False(t, plan.Job("deploy").AllowFailure, "manual jobs of rules block")
			}
		})
	}
}

// TestGitLabLimits checks that small hostile files stay cheap: extends
// and !reference multiply content without aliases, so the GitLab front
// end bounds what jobs read as well.
func TestGitLabLimits(t *testing.T) {
	t.Parallel()
	compile := func(t *testing.T, src string) []compiler.Diagnostic {
		t.Helper()
		plan, diags, err := compiler.CompileBytes(".gitlab-ci.yml", []byte(src), compiler.Options{})
		require.NoError(t, err)
		require.Nil(t, plan)
		return diags
	}
	t.Run("extends", func(t *testing.T) {
		t.Parallel()
		var b strings.Builder
		b.WriteString(".t:\n  script:\n")
		for i := range 2000 {
			fmt.Fprintf(&b, "    - echo %d\n", i)
		}
		for i := range 1000 {
			fmt.Fprintf(&b, "j%d: {extends: .t}\n", i)
		}
		diags := compile(t, b.String())
		require.Len(t, diags, 1)
		require.Equal(t, compiler.RuleLimit, diags[0].Rule)
	})
	t.Run("references", func(t *testing.T) {
		t.Parallel()
		// Each level references the one before twice: 2^30 values.
		var b strings.Builder
		b.WriteString(".l0: {script: [x]}\n")
		for i := 1; i <= 30; i++ {
			fmt.Fprintf(&b, ".l%d: {script: [!reference [.l%d, script], !reference [.l%d, script]]}\n", i, i-1, i-1)
		}
		b.WriteString("job: {script: !reference [.l30, script]}\n")
		diags := compile(t, b.String())
		require.NotEmpty(t, diags)
		for _, d := range diags {
			require.Contains(t, []string{compiler.RuleLimit, compiler.RuleReference}, d.Rule, d.String())
		}
	})
	t.Run("extends depth", func(t *testing.T) {
		t.Parallel()
		var b strings.Builder
		b.WriteString(".e0: {script: [x]}\n")
		for i := 1; i <= 12; i++ {
			fmt.Fprintf(&b, ".e%d: {extends: .e%d}\n", i, i-1)
		}
		b.WriteString("job: {extends: .e12}\n")
		diags := compile(t, b.String())
		require.Len(t, diags, 1)
		require.Equal(t, compiler.RuleExtends, diags[0].Rule)
		require.Contains(t, diags[0].Message, "more than 10 levels")
	})
	t.Run("parallel", func(t *testing.T) {
		t.Parallel()
		var b strings.Builder
		b.WriteString(".t:\n  parallel: 200\n  script:\n")
		for i := range 100 {
			fmt.Fprintf(&b, "    - echo %d\n", i)
		}
		for i := range 200 {
			fmt.Fprintf(&b, "j%d: {extends: .t}\n", i)
		}
		diags := compile(t, b.String())
		require.Len(t, diags, 1)
		require.Equal(t, compiler.RuleLimit, diags[0].Rule)
	})
}

// TestGitLabExitCodes: allow_failure:exit_codes and retry:exit_codes reach
// the job's spec, without a warning, as the run-time decides with them.
func TestGitLabExitCodes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		job     string
		allow   bool
		allowOn []int
		retry   *cikit.Retry
	}{
		{name: "allow on codes", job: "allow_failure: {exit_codes: [1, 3]}", allow: true, allowOn: []int{1, 3}},
		{name: "allow on one code", job: "allow_failure: {exit_codes: 137}", allow: true, allowOn: []int{137}},
		{name: "allow any", job: "allow_failure: true", allow: true},
		{name: "retry on codes", job: "retry: {max: 2, exit_codes: [137]}", retry: &cikit.Retry{Max: 2, ExitCodes: []int{137}}},
		{name: "retry on codes or classes", job: "retry: {max: 1, when: runner_system_failure, exit_codes: 137}",
			retry: &cikit.Retry{Max: 1, When: []string{"runner_system_failure"}, ExitCodes: []int{137}}},
		{name: "retry always covers the codes", job: "retry: {max: 1, when: always, exit_codes: 137}", retry: &cikit.Retry{Max: 1}},
	} {
		src := "job:\n  script: make\n  " + c.job + "\n"
		plan, diags, err := compiler.CompileBytes(".gitlab-ci.yml", []byte(src), compiler.Options{})
		require.NoError(t, err, c.name)
		require.Empty(t, diags, c.name)
		job := plan.Job("job")
		require.Equal(t, c.allow, job.AllowFailure, c.name)
		require.Equal(t, c.allowOn, job.AllowFailureExitCodes, c.name)
		require.Equal(t, c.retry, job.Retry, c.name)
		require.Empty(t, job.Warnings, c.name)
	}
}

// TestGitLabManualAllowFailure: as in GitLab, a when: manual job without
// rules may fail (it does not block what comes after it: nobody may ever
// start it), and one made manual by its rules blocks the pipeline until
// it is started and passes, unless allow_failure: true is written, on
// the job or on the rule.
func TestGitLabManualAllowFailure(t *testing.T) {
	t.Parallel()
	src := []byte(`
plain:
  when: manual
  script: make
plain-blocking:
  when: manual
  allow_failure: false
  script: make
ruled:
  rules: [{when: manual}]
  script: make
ruled-job-may-fail:
  rules: [{when: manual}]
  allow_failure: true
  script: make
ruled-rule-may-fail:
  rules: [{when: manual, allow_failure: true}]
  script: make
ruled-rule-blocks:
  rules: [{when: manual, allow_failure: false}]
  allow_failure: true
  script: make
`)
	plan, diags, err := compiler.CompileBytes(".gitlab-ci.yml", src, compiler.Options{Event: &compiler.Event{Name: "push", Branch: "main", DefaultBranch: "main"}})
	require.NoError(t, err)
	require.Empty(t, diags)
	for id, mayFail := range map[string]bool{
		"plain": true, "plain-blocking": false,
		"ruled": false, "ruled-job-may-fail": true, "ruled-rule-may-fail": true, "ruled-rule-blocks": false,
	} {
		j := plan.Job(id)
		require.NotNil(t, j, id)
		require.Equal(t, cikit.WhenManual, j.When, id)
		require.Equal(t, mayFail, j.AllowFailure, id)
		require.Nil(t, j.Gate, "%s: a manual job waits for anyone who may start it, not for an approval", id)
	}
}

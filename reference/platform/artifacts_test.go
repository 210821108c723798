package platform_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// dagArtifacts is seed 004's pipeline: build makes a binary, unit and
// lint check it, and integration, which needs all three, runs exactly
// the bytes build made. Each prints the binary's SHA-256.
const dagArtifacts = `jobs:
  build:
    steps:
      - mkdir -p dist/empty && head -c 300000 /dev/urandom > dist/app && chmod 755 dist/app && ln -s app dist/current
      - echo "BUILT=$(sha256sum dist/app | cut -c1-64)"
    artifacts:
      paths: [dist/]
  unit:
    needs: [build]
    steps:
      - test -x dist/app && test -L dist/current && test -d dist/empty
  lint:
    needs: [build]
    steps:
      - test -s dist/app
  integration:
    needs: [build, unit, lint]
    steps:
      - echo "TESTED=$(sha256sum dist/current | cut -c1-64)"
`

// gitlabArtifacts: a job that needs build gets its files and its dotenv
// report's variables; one that needs it with artifacts: false gets
// neither.
const gitlabArtifacts = `stages: [build, test]
build:
  stage: build
  script:
    - mkdir -p dist && echo gitlab-bytes > dist/app
    - echo "BUILD_VERSION=1.2.3" > build.env
  artifacts:
    paths: [dist/]
    reports:
      dotenv: build.env
with-artifacts:
  stage: test
  needs: [build]
  script:
    - test "$(cat dist/app)" = gitlab-bytes
    - test "$BUILD_VERSION" = 1.2.3
without-artifacts:
  stage: test
  needs:
    - job: build
      artifacts: false
  script:
    - test ! -e dist/app
    - test -z "$BUILD_VERSION"
`

// githubArtifacts passes a file from one job to another with
// actions/upload-artifact and actions/download-artifact.
const githubArtifacts = `name: artifacts
on: push
jobs:
  up:
    runs-on: ubuntu-latest
    steps:
      - run: mkdir -p out && echo "made by up in run $GITHUB_RUN_ID" > out/note.txt && echo "UP=$(sha256sum out/note.txt | cut -c1-64)"
      - uses: actions/upload-artifact@v4
        id: upload
        with:
          name: note
          path: out/note.txt
      - run: test -n "${{ steps.upload.outputs.artifact-digest }}"
  down:
    needs: up
    runs-on: ubuntu-latest
    steps:
      - uses: actions/download-artifact@v4
        with:
          name: note
          path: got
      - run: echo "DOWN=$(sha256sum got/note.txt | cut -c1-64)"
`

var (
	builtRE  = regexp.MustCompile(`(?m)^BUILT=([0-9a-f]{64})$`)
	testedRE = regexp.MustCompile(`(?m)^TESTED=([0-9a-f]{64})$`)
	upRE     = regexp.MustCompile(`(?m)^UP=([0-9a-f]{64})$`)
	downRE   = regexp.MustCompile(`(?m)^DOWN=([0-9a-f]{64})$`)
)

// TestArtifactsAlongTheDAG: one push runs three pipelines. Native:
// build's dist/ reaches unit, lint and integration, and integration runs
// exactly the bytes build made (SHA-256 compared), symlink and empty
// directory included; the run's artifacts are listed with a download that
// gives the archive the listing's SHA-256 names. GitLab: the job that
// needs build gets its files and its dotenv variable, the one with
// needs:artifacts:false gets neither. GitHub: upload-artifact and
// download-artifact pass a file between two jobs.
func TestArtifactsAlongTheDAG(t *testing.T) {
	t.Parallel()
	artifactsAlongTheDAG(t, newArtifactsWorld(t))
}

// TestArtifactsAlongTheDAGPostgres is TestArtifactsAlongTheDAG on
// PostgreSQL, Redis and S3 (an S3 server in the test, through presigned
// URLs).
func TestArtifactsAlongTheDAGPostgres(t *testing.T) {
	t.Parallel()
	w := newArtifactsWorld(t)
	w.onPostgres(t)
	artifactsAlongTheDAG(t, w)
}

func newArtifactsWorld(t *testing.T) *world {
	w := newWorld(t, map[string]string{"README.md": "artifacts\n"})
	w.commit(t, "the pipelines", map[string]string{".cikit.yml": dagArtifacts, ".gitlab-ci.yml": gitlabArtifacts,
		".github/workflows/artifacts.yml": githubArtifacts})
	w.cfg.Runners.Local = 3
	return w
}

func artifactsAlongTheDAG(t *testing.T, w *world) {
	s := serve(t, w.cfg)
	base := s.p.URL()
	code, body := deliver(t, base, "delivery-artifacts", pushBody(w.sha))
	require.Equal(t, 202, code, body)

	states, run := w.waitFileStatuses(t, 3*time.Minute, ".cikit.yml", "build", "unit", "lint", "integration")
	require.Equal(t, map[string]string{"build": "success", "unit": "success", "lint": "success", "integration": "success"}, states)
	_, buildLog := jobWorldJob(t, base, run, "build")
	_, integrationLog := jobWorldJob(t, base, run, "integration")
	built, tested := builtRE.FindStringSubmatch(buildLog), testedRE.FindStringSubmatch(integrationLog)
	require.NotNil(t, built, buildLog)
	require.NotNil(t, tested, integrationLog)
	require.Equal(t, built[1], tested[1], "integration ran the bytes build made")

	var list struct {
		Artifacts []struct {
			JobID       string `json:"job_id"`
			Name        string `json:"name"`
			Size        int64  `json:"size"`
			SHA256      string `json:"sha256"`
			DownloadURL string `json:"download_url"`
		} `json:"artifacts"`
	}
	require.Equal(t, 200, getJSON(t, base+"/api/v1/runs/"+run+"/artifacts", &list))
	require.Len(t, list.Artifacts, 1, "%+v", list)
	a := list.Artifacts[0]
	require.Equal(t, "build", a.JobID)
	resp, err := doAsAdmin(mustRequest(t, http.MethodGet, base+a.DownloadURL))
	require.NoError(t, err)
	archive, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode, string(archive))
	sum := sha256.Sum256(archive)
	require.Equal(t, a.SHA256, hex.EncodeToString(sum[:]), "the download is the archive the manifest names")
	require.EqualValues(t, a.Size, len(archive))

	var job struct {
		Artifacts []struct {
			Name string `json:"name"`
		} `json:"artifacts"`
	}
	require.Equal(t, 200, getJSON(t, base+"/api/v1/runs/"+run+"/jobs/build", &job))
	require.Len(t, job.Artifacts, 1, "the job shows its artifact")

	states, _ = w.waitFileStatuses(t, 3*time.Minute, ".gitlab-ci.yml", "build", "with-artifacts", "without-artifacts")
	require.Equal(t, map[string]string{"build": "success", "with-artifacts": "success", "without-artifacts": "success"}, states)

	states, ghRun := w.waitFileStatuses(t, 3*time.Minute, ".github/workflows/artifacts.yml", "up", "down")
	require.Equal(t, map[string]string{"up": "success", "down": "success"}, states)
	_, upLog := jobWorldJob(t, base, ghRun, "up")
	_, downLog := jobWorldJob(t, base, ghRun, "down")
	up, down := upRE.FindStringSubmatch(upLog), downRE.FindStringSubmatch(downLog)
	require.NotNil(t, up, upLog)
	require.NotNil(t, down, downLog)
	require.Equal(t, up[1], down[1], "down got the file up uploaded")
}

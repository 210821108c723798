package process

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/fleet/runtime"
)

// A job's archives pass through a private directory beside its root,
// <root>.cikit-files: the executor's, out of the job's sandbox, which
// shows the root alone. sweep removes it with a dead executor's
// workspace.
const filesSuffix = ".cikit-files"

// errNoFiles is the reason of a job that needs an artifact store on a
// runner without one.
var errNoFiles = errors.New("this runner has no artifact store: the job declares artifacts or caches, or a step uses them (actions/cache, actions/upload-artifact, actions/download-artifact), and the runner was given none (process.Job.Files)")

// UsesFiles reports whether a job needs Job.Files whatever its needs
// left: it declares artifacts or caches, or a step of its uses an action
// that keeps or fetches files (actions/cache, actions/upload-artifact,
// actions/download-artifact). RunJob fails such a job without Files.
func UsesFiles(spec *cikit.JobSpec) bool {
	if len(spec.Caches) > 0 || spec.Artifacts != nil {
		return true
	}
	for _, s := range append(slices.Clip(spec.Steps), spec.AfterSteps...) {
		if builtinAction(s.Uses) != "" {
			return true
		}
	}
	return false
}

// filesDir returns the job's private directory for archives, creating
// it.
func (j *jobRun) filesDir() (string, error) {
	dir := j.root + filesSuffix
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	return dir, nil
}

// removeFilesDir removes the job's private directory.
func (j *jobRun) removeFilesDir() {
	if err := os.RemoveAll(j.root + filesSuffix); err != nil {
		j.e.cfg.Logger.Warn("could not remove a job's archive directory", "dir", j.root+filesSuffix, "err", err)
	}
}

// transferError is a failed transfer of an archive: what failed, to say
// in the job's log.
type transferError struct {
	what string
	err  error
}

func (e *transferError) Error() string { return e.what + ": " + e.err.Error() }
func (e *transferError) Unwrap() error { return e.err }

// fetched is an archive downloaded and unpacked.
type fetched struct {
	stats artifacts.PackStats
	took  time.Duration
}

// fetch downloads the archive req names, of size bytes and digest sum,
// into the job's private directory, checks both, and unpacks it into
// dest; a file the archive holds replaces the workspace's.
func (j *jobRun) fetch(ctx context.Context, req artifacts.Request, size int64, sum, dest string) (fetched, error) {
	started := time.Now()
	dir, err := j.filesDir()
	if err != nil {
		return fetched{}, &transferError{"the runner's archive directory", err}
	}
	f, err := os.CreateTemp(dir, "download-*")
	if err != nil {
		return fetched{}, &transferError{"the runner's archive directory", err}
	}
	defer func() {
		_ = f.Close()
		_ = os.Remove(f.Name())
	}()
	if err := j.e.cfg.Transfer.Download(ctx, req, size, sum, f); err != nil {
		return fetched{}, &transferError{"download", err}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fetched{}, &transferError{"download", err}
	}
	stats, err := artifacts.Unpack(ctx, f, dest, artifacts.UnpackOptions{})
	if err != nil {
		return fetched{}, &transferError{"unpacking", err}
	}
	if err := j.giveTree(dest); err != nil {
		return fetched{}, &transferError{"unpacking", err}
	}
	return fetched{stats: stats, took: time.Since(started)}, nil
}

// giveTree gives what is below dir to the user the sandbox runs jobs as,
// when that is not the executor's: unpacked files are the executor's.
func (j *jobRun) giveTree(dir string) error {
	e := j.e
	if e.sandbox == nil || e.sandbox.uid < 0 {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, e.sandbox.uid, e.sandbox.gid)
	})
}

// packed is an archive made in the job's private directory.
type packed struct {
	f      *os.File
	size   int64
	sha256 string
	stats  artifacts.PackStats
}

// close removes the archive.
func (p *packed) close() {
	_ = p.f.Close()
	_ = os.Remove(p.f.Name())
}

// pack archives opts into a file of the job's private directory and
// hashes it on the way. The caller closes what it returns.
func (j *jobRun) pack(ctx context.Context, opts artifacts.PackOptions) (*packed, error) {
	dir, err := j.filesDir()
	if err != nil {
		return nil, &transferError{"the runner's archive directory", err}
	}
	f, err := os.CreateTemp(dir, "upload-*")
	if err != nil {
		return nil, &transferError{"the runner's archive directory", err}
	}
	p := &packed{f: f}
	h := sha256.New()
	if p.stats, err = artifacts.Pack(ctx, io.MultiWriter(f, h), opts); err != nil {
		p.close()
		return nil, &transferError{"packing", err}
	}
	p.size, p.sha256 = p.stats.Size, hex.EncodeToString(h.Sum(nil))
	return p, nil
}

// upload sends an archive pack made, as req says with its size, digest
// and file count.
func (j *jobRun) upload(ctx context.Context, p *packed, req artifacts.UploadRequest) (*artifacts.Artifact, error) {
	req.Size, req.SHA256, req.Files = p.size, p.sha256, p.stats.Files
	a, err := j.e.cfg.Transfer.Upload(ctx, j.job.Files, req, p.f)
	if err != nil {
		return nil, &transferError{"upload", err}
	}
	return a, nil
}

// untracked lists the files of the work tree at ws that git does not
// track and does not ignore, relative to ws. It runs git in the
// executor's process, on a work tree the job wrote: with no system or
// global configuration, no repository discovery above ws, and the
// repository's own settings that would run commands (core.fsmonitor)
// overridden.
func untracked(ctx context.Context, ws string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "git", "-c", "core.fsmonitor=false", "-c", "safe.directory=*",
		"ls-files", "--others", "--exclude-standard", "-z")
	cmd.Dir = ws
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CEILING_DIRECTORIES=" + filepath.Dir(ws), "GIT_TERMINAL_PROMPT=0", "HOME=" + ws}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files --others (for untracked files): %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var files []string
	for _, name := range strings.Split(string(out), "\x00") {
		if name != "" {
			files = append(files, name)
		}
	}
	return files, nil
}

// sizeString shows a size as people read it: "512 bytes", "3.4 MiB".
func sizeString(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " bytes"
	}
	f, u := float64(n), 0
	for f >= unit && u < 3 {
		f /= unit
		u++
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + [...]string{"", "KiB", "MiB", "GiB"}[u]
}

// short abbreviates a digest for the log.
func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12] + "…"
	}
	return sum
}

// files counts files for the log.
func files(n int) string {
	if n == 1 {
		return "1 file"
	}
	return strconv.Itoa(n) + " files"
}

// downloadNeeds fetches the artifacts of the jobs the job needs, but
// those of NoArtifactsFrom, into the workspace, before the first step.
// A job with no such needs, or on a runner without Files, fetches
// nothing, and so does a GitHub job, whose steps download artifacts
// (actions/download-artifact). Any failure fails the job.
func (j *jobRun) downloadNeeds(ctx context.Context) *checkoutError {
	if j.github {
		return nil
	}
	var needs []string
	for _, n := range j.spec.Needs {
		if !slices.Contains(j.spec.NoArtifactsFrom, n) {
			needs = append(needs, n)
		}
	}
	if len(needs) == 0 || j.job.Files == nil {
		return nil
	}
	list, err := j.job.Files.ListArtifacts(ctx, artifacts.ListRequest{Jobs: needs, Type: artifacts.TypeArchive})
	if err != nil {
		return &checkoutError{cikit.FailureInfrastructure, fmt.Errorf("artifacts: listing the artifacts of %s: %w", strings.Join(needs, ", "), err)}
	}
	for _, a := range list {
		if a.Download == nil {
			return &checkoutError{cikit.FailureInfrastructure, fmt.Errorf("artifacts: %s's %q: the artifact store gave no download", a.JobID, a.Name)}
		}
		got, err := j.fetch(ctx, *a.Download, a.Size, a.SHA256, j.ws)
		if err != nil {
			return &checkoutError{cikit.FailureInfrastructure, fmt.Errorf("artifacts: %s's %q (%s, sha256 %s): %w", a.JobID, a.Name, sizeString(a.Size), a.SHA256, err)}
		}
		fmt.Fprintf(j.pw, "--- artifacts: %s's %q (%s, %s, sha256 %s) downloaded in %s\n",
			a.JobID, a.Name, files(got.stats.Files), sizeString(a.Size), short(a.SHA256), got.took.Round(time.Millisecond))
	}
	return nil
}

// whenMatches reports whether artifacts:when or cache:when, when, asks
// to keep the files of a job that ended in state.
func whenMatches(when string, state cikit.JobState) bool {
	switch state {
	case cikit.JobSucceeded:
		return when == "" || when == string(cikit.WhenOnSuccess) || when == string(cikit.WhenAlways)
	case cikit.JobFailed:
		return when == string(cikit.WhenOnFailure) || when == string(cikit.WhenAlways)
	}
	return false // cancelled: nothing is kept, as GitLab does
}

// uploadArtifacts uploads the job's artifacts and reports at its end,
// when its outcome (res.State) asks for them, and reads its dotenv
// report into res.Outputs. An upload that fails fails the job.
func (j *jobRun) uploadArtifacts(ctx context.Context, res *Result) {
	a := j.spec.Artifacts
	if a == nil || j.job.Files == nil || res.State == cikit.JobCancelled {
		return
	}
	expire := a.ExpireIn
	if a.ExpireNever {
		expire = -1
	}
	if len(a.Paths) > 0 || a.Untracked {
		if whenMatches(a.When, res.State) {
			name := cmp.Or(a.Name, "artifacts")
			j.uploadPaths(ctx, res, "artifacts", a.Paths, a.Exclude, a.Untracked,
				artifacts.UploadRequest{Name: name, Type: artifacts.TypeArchive, ExpireIn: expire})
		} else {
			fmt.Fprintf(j.pw, "--- artifacts: not uploaded: artifacts:when is %s and the job %s\n", cmp.Or(a.When, string(cikit.WhenOnSuccess)), res.State)
		}
	}
	// Reports are kept whatever the outcome, as GitLab does.
	for _, typ := range slices.Sorted(maps.Keys(a.Reports)) {
		if typ == "dotenv" {
			j.readDotenv(res, a.Reports[typ])
			continue
		}
		j.uploadPaths(ctx, res, "report "+typ, a.Reports[typ], nil, false,
			artifacts.UploadRequest{Name: "report-" + typ, Type: artifacts.TypeReport, Report: typ, ExpireIn: expire})
	}
}

// uploadPaths packs paths of the workspace (globs, less exclude, with
// the untracked files) and uploads them as req says; what says what they
// are in the log. No file matched is a warning and nothing is uploaded;
// a failure fails the job.
func (j *jobRun) uploadPaths(ctx context.Context, res *Result, what string, paths, exclude []string, withUntracked bool, req artifacts.UploadRequest) {
	opts := artifacts.PackOptions{Root: j.ws, Paths: paths, Exclude: exclude}
	if withUntracked {
		var err error
		if opts.Files, err = untracked(ctx, j.ws); err != nil {
			j.filesFailed(res, fmt.Sprintf("%s: %v", what, err))
			return
		}
	}
	started := time.Now()
	p, err := j.pack(ctx, opts)
	if err != nil {
		j.filesFailed(res, fmt.Sprintf("%s %q: %v", what, req.Name, err))
		return
	}
	defer p.close()
	if p.stats.Files == 0 && p.stats.Symlinks == 0 {
		fmt.Fprintf(j.pw, "--- warning: %s %q: no files matched %s; nothing uploaded\n", what, req.Name, strings.Join(paths, ", "))
		return
	}
	if _, err := j.upload(ctx, p, req); err != nil {
		j.filesFailed(res, fmt.Sprintf("%s %q (%s, %s): %v", what, req.Name, files(p.stats.Files), sizeString(p.size), err))
		return
	}
	fmt.Fprintf(j.pw, "--- %s: %q (%s, %s, sha256 %s) uploaded in %s\n",
		what, req.Name, files(p.stats.Files), sizeString(p.size), short(p.sha256), time.Since(started).Round(time.Millisecond))
}

// filesFailed fails the job because keeping its files failed; a job
// that failed already keeps its reason, and the log says both.
func (j *jobRun) filesFailed(res *Result, reason string) {
	fmt.Fprintf(j.pw, "--- %s\n", reason)
	if res.State == cikit.JobSucceeded {
		res.State, res.Reason, res.FailureClass = cikit.JobFailed, reason, cikit.FailureInfrastructure
	}
}

// readDotenv reads the job's dotenv reports into res.Outputs, GitLab's
// way: a file that is missing or breaks GitLab's rules is a warning, and
// then the job passes no variables on.
func (j *jobRun) readDotenv(res *Result, paths []string) {
	vars := map[string]string{}
	for _, p := range paths {
		got, err := j.readDotenvFile(p)
		if err != nil {
			fmt.Fprintf(j.pw, "--- warning: dotenv report %s: %v; the job passes no variables on\n", p, err)
			return
		}
		maps.Copy(vars, got)
	}
	if len(vars) > cikit.MaxDotenvVariables {
		fmt.Fprintf(j.pw, "--- warning: the dotenv reports set %d variables; at most %d are allowed; the job passes no variables on\n", len(vars), cikit.MaxDotenvVariables)
		return
	}
	if len(vars) == 0 {
		return
	}
	if res.Outputs == nil {
		res.Outputs = map[string]string{}
	}
	maps.Copy(res.Outputs, vars)
	fmt.Fprintf(j.pw, "--- dotenv: %d variables for the jobs that need this one (%s)\n", len(vars), strings.Join(slices.Sorted(maps.Keys(vars)), ", "))
}

// readDotenvFile reads one dotenv report of the workspace, through no
// link out of it.
func (j *jobRun) readDotenvFile(p string) (map[string]string, error) {
	if filepath.IsAbs(p) {
		return nil, errors.New("the path must be relative to the workspace")
	}
	r, err := os.OpenRoot(j.ws)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.Open(filepath.Clean(p))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, cikit.MaxDotenvBytes+1))
	if err != nil {
		return nil, err
	}
	return runtime.ParseDotenv(data)
}

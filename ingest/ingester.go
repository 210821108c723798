package ingest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/singleflight"

	"github.com/cikit/cikit/compiler"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/status"
)

// DefaultDebounce is how long a push to a branch other than the default
// one waits before it builds (seed 002): time for the pull request whose
// head it is to show, so that one push builds once.
const DefaultDebounce = 2 * time.Second

// PipelineFiles are the files an Ingester looks for at a commit: the
// native format, GitLab's, and every GitHub workflow.
var PipelineFiles = []string{".cikit.yml", ".gitlab-ci.yml", ".github/workflows/*.yml", ".github/workflows/*.yaml"}

// IsPipelineFile reports whether p is a path PipelineFiles names: one an
// event may target (Event.Pipeline).
func IsPipelineFile(p string) bool {
	for _, pattern := range PipelineFiles {
		if ok, _ := path.Match(pattern, p); ok {
			return true
		}
	}
	return false
}

// IngesterConfig configures an Ingester.
type IngesterConfig struct {
	// Runs records deliveries and creates their runs. Required.
	Runs RunStore
	// VCS reads pipelines at the event's commit and answers whether a
	// branch has an open pull request. Required.
	VCS vcs.Provider
	// Debounce is how long a push to a branch other than the default one
	// waits before it is decided; DefaultDebounce when zero, none when
	// negative.
	Debounce time.Duration
	// Sleep waits for d, or returns ctx's error when it ends first.
	// Default: a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxMatrixJobs bounds each matrix's expansion, MaxJobs the jobs of
	// a run and MaxFileBytes a pipeline file (compiler.Options). A
	// pipeline past one of them does not compile: the delivery is
	// dropped with the diagnostic as its reason, as for any pipeline
	// that does not compile.
	MaxMatrixJobs int
	MaxJobs       int
	MaxFileBytes  int
	// ConfigCache is how many reads of pipeline files at commits the
	// Ingester keeps (vcs.Cached): every event about a commit reads the
	// same files, and a forge counts each read against its rate limit.
	// Default: DefaultConfigCache; negative disables it.
	ConfigCache int
	// SeenCache is how many recent deliveries the Ingester remembers, so
	// that a storm of redeliveries is absorbed without asking the store.
	// Default: DefaultSeenCache; negative disables it.
	SeenCache int
	// Statuses, when set, receives a success status "skipped: no
	// matching paths" on the event's commit for each pipeline that only
	// its path filters kept from running (its context is
	// status.PipelineContext of the file), so that checks a branch
	// protection requires do not wait forever, and a failure status
	// "does not compile: …" with the first error for each pipeline file
	// that does not compile (a key refused as not supported among them),
	// so that such a push is never silent on the forge. A
	// *status.Reporter fits.
	Statuses interface {
		Report(repo, sha string, st vcs.Status) error
	}
	// Admit, when set, is asked about every run the Ingester is about
	// to create, after the pipeline compiled and before the runs are
	// created (RunStore.CreateRuns): it may change the specs of
	// run.Jobs (set their Admission and Gate, as a platform's policy
	// decides) or refuse. It is called once per run, in pipeline file
	// order, and again when the delivery is retried, so it decides from
	// its arguments and does not count calls.
	//
	// An error matching ErrRefused refuses the event: none of its runs
	// is created, the delivery is dropped with the refusal as its reason
	// (as for a pipeline that does not compile), and Statuses, when set,
	// receives a failure status "refused by policy: …" for the refused
	// pipeline's file. Any other error is transient: Ingest returns it,
	// and the delivery is tried again later, as after a VCS failure (a
	// ManualTrigger answers 503).
	Admit func(ctx context.Context, ev *Event, run *dag.RunCreateParams, facts AdmitFacts) error
	// Logger receives a line per decision. Default: slog.Default().
	Logger *slog.Logger
}

// AdmitFacts are what the Ingester knows of a run that its event does
// not say, for IngesterConfig.Admit.
type AdmitFacts struct {
	// Pipeline is the run's pipeline file (".github/workflows/ci.yml").
	Pipeline string
	// ChangedFiles are the files the event changes: those its payload
	// lists, or those the VCS says a pull request changes against its
	// base and a push since the commit before. Nil when they are not
	// known (a dispatch, a new branch, a forced push, a VCS failure).
	ChangedFiles []string
	// PipelineFileChanged says the event may change what runs: the
	// changed files are not known, or include the run's pipeline file,
	// another file IsPipelineFile accepts, or a file the pipeline
	// includes or calls (compiler.Plan.Files).
	PipelineFileChanged bool
}

// ErrRefused is matched by the errors of IngesterConfig.Admit that
// refuse an event: its pipelines must not run at all. Wrap it with the
// reason, as fmt.Errorf("%w: fork pull requests may not deploy",
// ErrRefused); the reason is shown in the delivery's record and the
// commit status.
var ErrRefused = errors.New("refused by policy")

// Ingester turns events into pipeline runs: it skips what was seen,
// debounces branch pushes in favour of pull requests, reads every
// pipeline file at the event's commit, compiles it with the event,
// keeps those the event triggers, and creates their runs together with
// the delivery's record (RunStore.CreateRuns). It is safe for concurrent
// use; events of one ref must come in order (the Kafka consumer keys by
// ref), since ordering is judged by event time against what was seen.
type Ingester struct {
	cfg  IngesterConfig
	log  *slog.Logger
	seen *seenCache // nil when disabled
	// inflight joins the concurrent ingestions of one delivery: the
	// copies of a redelivery storm wait for the first instead of each
	// asking the store.
	inflight singleflight.Group
}

// DefaultConfigCache is the default IngesterConfig.ConfigCache.
const DefaultConfigCache = 4096

// DefaultSeenCache is the default IngesterConfig.SeenCache.
const DefaultSeenCache = 100_000

// NewIngester returns an Ingester.
func NewIngester(cfg IngesterConfig) (*Ingester, error) {
	if cfg.Runs == nil || cfg.VCS == nil {
		return nil, errors.New("ingest: IngesterConfig needs Runs and VCS")
	}
	if cfg.ConfigCache >= 0 {
		cfg.VCS = vcs.Cached(cfg.VCS, cmp.Or(cfg.ConfigCache, DefaultConfigCache))
	}
	if cfg.Debounce == 0 {
		cfg.Debounce = DefaultDebounce
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	in := &Ingester{cfg: cfg, log: log}
	if cfg.SeenCache == 0 {
		cfg.SeenCache = DefaultSeenCache
	}
	if cfg.SeenCache > 0 {
		in.seen = newSeenCache(cfg.SeenCache)
	}
	return in, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Ingest creates the runs of ev, once however often it is delivered, and
// returns the delivery's record; created is false when the delivery (or
// its semantic key) was taken in before. A delivery whose key was taken
// in with another body (Delivery.RawDigest) is not a redelivery: it is
// dropped all the same, and logged as a warning with both digests. An error from a malformed event
// matches ErrMalformed; any other is transient (the VCS or the store
// failed): the caller delivers ev again later. An event without a SHA (a
// tag created, a dispatch) is given its ref's current commit.
func (in *Ingester) Ingest(ctx context.Context, ev *Event) (*Delivery, bool, error) {
	if err := validate(ev); err != nil {
		return nil, false, err
	}
	if ev.SHA == "" {
		// A tag created or a dispatch names a ref, not a commit: the
		// commit is the ref's now.
		if err := in.resolve(ctx, ev); err != nil {
			return nil, false, err
		}
	}
	if d := in.seen.get(ev); d != nil {
		in.logConflict(ctx, ev, d)
		return d, false, nil
	}
	first := false
	key, _ := cacheKeys(ev)
	v, err, _ := in.inflight.Do(key, func() (any, error) {
		first = true
		d, ok, err := in.ingest(ctx, ev)
		return created{d, ok}, err
	})
	if err != nil {
		return nil, false, err
	}
	r := v.(created)
	made := r.created && first
	if !made {
		in.logConflict(ctx, ev, r.d)
	}
	return r.d.clone(), made, nil
}

// logConflict logs a delivery dropped because its key (provider, hook,
// delivery id) was taken in before, when the record's body differs: not
// a redelivery but a forgery or a sender's bug, which the Receiver could
// not refuse (it went to another server, or came after a restart).
func (in *Ingester) logConflict(ctx context.Context, ev *Event, d *Delivery) {
	if d.Provider != ev.Provider || d.HookID != ev.HookID || d.DeliveryID != ev.DeliveryID {
		return // found by its semantic key: another delivery id
	}
	digest := ev.RawDigest()
	if d.RawDigest == "" || digest == "" || d.RawDigest == digest {
		return
	}
	in.log.WarnContext(ctx, "conflicting redelivery dropped: its delivery id was taken in with another body",
		"delivery", ev.DeliveryID, "provider", ev.Provider, "hook_id", ev.HookID, "key", ev.Key(),
		"digest_recorded", d.RawDigest, "digest", digest, "runs", d.RunIDs)
}

// ingest is Ingest of a delivery not in the cache, once at a time per
// delivery.
func (in *Ingester) ingest(ctx context.Context, ev *Event) (d *Delivery, created bool, err error) {
	if d, err := in.cfg.Runs.Seen(ctx, ev); err != nil || d != nil {
		if d != nil {
			in.seen.put(ev, d)
		}
		return d, false, err
	}
	reason, err := in.yield(ctx, ev)
	if err != nil {
		return nil, false, err
	}
	p := &CreateRunsParams{Event: ev, Reason: reason}
	var notRun []vcs.Status
	if reason == "" {
		if p.Runs, p.Reason, notRun, err = in.plan(ctx, ev); err != nil {
			return nil, false, err
		}
	}
	d, created, err = in.cfg.Runs.CreateRuns(ctx, p)
	if err != nil {
		return nil, false, err
	}
	in.seen.put(ev, d)
	if created && (len(d.RunIDs) > 0 || d.Dropped == p.Reason) {
		in.reportNotRun(ctx, ev, notRun)
	}
	if created {
		in.log.InfoContext(ctx, "delivery taken in", "delivery", ev.DeliveryID, "key", ev.Key(), "sha", ev.SHA,
			"runs", d.RunIDs, "dropped", d.Dropped)
	}
	return d, created, nil
}

// ErrMalformed is matched by the errors of events that cannot be
// ingested whatever happens: retrying them is no use.
var ErrMalformed = errors.New("ingest: malformed event")

// validate refuses an event that cannot be ingested whatever happens: it
// is malformed, and retrying will not help (see Permanent).
func validate(ev *Event) error {
	switch {
	case ev == nil:
		return fmt.Errorf("%w: no event", ErrMalformed)
	case ev.Provider == "" || ev.DeliveryID == "":
		return fmt.Errorf("%w: no provider or delivery id", ErrMalformed)
	case ev.Org == "" || ev.Repo == "" || ev.RefName == "":
		return fmt.Errorf("%w: delivery %s names no repository or ref", ErrMalformed, ev.DeliveryID)
	}
	return nil
}

// resolve sets ev.SHA to the commit its ref points at. A ref that does
// not exist makes the event malformed: nothing can be built for it.
func (in *Ingester) resolve(ctx context.Context, ev *Event) error {
	ref := ev.RefName
	if ev.RefType == RefTag {
		ref = "refs/tags/" + ref
	}
	sha, err := in.cfg.VCS.ResolveRef(ctx, ev.Org+"/"+ev.Repo, ref)
	switch {
	case vcs.IsNotFound(err):
		return fmt.Errorf("%w: delivery %s: %s/%s has no ref %s", ErrMalformed, ev.DeliveryID, ev.Org, ev.Repo, ref)
	case err != nil:
		return err
	}
	ev.SHA = sha
	return nil
}

// yield debounces a push to a branch other than the default one: after
// the window, a pull request seen with the push's commit at its head, or
// an open pull request of the branch, builds it instead. It returns the
// reason the push yields, or "" when it builds.
func (in *Ingester) yield(ctx context.Context, ev *Event) (string, error) {
	if ev.Kind != KindPush || ev.RefType != RefBranch || ev.DefaultBranch == "" || ev.RefName == ev.DefaultBranch || in.cfg.Debounce < 0 {
		return "", nil
	}
	if err := in.cfg.Sleep(ctx, in.cfg.Debounce); err != nil {
		return "", err
	}
	n, ok, err := in.cfg.Runs.PullRequestHead(ctx, ev.Org, ev.Repo, ev.RefName, ev.SHA)
	if err != nil {
		return "", err
	}
	if ok {
		return fmt.Sprintf("the push yields to pull request #%d, which builds %s", n, ev.SHA), nil
	}
	n, ok, err = in.cfg.VCS.OpenPullRequest(ctx, ev.Org+"/"+ev.Repo, ev.RefName)
	if err != nil {
		// Building twice is better than not at all.
		in.log.WarnContext(ctx, "cannot tell whether the branch has a pull request; building the push",
			"delivery", ev.DeliveryID, "branch", ev.RefName, "err", err)
		return "", nil
	}
	if ok {
		return fmt.Sprintf("the push yields to open pull request #%d of %s", n, ev.RefName), nil
	}
	return "", nil
}

// reportNotRun reports the statuses of the pipeline files that do not
// run: a success for those only their path filters kept from running, a
// failure saying why for those that do not compile.
func (in *Ingester) reportNotRun(ctx context.Context, ev *Event, sts []vcs.Status) {
	if in.cfg.Statuses == nil {
		return
	}
	for _, st := range sts {
		if err := in.cfg.Statuses.Report(ev.Org+"/"+ev.Repo, ev.SHA, st); err != nil {
			in.log.WarnContext(ctx, "reporting a pipeline that does not run", "context", st.Context, "sha", ev.SHA, "err", err)
		}
	}
}

// changedFiles asks the provider which files ev changes when its payload
// did not say: a pull request's against its base branch, a push's since
// the commit before. It returns nil (unknown: path filters pass) when it
// cannot tell.
func (in *Ingester) changedFiles(ctx context.Context, ev *Event) []string {
	repo := ev.Org + "/" + ev.Repo
	var base string
	switch {
	case ev.Kind == KindPullRequest && ev.BaseRef != "":
		sha, err := in.cfg.VCS.ResolveRef(ctx, repo, ev.BaseRef)
		if err != nil {
			in.log.WarnContext(ctx, "cannot resolve the pull request's base; path filters not checked", "base", ev.BaseRef, "err", err)
			return nil
		}
		base = sha
	case ev.Kind == KindPush && ev.Before != "" && strings.Trim(ev.Before, "0") != "":
		base = ev.Before
	default:
		return nil
	}
	files, err := in.cfg.VCS.ChangedFiles(ctx, repo, base, ev.SHA)
	if err != nil {
		in.log.WarnContext(ctx, "cannot list the changed files; path filters not checked", "base", base, "head", ev.SHA, "err", err)
		return nil
	}
	if ev.Kind == KindPush {
		// A push compares with what the branch held. ChangedFiles is
		// three-dot, which is that only when the push moved the branch
		// forward; after a forced push (the old head has changes of its
		// own) the changes are unknown.
		back, err := in.cfg.VCS.ChangedFiles(ctx, repo, ev.SHA, base)
		if err != nil || len(back) > 0 {
			return nil
		}
	}
	if files == nil {
		files = []string{}
	}
	return files
}

// plan reads and compiles the pipelines at ev's commit and returns the
// runs of those ev triggers, or the reason there are none, and the
// statuses of the pipelines that do not run and say so on the commit:
// those only their path filters keep from running, and those that do not
// compile.
func (in *Ingester) plan(ctx context.Context, ev *Event) ([]*dag.RunCreateParams, string, []vcs.Status, error) {
	repo := ev.Org + "/" + ev.Repo
	files, err := in.pipelineFiles(ctx, repo, ev.SHA)
	if err != nil {
		return nil, "", nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Sprintf("%s has no pipeline at %s", repo, ev.SHA), nil, nil
	}
	if ev.Pipeline != "" {
		// A dispatch of one pipeline (GitHub's workflow_dispatch names
		// its workflow): the others neither run nor check its inputs.
		if !slices.Contains(files, ev.Pipeline) {
			return nil, fmt.Sprintf("%s has no pipeline %s at %s", repo, ev.Pipeline, ev.SHA), nil, nil
		}
		files = []string{ev.Pipeline}
	}
	cev := compilerEvent(ev)
	if cev.ChangedFiles == nil {
		cev.ChangedFiles = in.changedFiles(ctx, ev)
	}
	var notRun []vcs.Status
	src := &source{vcs: in.cfg.VCS, repo: repo, sha: ev.SHA}
	var runs []*dag.RunCreateParams
	var facts []AdmitFacts // of runs
	var why []string
	compile := func(f string, cev *compiler.Event) (*compiler.Plan, []compiler.Diagnostic, error) {
		return compiler.Compile(ctx, src, f, compiler.Options{Event: cev, MaxMatrixJobs: in.cfg.MaxMatrixJobs,
			MaxJobs: in.cfg.MaxJobs, MaxFileBytes: in.cfg.MaxFileBytes})
	}
	for _, f := range files {
		plan, diags, err := compile(f, cev)
		if err != nil {
			if ctx.Err() != nil || !errors.Is(err, vcs.ErrNotFound) && !isCompileRefusal(err) {
				return nil, "", nil, fmt.Errorf("ingest: compile %s of %s at %s: %w", f, repo, ev.SHA, err)
			}
			why = append(why, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		if compiler.HasErrors(diags) {
			why = append(why, fmt.Sprintf("%s does not compile: %s", f, diags[0]))
			if first, ok := refusal(diags); ok {
				notRun = append(notRun, vcs.Status{Context: status.PipelineContext(f), State: vcs.StateFailure,
					Description: fmt.Sprintf("does not compile: %s", first)})
			}
			continue
		}
		if ok, reason := plan.Triggered(cev); !ok {
			why = append(why, f+": "+reason)
			if plan.SkippedByPaths(cev) {
				notRun = append(notRun, vcs.Status{Context: status.PipelineContext(f), State: vcs.StateSuccess, Description: "skipped: no matching paths"})
			}
			continue
		}
		var inputs compiler.InputValues
		if ev.Kind == KindDispatch {
			// The whole trigger is refused when one pipeline it starts
			// does not take its inputs: no run of the others either.
			if inputs, err = plan.CheckInputs(ev.Variables); err != nil {
				return nil, "", nil, fmt.Errorf("%w: %w", ErrMalformed, err)
			}
			if plan.Format != compiler.FormatGitLab && len(inputs.Values) > 0 {
				// Compile again with the inputs typed, as the
				// pipeline's conditions compare them.
				typed := *cev
				typed.Inputs = inputs.Typed()
				if plan, diags, err = compile(f, &typed); err != nil {
					return nil, "", nil, fmt.Errorf("ingest: compile %s of %s at %s: %w", f, repo, ev.SHA, err)
				}
				if compiler.HasErrors(diags) {
					why = append(why, fmt.Sprintf("%s does not compile: %s", f, diags[0]))
					continue
				}
			}
		}
		if len(plan.Jobs) == 0 {
			why = append(why, f+": no job runs for this event")
			continue
		}
		rc, note := RunContext(ev, plan.Format)
		if ev.Kind == KindDispatch {
			note = cmp.Or(withInputs(rc, inputs, plan.Format), note)
		}
		if note != "" {
			in.log.WarnContext(ctx, "ingest: "+note, "repo", repo, "sha", ev.SHA, "file", f, "delivery", ev.DeliveryID)
		}
		runs = append(runs, &dag.RunCreateParams{
			Jobs: plan.Jobs, Pipeline: repo + ":" + f, Branch: branchOf(ev), SHA: ev.SHA,
			DefaultBranch: ev.RefType == RefBranch && ev.RefName == ev.DefaultBranch, Context: rc,
		})
		facts = append(facts, admitFacts(f, cev.ChangedFiles, plan.Files))
	}
	if len(runs) == 0 {
		return nil, strings.Join(why, "; "), notRun, nil
	}
	if in.cfg.Admit != nil {
		for i, run := range runs {
			err := in.cfg.Admit(ctx, ev, run, facts[i])
			switch {
			case errors.Is(err, ErrRefused):
				f := facts[i].Pipeline
				reason := refusedText(err)
				in.log.InfoContext(ctx, "ingest: event refused", "repo", repo, "sha", ev.SHA, "file", f, "delivery", ev.DeliveryID, "reason", reason)
				notRun = append(notRun, vcs.Status{Context: status.PipelineContext(f), State: vcs.StateFailure, Description: reason})
				return nil, f + " " + reason, notRun, nil
			case err != nil:
				return nil, "", nil, fmt.Errorf("ingest: admitting the run of %s of %s at %s: %w", facts[i].Pipeline, repo, ev.SHA, err)
			}
		}
	}
	return runs, "", notRun, nil
}

// admitFacts are the AdmitFacts of a run of pipeline, compiled from
// files, for an event that changes changed (nil: unknown).
func admitFacts(pipeline string, changed, files []string) AdmitFacts {
	facts := AdmitFacts{Pipeline: pipeline, ChangedFiles: slices.Clone(changed), PipelineFileChanged: changed == nil}
	for _, c := range changed {
		if c == pipeline || IsPipelineFile(c) || slices.Contains(files, c) {
			facts.PipelineFileChanged = true
			break
		}
	}
	return facts
}

// refusedText is an Admit refusal as the delivery and the commit status
// say it: "refused by policy: " and the reason.
func refusedText(err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, ErrRefused.Error()) {
		return msg
	}
	return ErrRefused.Error() + ": " + msg
}

// refusal returns the first error of diags that makes the file a broken
// pipeline, which its commit status reports. Only errors saying that no
// job runs for the event (GitLab creates no pipeline then) are none: they
// are no failure of the commit.
func refusal(diags []compiler.Diagnostic) (compiler.Diagnostic, bool) {
	for _, d := range diags {
		if d.Severity == compiler.SeverityError && d.Rule != compiler.RuleJobs {
			return d, true
		}
	}
	return compiler.Diagnostic{}, false
}

// isCompileRefusal reports whether a compile error is the file's fault
// (an unknown format), which no retry cures.
func isCompileRefusal(err error) bool {
	return errors.Is(err, compiler.ErrUnknownFormat)
}

// pipelineFiles lists the PipelineFiles present in repo at sha.
func (in *Ingester) pipelineFiles(ctx context.Context, repo, sha string) ([]string, error) {
	var files []string
	dirs := map[string][]string{}
	for _, pattern := range PipelineFiles {
		dir, name := path.Split(pattern)
		dir = strings.TrimSuffix(dir, "/")
		if !strings.ContainsAny(name, "*?[") {
			// Whether it exists: the compiler reads it, bounded.
			_, err := vcs.ReadFileMax(ctx, in.cfg.VCS, repo, sha, pattern, in.maxFileBytes())
			_, tooLarge := errors.AsType[*vcs.FileTooLargeError](err)
			switch {
			case err == nil || tooLarge:
				files = append(files, pattern)
			case !vcs.IsNotFound(err):
				return nil, err
			}
			continue
		}
		names, ok := dirs[dir]
		if !ok {
			var err error
			names, err = in.cfg.VCS.ReadDir(ctx, repo, sha, dir)
			if err != nil && !vcs.IsNotFound(err) {
				return nil, err
			}
			dirs[dir] = names
		}
		for _, n := range names {
			if ok, _ := path.Match(name, n); ok {
				files = append(files, path.Join(dir, n))
			}
		}
	}
	return files, nil
}

// source is a compiler.FileSource over a repository at a commit.
type source struct {
	vcs       vcs.Provider
	repo, sha string
}

func (s *source) ReadFile(ctx context.Context, p string) ([]byte, error) {
	return s.vcs.ReadFile(ctx, s.repo, s.sha, p)
}

// ReadFileMax makes source a compiler.MaxFileSource: a pipeline file
// larger than the compiler's bound is refused from its size, without
// being read, when the provider can (vcs.MaxReader).
func (s *source) ReadFileMax(ctx context.Context, p string, max int) ([]byte, error) {
	data, err := vcs.ReadFileMax(ctx, s.vcs, s.repo, s.sha, p, int64(max))
	if tl, ok := errors.AsType[*vcs.FileTooLargeError](err); ok {
		return nil, &compiler.FileTooLargeError{Path: p, Size: tl.Size}
	}
	return data, err
}

// ListFiles makes source a compiler.FileLister, so that GitLab's
// rules:exists globs are decided from the commit's files, when the
// provider can list them (vcs.FileLister); otherwise the error says it
// cannot, and the compiler keeps the job the glob guards, undecided.
func (s *source) ListFiles(ctx context.Context, dir string, max int) ([]string, error) {
	files, err := vcs.ListFiles(ctx, s.vcs, s.repo, s.sha, dir, max)
	switch {
	case errors.Is(err, vcs.ErrTooManyFiles):
		return files, fmt.Errorf("%w: %w", compiler.ErrTooManyFiles, err)
	case errors.Is(err, vcs.ErrNotFound):
		return nil, fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	return files, err
}

// maxFileBytes is the compiler's bound on a pipeline file.
func (in *Ingester) maxFileBytes() int64 {
	return int64(cmp.Or(in.cfg.MaxFileBytes, compiler.DefaultMaxFileBytes))
}

func branchOf(ev *Event) string {
	if ev.RefType == RefBranch {
		return ev.RefName
	}
	return ""
}

// compilerEvent is what the compiler needs to know of ev.
func compilerEvent(ev *Event) *compiler.Event {
	c := &compiler.Event{SHA: ev.SHA, DefaultBranch: ev.DefaultBranch, ChangedFiles: ev.Paths, Actor: ev.Actor,
		Variables: ev.Variables}
	switch ev.Kind {
	case KindPush:
		c.Name = "push"
	case KindTag:
		c.Name = "tag"
	case KindPullRequest:
		c.Name, c.BaseBranch = "pull_request", ev.BaseRef
	case KindDispatch:
		// Inputs are checked and typed per pipeline (Plan.CheckInputs),
		// which compiles again with them.
		c.Name = "manual"
	}
	if ev.RefType == RefTag {
		c.Ref, c.Tag = "refs/tags/"+ev.RefName, ev.RefName
	} else {
		c.Ref, c.Branch = "refs/heads/"+ev.RefName, ev.RefName
	}
	if len(ev.Raw) > 0 {
		var payload map[string]any
		if json.Unmarshal(ev.Raw, &payload) == nil {
			c.Payload = payload
		}
	}
	return c
}

// HandleRecord is the RecordHandler of a Consumer of TopicVCSEvents: it
// decodes the record's Event and ingests it. A record that is not an
// event, and an event that can never be ingested, are Permanent (the
// consumer dead-letters them); other failures are retried.
func (in *Ingester) HandleRecord(ctx context.Context, rec *kgo.Record) error {
	var ev Event
	if err := json.Unmarshal(rec.Value, &ev); err != nil {
		return Permanent(fmt.Errorf("ingest: record %d of partition %d is not an event: %w", rec.Offset, rec.Partition, err))
	}
	_, _, err := in.Ingest(ctx, &ev)
	if errors.Is(err, ErrMalformed) {
		return Permanent(err)
	}
	return err
}

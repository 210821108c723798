package policy

import (
	"cmp"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
)

// DefaultSource is the default policy, in force when Config.Path is
// empty (see the package documentation for its rules).
//
//go:embed default.rego
var DefaultSource string

// Defaults and bounds of an Engine.
const (
	// DefaultEvalTimeout bounds one evaluation when Config.EvalTimeout
	// is zero.
	DefaultEvalTimeout = 250 * time.Millisecond
	// DefaultWatchInterval is how often Watch looks at the file when
	// given no interval.
	DefaultWatchInterval = 2 * time.Second
	// MaxPolicyBytes bounds a policy file.
	MaxPolicyBytes = 1 << 20
	// Query is what the engine asks a policy: its decision rule.
	Query = "data.cikit.policy.decision"
)

// Config configures an Engine.
type Config struct {
	// Path is the policy's file, a Rego v1 module of package
	// cikit.policy that defines decision; "" is the default policy
	// (DefaultSource).
	Path string
	// Logger logs reloads; nil discards.
	Logger *slog.Logger
	// EvalTimeout bounds one evaluation (DefaultEvalTimeout).
	EvalTimeout time.Duration
}

// Engine evaluates a policy, compiled and prepared once per load. It is
// safe for concurrent use; Reload and Watch replace the policy
// atomically, so an evaluation sees the old policy or the new one,
// never a part of each.
type Engine struct {
	cfg Config
	log *slog.Logger
	mu  sync.Mutex // serialises loads
	cur atomic.Pointer[loaded]
}

// loaded is one load of a policy.
type loaded struct {
	query  rego.PreparedEvalQuery
	name   string
	digest [sha256.Size]byte
	// stamp is what the file looked like when read; zero for the
	// default policy.
	stamp stamp
}

type stamp struct {
	size  int64
	mtime time.Time
}

// New loads the policy of cfg. A file that cannot be read or compiled
// is an error listing every problem with its position
// ("policy.rego:12:5: rego_parse_error: unexpected …").
func New(cfg Config) (*Engine, error) {
	if cfg.EvalTimeout < 0 {
		return nil, fmt.Errorf("EvalTimeout is %v; it must be positive, or zero for the default (%v)", cfg.EvalTimeout, DefaultEvalTimeout)
	}
	cfg.EvalTimeout = cmp.Or(cfg.EvalTimeout, DefaultEvalTimeout)
	e := &Engine{cfg: cfg, log: cfg.Logger}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	l, err := e.load(context.Background())
	if err != nil {
		return nil, err
	}
	e.cur.Store(l)
	return e, nil
}

// Name names the policy in force, for cikit.Admission.Policy: "default",
// or the file's base name and the first 12 hex digits of its SHA-256
// ("policy.rego sha256:3f2a…").
func (e *Engine) Name() string { return e.cur.Load().name }

// Eval asks the policy in force what the job of in may have. An input
// out of bounds (Input.Validate), a policy that fails, exceeds
// EvalTimeout, answers something that is not a Decision (Validate), or
// defines no decision for in, is an error: the caller must then not run
// the job.
func (e *Engine) Eval(ctx context.Context, in *Input) (*Decision, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	l := e.cur.Load()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("policy %s: evaluation for job %q canceled: %w", l.name, in.Job.ID, context.Cause(ctx))
	}
	ctx, cancel := context.WithTimeoutCause(ctx, e.cfg.EvalTimeout, errEvalTimeout)
	defer cancel()
	rs, err := l.query.Eval(ctx, rego.EvalParsedInput(value(in)), rego.EvalMetrics(noMetrics))
	if err != nil {
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errEvalTimeout):
			return nil, fmt.Errorf("policy %s: evaluation for job %q stopped after %v (EvalTimeout): %w", l.name, in.Job.ID, e.cfg.EvalTimeout, cause)
		case cause != nil:
			return nil, fmt.Errorf("policy %s: evaluation for job %q canceled: %w", l.name, in.Job.ID, cause)
		}
		return nil, fmt.Errorf("policy %s: job %q: %w", l.name, in.Job.ID, err)
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, fmt.Errorf("policy %s defines no decision for job %q of %s %s %q of %s", l.name, in.Job.ID, cmp.Or(in.Event, "an event"), in.Ref.Type, in.Ref.Name, in.Repository)
	}
	d, err := decisionOf(rs[0].Expressions[0].Value)
	if err != nil {
		return nil, fmt.Errorf("policy %s answered nonsense for job %q: %w", l.name, in.Job.ID, err)
	}
	return d, nil
}

// errEvalTimeout is why an evaluation that took longer than EvalTimeout
// was stopped.
var errEvalTimeout = fmt.Errorf("the policy took too long: %w", context.DeadlineExceeded)

// Reload reads Config.Path again, compiles and prepares it, and puts it
// in force. On any error, which lists every problem with its position,
// the policy in force stays. Reloading the default policy does nothing.
func (e *Engine) Reload() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	l, err := e.load(context.Background())
	if err != nil {
		return err
	}
	old := e.cur.Swap(l)
	if old.digest != l.digest {
		e.log.Info("policy reloaded", "policy", l.name, "previous", old.name)
	}
	return nil
}

// Watch reloads the policy file whenever it changes, looking every
// interval (DefaultWatchInterval when not positive) until ctx ends. It
// reads the file when its size or modification time changes, or while
// the modification time is too recent to tell a second write from the
// first, and reloads when the digest differs. A refused reload is logged at
// error level, once per change, and the policy in force stays. Watching
// the default policy only waits for ctx.
func (e *Engine) Watch(ctx context.Context, every time.Duration) {
	if e.cfg.Path == "" {
		<-ctx.Done()
		return
	}
	if every <= 0 {
		every = DefaultWatchInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	cur := e.cur.Load()
	seen, seenAt, digest := cur.stamp, time.Now(), cur.digest
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fi, err := os.Stat(e.cfg.Path)
		if err != nil {
			if s := (stamp{size: -1}); seen != s {
				seen = s
				e.log.Error("policy file unreadable; the policy in force stays", "path", e.cfg.Path, "err", err)
			}
			continue
		}
		s := stamp{size: fi.Size(), mtime: fi.ModTime()}
		// A file system's clock is coarse: a write within the same
		// tick as the last leaves the stamp as it was.
		racy := !s.mtime.Before(seenAt.Add(-racyWindow))
		if s == seen && !racy {
			continue
		}
		seen, seenAt = s, time.Now()
		src, _, err := readPolicy(e.cfg.Path)
		if err != nil || sha256.Sum256(src) == digest {
			continue // unreadable now: the next change says more
		}
		digest = sha256.Sum256(src)
		if err := e.Reload(); err != nil {
			e.log.Error("policy reload refused; the policy in force stays", "path", e.cfg.Path, "policy", e.Name(), "err", err)
		}
	}
}

// racyWindow is how close to the time a file was last looked at its
// modification time must be for Watch to read it again regardless.
const racyWindow = 2 * time.Second

func (e *Engine) load(ctx context.Context) (*loaded, error) {
	if e.cfg.Path == "" {
		if l := e.cur.Load(); l != nil {
			return l, nil
		}
		return prepare(ctx, "default.rego", "default", DefaultSource, stamp{})
	}
	src, st, err := readPolicy(e.cfg.Path)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(src)
	if l := e.cur.Load(); l != nil && l.digest == sum {
		// Unchanged: keep the prepared query, note the new stamp.
		c := *l
		c.stamp = st
		return &c, nil
	}
	name := filepath.Base(e.cfg.Path) + " sha256:" + hex.EncodeToString(sum[:6])
	return prepare(ctx, e.cfg.Path, name, string(src), st)
}

func readPolicy(path string) ([]byte, stamp, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, stamp{}, fmt.Errorf("policy: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, stamp{}, fmt.Errorf("policy: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, stamp{}, fmt.Errorf("policy %s is not a regular file", path)
	}
	src, err := io.ReadAll(io.LimitReader(f, MaxPolicyBytes+1))
	if err != nil {
		return nil, stamp{}, fmt.Errorf("policy: %w", err)
	}
	if len(src) > MaxPolicyBytes {
		return nil, stamp{}, fmt.Errorf("policy %s is larger than %d bytes; split data out of it", path, MaxPolicyBytes)
	}
	return src, stamp{size: fi.Size(), mtime: fi.ModTime()}, nil
}

// prepare compiles src, checks it is a policy, and prepares its query.
func prepare(ctx context.Context, file, name, src string, st stamp) (*loaded, error) {
	mod, err := ast.ParseModuleWithOpts(file, src, ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
	if err != nil {
		return nil, loadError(file, err)
	}
	var errs ast.Errors
	if want := ast.MustParseRef("data.cikit.policy"); !mod.Package.Path.Equal(want) {
		errs = append(errs, ast.NewError(ast.CompileErr, mod.Package.Location, "the package is %v; a policy is package cikit.policy", mod.Package.Path[1:]))
	} else if !definesDecision(mod) {
		errs = append(errs, ast.NewError(ast.CompileErr, mod.Package.Location, "package cikit.policy defines no rule decision, which the platform asks for"))
	}
	if len(errs) > 0 {
		return nil, loadError(file, errs)
	}
	c := NewCompiler()
	if c.Compile(map[string]*ast.Module{file: mod}); c.Failed() {
		return nil, loadError(file, c.Errors)
	}
	q, err := rego.New(rego.Query(Query), rego.Compiler(c)).PrepareForEval(ctx)
	if err != nil {
		return nil, loadError(file, err)
	}
	return &loaded{query: q, name: name, digest: sha256.Sum256([]byte(src)), stamp: st}, nil
}

// LoadError is a policy file that was refused: it does not parse or
// compile, or is no policy. Its message lists every problem on a line of
// its own, "FILE:LINE:COL: CODE: MESSAGE", in the order OPA found them.
type LoadError struct {
	Path string
	// Errors are OPA's; each has its Location.
	Errors ast.Errors
}

func (e *LoadError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy refused (%d problem", len(e.Errors))
	if len(e.Errors) != 1 {
		b.WriteString("s")
	}
	b.WriteString("):")
	for _, p := range e.Errors {
		b.WriteString("\n\t")
		if p.Location != nil {
			fmt.Fprintf(&b, "%s:%d:%d: ", cmp.Or(p.Location.File, e.Path), p.Location.Row, p.Location.Col)
		}
		fmt.Fprintf(&b, "%s: %s", p.Code, p.Message)
	}
	return b.String()
}

func (e *LoadError) Unwrap() error { return e.Errors }

func loadError(file string, err error) error {
	var errs ast.Errors
	if !errors.As(err, &errs) {
		return fmt.Errorf("policy %s refused: %w", file, err)
	}
	return &LoadError{Path: file, Errors: errs}
}

func definesDecision(mod *ast.Module) bool {
	for _, r := range mod.Rules {
		if r.Head.Ref().Equal(ast.Ref{ast.VarTerm("decision")}) || r.Head.Name.Equal(ast.Var("decision")) {
			return true
		}
	}
	return false
}

// NewCompiler returns a Rego compiler with the restrictions an Engine
// compiles a policy under, for running a policy's Rego tests as the
// engine would (OPA's tester.Runner.SetCompiler): Rego v1, every error
// reported, and no builtin whose answer is not a function of its
// arguments — no network (http.send, net.lookup_ip_addr), no clock or
// randomness (time.now_ns, rand.intn, uuid.rfc4122), no runtime
// (opa.runtime), no remote schemas. A decision depends on its input
// alone.
func NewCompiler() *ast.Compiler {
	caps := ast.CapabilitiesForThisVersion()
	caps.AllowNet = []string{}
	return ast.NewCompiler().
		WithCapabilities(caps).
		WithUnsafeBuiltins(unsafeBuiltins()).
		WithDefaultRegoVersion(ast.RegoV1).
		SetErrorLimit(0)
}

var unsafeBuiltins = sync.OnceValue(func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, b := range ast.Builtins {
		if b.Nondeterministic {
			m[b.Name] = struct{}{}
		}
	}
	return m
})

// noMetrics spares each evaluation the metrics OPA would make for it,
// which nobody reads.
var noMetrics = metrics.NoOp()

package process

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/image"
	"github.com/cikit/cikit/fleet/runtime"
)

// A job's services (JobSpec.Services) each run in a sandbox of their own
// from their image, sharing the job's network namespace: the job reaches
// each by its name (GitLab's alias, GitHub's service id, or a name
// derived from its image; /etc/hosts maps it to 127.0.0.1) on the ports
// it listens on. Before the job's first step, the executor waits until
// each is ready: once its health command succeeds (GitHub's
// --health-cmd, run in the service's sandbox every interval; retries
// failures in a row after the start period make it unhealthy), else once
// each of its ports (the service's ports, or those its image exposes)
// accepts a connection, else once it has started. A service that ends,
// is unhealthy or is not ready in DefaultServiceTimeout fails the job,
// naming it and showing the end of its output. After the steps, every
// service is stopped (its sandbox's processes killed) and its output is
// written to the job's log in a section of its own.
//
// Without the host's network (Sandbox.Network), the namespace is one
// the executor makes for the job, which needs an executor running as
// root. With it, services listen on the host's network: two jobs whose
// services use one port cannot run at once on the runner.
//
// The constants bound the wait.
const (
	// DefaultServiceTimeout bounds how long a job waits for its services
	// to be ready, unless the job's own time runs out first.
	DefaultServiceTimeout = 2 * time.Minute
	// Health checks (GitHub's --health-*) without intervals, timeouts
	// or retries of their own.
	defaultHealthInterval = time.Second
	defaultHealthTimeout  = 30 * time.Second
	defaultHealthRetries  = 3
	// portProbeInterval is the time between two attempts to connect to
	// a service's ports.
	portProbeInterval = 50 * time.Millisecond
	// serviceTail is how much of a service's output is kept for the
	// job's log: its last bytes.
	serviceTail = 64 << 10
)

// jobService is one of a job's services, from its preparation to its
// end.
type jobService struct {
	svc      cikit.Service
	names    []string // its host names
	prepared *image.Prepared
	plan     *imagePlan
	argv     []string
	env      []string
	dir      string
	ports    []int

	box    *sandboxJob
	output *tailBuffer
	pw     *os.File      // its output's write end, held until it ends
	copied chan struct{} // closed when its output is read to the end
	exited chan stepExit // its main process's end
	runErr error         // set before exited is closed when it did not start
}

// prepareServices pulls each service's image and makes its view. A
// failed result is returned with ok false.
func (j *jobRun) prepareServices(ctx context.Context) (res Result, ok bool) {
	e, spec := j.e, j.spec
	if len(spec.Services) == 0 {
		return res, true
	}
	if e.images == nil {
		return j.fail(cikit.FailureInfrastructure, "this job has services (%s), and this runner runs no images: it has no image store (Config.Images)", serviceList(spec.Services)), false
	}
	if !e.sandbox.network {
		n, err := newNetns()
		if err != nil {
			return j.fail(cikit.FailureInfrastructure, "services: %v", err), false
		}
		j.net = n
	}
	seen := map[string]string{}
	defer func() {
		if ok && e.sandbox.network {
			res, ok = j.portsFree()
		}
	}()
	for _, svc := range spec.Services {
		s, err := j.prepareService(ctx, svc)
		if s != nil {
			j.services = append(j.services, s)
		}
		if err != nil {
			if errors.Is(err, errServiceConfig) {
				return j.fail(cikit.FailureConfig, "%v", err), false
			}
			return j.imageFailed(ctx, svc.Image, err), false
		}
		for _, n := range s.names {
			if other, dup := seen[n]; dup {
				return j.fail(cikit.FailureConfig, "services %s and %s both answer to the name %q: give one an alias of its own", other, svc.Image, n), false
			}
			seen[n] = svc.Image
		}
	}
	return res, true
}

// portsFree fails the job when a port its services listen on is taken
// on the host's network, which they share: the job would reach what
// holds it instead of its service.
func (j *jobRun) portsFree() (Result, bool) {
	for _, s := range j.services {
		for _, p := range s.ports {
			ln, err := net.Listen("tcp", ":"+strconv.Itoa(p))
			if err != nil {
				return j.fail(cikit.FailureInfrastructure, "service %s: port %d is in use on the runner's host, whose network the job's services share (Config.Sandbox.Network): %v", s.names[0], p, err), false
			}
			_ = ln.Close()
		}
	}
	return Result{}, true
}

// errServiceConfig marks a service the job's configuration gets wrong.
var errServiceConfig = errors.New("service configuration")

// prepareService pulls svc's image and makes its view and its command.
func (j *jobRun) prepareService(ctx context.Context, svc cikit.Service) (*jobService, error) {
	e := j.e
	name := cmp.Or(svc.Name, svc.Image)
	opts := image.PullOptions{Policy: cmp.Or(e.cfg.Images.PullPolicy, image.PullAlways)}
	if o := svc.ImageOptions; o != nil && len(o.PullPolicy) > 0 {
		opts.Policy = image.PullPolicy(o.PullPolicy[0])
	}
	fmt.Fprintf(j.pw, "--- service %s: pulling %s (pull policy %s)\n", name, svc.Image, opts.Policy)
	viewDir, err := j.viewDir("service-" + strconv.Itoa(len(j.services)))
	if err != nil {
		return nil, err
	}
	p, err := e.images.Prepare(ctx, svc.Image, opts, viewDir, image.ViewOptions{Copy: e.cfg.Images.Copy})
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", name, err)
	}
	s := &jobService{svc: svc, prepared: p, names: serviceHostNames(svc)}
	img := processImage(&cikit.JobSpec{ImageOptions: svc.ImageOptions}, p)
	if s.plan, err = planImage(img); err != nil {
		return s, fmt.Errorf("service %s: %w", name, err)
	}
	fmt.Fprintf(j.pw, "--- service %s: image %s is %s\n", name, svc.Image, p.Digest)
	for _, w := range s.plan.warnings {
		fmt.Fprintf(j.pw, "--- warning: service %s: %s\n", name, w)
	}
	// GitLab's command replaces the image's Cmd, its entrypoint the
	// image's Entrypoint (and drops its Cmd), as Docker's options do.
	cmdline := p.Config.Cmd
	if o := svc.ImageOptions; o != nil && o.Entrypoint != nil {
		cmdline = nil
	}
	if svc.Command != nil {
		cmdline = svc.Command
	}
	s.argv = append(slices.Clone(img.Entrypoint), cmdline...)
	if len(s.argv) == 0 {
		return s, fmt.Errorf("%w: service %s: its image %s has neither an entrypoint nor a command, and the service gives none", errServiceConfig, name, svc.Image)
	}
	env := map[string]string{}
	for _, kv := range s.plan.env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	maps.Copy(env, s.plan.userEnv())
	own := svc.Env
	if j.spec.Format == formatGitLab {
		// A GitLab service gets the job's variables, the predefined
		// ones among them, under its own, which may refer to them.
		inherited := j.gitlabServiceVars()
		maps.Copy(env, inherited)
		own = runtime.GitLabEnv(svc.Env, inherited, nil)
	}
	for _, k := range slices.Sorted(maps.Keys(own)) {
		v := own[k]
		if j.github {
			if v, err = j.expandGitHub(v); err != nil {
				return s, fmt.Errorf("%w: service %s: env %s: %v", errServiceConfig, name, k, err)
			}
		}
		env[k] = v
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		s.env = append(s.env, k+"="+env[k])
	}
	s.dir = cmp.Or(p.Config.WorkingDir, "/")
	if s.ports, err = servicePorts(svc, p); err != nil {
		return s, fmt.Errorf("%w: service %s: %v", errServiceConfig, name, err)
	}
	for _, pm := range svc.Ports {
		if host, ctr, ok := strings.Cut(strings.TrimSuffix(strings.TrimSuffix(pm, "/tcp"), "/udp"), ":"); ok && host != ctr {
			fmt.Fprintf(j.pw, "--- warning: service %s: the port mapping %s is not applied: the service listens on %s, where the job reaches it as %s:%s\n", name, pm, ctr, s.names[0], ctr)
		}
	}
	return s, nil
}

// gitlabServiceVars are the variables a GitLab job passes to its
// services: the predefined ones, the job's, expanded, and a manual
// trigger's.
func (j *jobRun) gitlabServiceVars() map[string]string {
	params := runtime.Params{Spec: j.spec, Context: j.job.Context, Workspace: j.ws, Temp: j.temp, Vars: j.job.Vars, Secrets: j.job.Secrets}
	vars := runtime.Env(params)
	overrides := runtime.Overrides(params)
	maps.Copy(vars, runtime.GitLabEnv(j.spec.Env, vars, overrides))
	maps.Copy(vars, overrides)
	return vars
}

// expandGitHub evaluates a GitHub expression of the job's before its
// environment is set up (a service's env, registry credentials).
func (j *jobRun) expandGitHub(s string) (string, error) {
	gh, err := j.earlyGitHub()
	if err != nil {
		return "", err
	}
	return gh.Expand(s)
}

// serviceHostNames are the names the job reaches svc by: its name and,
// for GitLab's derived "group__image", "group-image" too.
func serviceHostNames(svc cikit.Service) []string {
	name := svc.HostName()
	names := []string{name}
	if dashed := strings.ReplaceAll(name, "__", "-"); dashed != name {
		names = append(names, dashed)
	}
	return names
}

// servicePorts are the TCP ports whose connections say svc is ready:
// those it names (GitHub's ports, the container's side of a mapping),
// else those its image exposes.
func servicePorts(svc cikit.Service, p *image.Prepared) ([]int, error) {
	var specs []string
	if len(svc.Ports) > 0 {
		for _, pm := range svc.Ports {
			_, ctr, ok := strings.Cut(pm, ":")
			if !ok {
				ctr = pm
			}
			specs = append(specs, ctr)
		}
	} else {
		specs = slices.Sorted(maps.Keys(p.Config.ExposedPorts))
	}
	var ports []int
	for _, sp := range specs {
		num, proto, _ := strings.Cut(sp, "/")
		if proto != "" && proto != "tcp" {
			continue // only TCP can be probed
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("port %q is not a port number", sp)
		}
		if !slices.Contains(ports, n) {
			ports = append(ports, n)
		}
	}
	return ports, nil
}

// serviceHosts are the /etc/hosts lines of the job's services.
func (j *jobRun) serviceHosts() string {
	var b strings.Builder
	for _, s := range j.services {
		b.WriteString("127.0.0.1\t" + strings.Join(s.names, " ") + "\n")
	}
	return b.String()
}

// startServices starts each service's sandbox and its process.
func (j *jobRun) startServices(ctx context.Context) error {
	hosts := j.serviceHosts()
	for _, s := range j.services {
		pr, pw, err := os.Pipe()
		if err != nil {
			return err
		}
		s.output, s.pw, s.copied = &tailBuffer{max: serviceTail}, pw, make(chan struct{})
		go func() {
			defer close(s.copied)
			_, _ = io.Copy(s.output, pr)
			_ = pr.Close()
		}()
		s.box, err = j.e.startSandbox(ctx, &sandboxSpec{im: s.plan, out: pw, net: j.net, hostname: s.names[0], hosts: hosts})
		if err != nil {
			return fmt.Errorf("service %s: sandbox: %w", s.names[0], err)
		}
		s.exited = make(chan stepExit, 1)
		go func() {
			x, err := s.box.run(context.Background(), s.argv, s.dir, s.env)
			s.runErr = err
			s.exited <- x
			close(s.exited)
		}()
	}
	return nil
}

// awaitServices waits until every service is ready, or one fails.
func (j *jobRun) awaitServices(ctx context.Context) error {
	if len(j.services) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeoutCause(ctx, DefaultServiceTimeout, errServiceTimeout)
	defer cancel()
	start := time.Now()
	errs := make([]error, len(j.services))
	var wg sync.WaitGroup
	for i, s := range j.services {
		wg.Go(func() { errs[i] = j.awaitService(ctx, s) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	fmt.Fprintf(j.pw, "--- services ready in %s: %s\n", time.Since(start).Round(time.Millisecond), serviceList(j.spec.Services))
	return nil
}

var errServiceTimeout = fmt.Errorf("not ready in %s", DefaultServiceTimeout)

// awaitService waits until s is ready.
func (j *jobRun) awaitService(ctx context.Context, s *jobService) error {
	name := s.names[0]
	failed := func(format string, args ...any) error {
		return &serviceError{name: name, image: s.svc.Image, why: fmt.Sprintf(format, args...), tail: s.output.String()}
	}
	check, what := j.readyCheck(s)
	h := s.svc.Health
	interval := portProbeInterval
	retries, startPeriod := 0, time.Duration(0)
	if h != nil && h.Cmd != "" {
		interval = cmp.Or(h.Interval, defaultHealthInterval)
		retries, startPeriod = cmp.Or(h.Retries, defaultHealthRetries), h.StartPeriod
	}
	started := time.Now()
	failures := 0
	var last error
	for {
		err := check(ctx)
		if err == nil {
			fmt.Fprintf(j.pw, "--- service %s is ready (%s) after %s\n", name, what, time.Since(started).Round(time.Millisecond))
			return nil
		}
		last = err
		if retries > 0 && time.Since(started) >= startPeriod {
			if failures++; failures >= retries {
				return failed("is unhealthy: its health check %q failed %d times in a row; the last: %v", h.Cmd, failures, last)
			}
		}
		t := time.NewTimer(interval)
		select {
		case x, ok := <-s.exited:
			t.Stop()
			if !ok || s.runErr != nil {
				return failed("did not start: %v", s.runErr)
			}
			return failed("ended before it was ready, with %s", exitString(x))
		case <-ctx.Done():
			t.Stop()
			if context.Cause(ctx) == errServiceTimeout {
				return failed("was %v (waiting for %s; the last check: %v)", errServiceTimeout, what, last)
			}
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}

// readyCheck returns the check that says s is ready, and what it checks.
func (j *jobRun) readyCheck(s *jobService) (func(context.Context) error, string) {
	if h := s.svc.Health; h != nil && h.Cmd != "" {
		argv := []string{"sh", "-c", h.Cmd} // as Docker runs a health command
		timeout := cmp.Or(h.Timeout, defaultHealthTimeout)
		return func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			x, err := s.box.run(ctx, argv, s.dir, s.env)
			switch {
			case err != nil:
				return err
			case ctx.Err() != nil:
				return fmt.Errorf("it took longer than %s", timeout)
			case x.code != 0:
				return fmt.Errorf("it %s", exitString(x))
			}
			return nil
		}, "health check " + strconv.Quote(h.Cmd)
	}
	if len(s.ports) == 0 {
		return func(context.Context) error { return nil }, "started; it has no health check and exposes no port"
	}
	var names []string
	for _, p := range s.ports {
		names = append(names, strconv.Itoa(p))
	}
	return func(ctx context.Context) error {
		for _, p := range s.ports {
			if err := j.dial(ctx, p); err != nil {
				return err
			}
		}
		return nil
	}, "port " + strings.Join(names, ", ") + " accepts connections"
}

// dial connects to port on the job's loopback and hangs up.
func (j *jobRun) dial(ctx context.Context, port int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	var c net.Conn
	connect := func() (err error) {
		c, err = d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		return err
	}
	var err error
	if j.net != nil {
		err = j.net.do(connect)
	} else {
		err = connect()
	}
	if err != nil {
		return err
	}
	return c.Close()
}

// stopServices stops every service, writes its output to the job's log
// and throws its view away. It is safe to call twice.
func (j *jobRun) stopServices() {
	for _, s := range j.services {
		if s.box != nil {
			s.box.end(j.e.cfg.Logger.Warn)
			s.box = nil
			<-s.exited
		}
		if s.pw != nil {
			_ = s.pw.Close()
			s.pw = nil
			<-s.copied
			if j.pw != nil {
				out := s.output.String()
				if out != "" && !strings.HasSuffix(out, "\n") {
					out += "\n"
				}
				fmt.Fprintf(j.pw, "--- service %s (%s) output%s:\n%s--- end of service %s\n", s.names[0], s.svc.Image, s.output.truncation(), out, s.names[0])
			}
		}
		if s.prepared != nil {
			if err := s.prepared.Close(); err != nil {
				j.e.cfg.Logger.Warn("the view of a service's image was not removed", "job", j.spec.ID, "service", s.names[0], "err", err)
			}
			s.prepared = nil
		}
	}
}

// serviceError is why a job's service failed it.
type serviceError struct {
	name, image, why, tail string
}

func (e *serviceError) Error() string {
	msg := fmt.Sprintf("service %s (%s) %s", e.name, e.image, e.why)
	if t := strings.TrimSpace(e.tail); t != "" {
		lines := strings.Split(t, "\n")
		if len(lines) > 20 {
			lines = lines[len(lines)-20:]
		}
		msg += "; its output ended with:\n" + strings.Join(lines, "\n")
	} else {
		msg += "; it wrote nothing"
	}
	return msg
}

// serviceList names services for a message.
func serviceList(svcs []cikit.Service) string {
	var names []string
	for _, s := range svcs {
		names = append(names, s.HostName())
	}
	return strings.Join(names, ", ")
}

// exitString says how a process ended.
func exitString(x stepExit) string {
	if x.signal != 0 {
		return "killed by " + x.signal.String()
	}
	return "exit code " + strconv.Itoa(x.code)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max     int
	mu      sync.Mutex
	b       []byte
	dropped int64
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.dropped += int64(over)
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// truncation says how much of the output was left out, if any.
func (t *tailBuffer) truncation() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dropped == 0 {
		return ""
	}
	return fmt.Sprintf(" (its last %s; %s before them left out)", bytesString(int64(len(t.b))), bytesString(t.dropped))
}

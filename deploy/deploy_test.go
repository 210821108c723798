package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/cikit/cikit/fleet/agent"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/reference/config"
)

const (
	// manifests is the directory `kubectl apply -f` is given.
	manifests = "kubernetes"
	// secretExample is the example of the Secret the manifests read.
	secretExample = "secret.example.yaml"
	// placeholder marks every value of the example Secret.
	placeholder = "REPLACE-ME"
)

// runnerVariables are the CIKIT_* variables `cikit runner` reads
// (reference/cli's runner command); it reads no config settings.
var runnerVariables = []string{"CIKIT_REGISTRATION_TOKEN"}

// scheme knows the kinds the layout may use, and only those.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypes(corev1.SchemeGroupVersion, &corev1.Namespace{}, &corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Service{})
	s.AddKnownTypes(appsv1.SchemeGroupVersion, &appsv1.Deployment{})
	s.AddKnownTypes(batchv1.SchemeGroupVersion, &batchv1.Job{})
	s.AddKnownTypes(policyv1.SchemeGroupVersion, &policyv1.PodDisruptionBudget{})
	return s
}()

// strict decodes YAML into the typed object its apiVersion and kind name,
// refusing unknown kinds, unknown and duplicate fields (case-sensitively)
// and values of the wrong type.
var strict = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Yaml: true, Strict: true})

// decode splits a multi-document YAML file and decodes each document
// strictly. Documents of only comments are skipped.
func decode(name string, data []byte) ([]runtime.Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []runtime.Object
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if blank(doc) {
			continue
		}
		obj, _, err := strict.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		objs = append(objs, obj)
	}
}

// blank reports whether a YAML document holds only comments, blank lines
// and document markers.
func blank(doc []byte) bool {
	for line := range strings.Lines(string(doc)) {
		line = strings.TrimSpace(line)
		if line != "" && line != "---" && !strings.HasPrefix(line, "#") {
			return false
		}
	}
	return true
}

// layout is every object of the deployment, the example Secret included.
type layout struct {
	namespaces  []*corev1.Namespace
	configMaps  []*corev1.ConfigMap
	secrets     []*corev1.Secret
	services    []*corev1.Service
	deployments []*appsv1.Deployment
	jobs        []*batchv1.Job
	pdbs        []*policyv1.PodDisruptionBudget
}

// readLayout decodes every manifest of dir/kubernetes and the example
// Secret.
func readLayout(dir string) (*layout, error) {
	files, err := filepath.Glob(filepath.Join(dir, manifests, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no manifests in %s", filepath.Join(dir, manifests))
	}
	l := &layout{}
	for _, f := range append(files, filepath.Join(dir, secretExample)) {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		objs, err := decode(f, data)
		if err != nil {
			return nil, err
		}
		for _, obj := range objs {
			l.add(obj)
		}
	}
	return l, nil
}

func (l *layout) add(obj runtime.Object) {
	switch o := obj.(type) {
	case *corev1.Namespace:
		l.namespaces = append(l.namespaces, o)
	case *corev1.ConfigMap:
		l.configMaps = append(l.configMaps, o)
	case *corev1.Secret:
		l.secrets = append(l.secrets, o)
	case *corev1.Service:
		l.services = append(l.services, o)
	case *appsv1.Deployment:
		l.deployments = append(l.deployments, o)
	case *batchv1.Job:
		l.jobs = append(l.jobs, o)
	case *policyv1.PodDisruptionBudget:
		l.pdbs = append(l.pdbs, o)
	}
}

// workload is a pod template running one cikit command.
type workload struct {
	kind, name string
	pod        *corev1.PodTemplateSpec
	c          *corev1.Container
	command    string            // serve, migrate, runner
	flags      map[string]string // -name value
}

func (w *workload) String() string { return w.kind + " " + w.name }

// problems collects what is wrong with a layout.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// check cross-checks the layout and returns every problem found.
func (l *layout) check() []string {
	var p problems
	l.checkObjects(&p)
	var works []*workload
	for _, d := range l.deployments {
		if w := newWorkload(&p, "Deployment", d.Name, &d.Spec.Template); w != nil {
			works = append(works, w)
		}
		l.checkSelector(&p, "Deployment "+d.Name, d.Spec.Selector, &d.Spec.Template)
	}
	for _, j := range l.jobs {
		if w := newWorkload(&p, "Job", j.Name, &j.Spec.Template); w != nil {
			works = append(works, w)
		}
	}
	byCommand := map[string][]*workload{}
	for _, w := range works {
		byCommand[w.command] = append(byCommand[w.command], w)
		l.checkPod(&p, w)
	}
	for _, cmd := range []string{"serve", "migrate", "runner"} {
		if len(byCommand[cmd]) != 1 {
			p.add("want one workload running cikit %s, have %d", cmd, len(byCommand[cmd]))
			return p
		}
	}
	server, migrate, runner := byCommand["serve"][0], byCommand["migrate"][0], byCommand["runner"][0]
	if runner.kind != "Deployment" || server.kind != "Deployment" || migrate.kind != "Job" {
		p.add("want the server and the runner as Deployments and migrate as a Job")
	}

	images := map[string]bool{}
	for _, w := range works {
		images[w.c.Image] = true
	}
	if len(images) != 1 {
		p.add("the workloads run different images: %v", slices.Sorted(maps.Keys(images)))
	}

	serverCfg := l.checkConfigured(&p, server)
	migrateCfg := l.checkConfigured(&p, migrate)
	if cm, file := l.configSource(&p, server), l.configSource(&p, migrate); cm != file {
		p.add("%s reads its config from %s, %s from %s", server, cm, migrate, file)
	}
	if serverCfg != nil && migrateCfg != nil && serverCfg.Postgres.URL != migrateCfg.Postgres.URL {
		p.add("%s migrates another database than %s uses", migrate, server)
	}
	if serverCfg != nil {
		l.checkServer(&p, server, serverCfg)
		l.checkRunner(&p, runner, server, serverCfg)
	}
	for _, w := range works {
		if w != server {
			l.checkNotSelected(&p, w)
		}
	}
	return p
}

// checkObjects checks what every object needs: the layout's namespace,
// and for the example Secret, placeholders only.
func (l *layout) checkObjects(p *problems) {
	if len(l.namespaces) != 1 {
		p.add("want one Namespace, have %d", len(l.namespaces))
		return
	}
	ns := l.namespaces[0].Name
	var metas []metav1.ObjectMeta
	for _, o := range l.configMaps {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range l.secrets {
		metas = append(metas, o.ObjectMeta)
		for k, v := range o.StringData {
			if !strings.Contains(v, placeholder) {
				p.add("Secret %s: %s is not marked %s", o.Name, k, placeholder)
			}
		}
		for k, v := range o.Data {
			if !strings.Contains(string(v), placeholder) {
				p.add("Secret %s: %s is not marked %s", o.Name, k, placeholder)
			}
		}
	}
	for _, o := range l.services {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range l.deployments {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range l.jobs {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range l.pdbs {
		metas = append(metas, o.ObjectMeta)
	}
	for _, m := range metas {
		if m.Namespace != ns {
			p.add("%s is in namespace %q, not %q", m.Name, m.Namespace, ns)
		}
	}
}

// newWorkload reads the cikit command a pod template runs.
func newWorkload(p *problems, kind, name string, pod *corev1.PodTemplateSpec) *workload {
	if len(pod.Spec.Containers) != 1 || len(pod.Spec.InitContainers) != 0 {
		p.add("%s %s: want one container", kind, name)
		return nil
	}
	c := &pod.Spec.Containers[0]
	argv := append(slices.Clone(c.Command), c.Args...)
	if len(argv) < 2 || argv[0] != "cikit" {
		p.add("%s %s: the container does not run cikit: %q", kind, name, argv)
		return nil
	}
	w := &workload{kind: kind, name: name, pod: pod, c: c, command: argv[1], flags: map[string]string{}}
	for rest := argv[2:]; len(rest) > 0; rest = rest[1:] {
		f := rest[0]
		if !strings.HasPrefix(f, "-") {
			p.add("%s: %q is not a flag", w, f)
			return nil
		}
		f = strings.TrimLeft(f, "-")
		if k, v, ok := strings.Cut(f, "="); ok {
			w.flags[k] = v
			continue
		}
		if len(rest) < 2 {
			p.add("%s: -%s has no value", w, f)
			return nil
		}
		w.flags[f] = rest[1]
		rest = rest[1:]
	}
	return w
}

// checkSelector checks that a Deployment's selector matches its pods.
func (l *layout) checkSelector(p *problems, what string, sel *metav1.LabelSelector, pod *corev1.PodTemplateSpec) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	switch {
	case err != nil:
		p.add("%s: selector: %v", what, err)
	case s.Empty():
		p.add("%s: the selector selects everything", what)
	case !s.Matches(labels.Set(pod.Labels)):
		p.add("%s: the selector %s does not match the pod template's labels %v", what, s, pod.Labels)
	}
}

// checkPod checks what every cikit pod needs.
func (l *layout) checkPod(p *problems, w *workload) {
	spec := &w.pod.Spec
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		// The Service cikit would add CIKIT_SERVICE_HOST, CIKIT_PORT, …
		p.add("%s: enableServiceLinks must be false: service links put CIKIT_* variables into the environment", w)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		p.add("%s: automountServiceAccountToken must be false: cikit does not call the Kubernetes API", w)
	}
	nonRoot := spec.SecurityContext != nil && spec.SecurityContext.RunAsNonRoot != nil && *spec.SecurityContext.RunAsNonRoot
	sc := w.c.SecurityContext
	if sc != nil && sc.RunAsNonRoot != nil {
		nonRoot = *sc.RunAsNonRoot
	}
	if !nonRoot {
		p.add("%s: must run as non-root", w)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || (sc.Privileged != nil && *sc.Privileged) {
		p.add("%s: the container needs a read-only root file system, no privilege escalation, not privileged", w)
	}
	if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		p.add("%s: the container must drop all capabilities and add none", w)
	}
	if w.c.Resources.Requests.Cpu().IsZero() || w.c.Resources.Requests.Memory().IsZero() || w.c.Resources.Limits.Memory().IsZero() {
		p.add("%s: the container needs CPU and memory requests and a memory limit", w)
	}
	if sc != nil && sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount && (spec.HostUsers == nil || *spec.HostUsers) {
		// The API server's own rule, which decoding does not apply.
		p.add("%s: procMount Unmasked needs hostUsers: false", w)
	}

	allowed := func(name string) bool { return slices.Contains(runnerVariables, name) }
	if w.command != "runner" {
		settings := map[string]bool{}
		for _, s := range config.Default().Settings() {
			settings[s.Env] = true
		}
		allowed = func(name string) bool { return settings[name] }
	}
	for _, e := range w.c.Env {
		if strings.HasPrefix(e.Name, "CIKIT_") && !allowed(e.Name) {
			p.add("%s: $%s is no variable cikit %s reads", w, e.Name, w.command)
		}
		if _, err := l.envValue(e); err != nil {
			p.add("%s: $%s: %v", w, e.Name, err)
		}
	}
	if len(w.c.EnvFrom) > 0 {
		p.add("%s: envFrom hides which variables a container gets; use env", w)
	}
}

// envValue is the value a variable gets, with the example Secret's values.
func (l *layout) envValue(e corev1.EnvVar) (string, error) {
	switch {
	case e.ValueFrom == nil:
		return e.Value, nil
	case e.ValueFrom.SecretKeyRef != nil:
		ref := e.ValueFrom.SecretKeyRef
		if ref.Optional != nil && *ref.Optional {
			return "", errors.New("the secret must not be optional")
		}
		for _, s := range l.secrets {
			if s.Name != ref.Name {
				continue
			}
			if v, ok := s.StringData[ref.Key]; ok {
				return v, nil
			}
			if v, ok := s.Data[ref.Key]; ok {
				return string(v), nil
			}
			return "", fmt.Errorf("Secret %s has no key %s", ref.Name, ref.Key)
		}
		return "", fmt.Errorf("no Secret %s", ref.Name)
	case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
		return "cikit-pod-0", nil
	default:
		return "", errors.New("only values, secretKeyRef and the pod's name are checked")
	}
}

// configSource follows a workload's -config flag to the ConfigMap key it
// names, as "configmap/key".
func (l *layout) configSource(p *problems, w *workload) string {
	file, ok := w.flags["config"]
	if !ok {
		p.add("%s: no -config", w)
		return ""
	}
	var mount *corev1.VolumeMount
	for i, m := range w.c.VolumeMounts {
		if m.MountPath == path.Dir(file) {
			mount = &w.c.VolumeMounts[i]
		}
	}
	if mount == nil {
		p.add("%s: nothing is mounted at %s", w, path.Dir(file))
		return ""
	}
	for _, v := range w.pod.Spec.Volumes {
		if v.Name != mount.Name {
			continue
		}
		if v.ConfigMap == nil {
			p.add("%s: %s is not a ConfigMap", w, path.Dir(file))
			return ""
		}
		key := path.Base(file)
		for _, it := range v.ConfigMap.Items {
			if it.Path == key {
				key = it.Key
			}
		}
		return v.ConfigMap.Name + "/" + key
	}
	p.add("%s: no volume %s", w, mount.Name)
	return ""
}

// checkConfigured loads a workload's config as cikit would: the
// ConfigMap's file, then its CIKIT_* variables, then Validate.
func (l *layout) checkConfigured(p *problems, w *workload) *config.Config {
	src := l.configSource(p, w)
	if src == "" {
		return nil
	}
	name, key, _ := strings.Cut(src, "/")
	var data *string
	for _, cm := range l.configMaps {
		if d, ok := cm.Data[key]; ok && cm.Name == name {
			data = &d
		}
	}
	if data == nil {
		p.add("%s: no ConfigMap %s with %s", w, name, key)
		return nil
	}
	cfg := config.Default()
	if err := cfg.DecodeYAML(strings.NewReader(*data)); err != nil {
		p.add("%s: %s: %v", w, src, err)
		return nil
	}
	byEnv := map[string]config.Setting{}
	for _, s := range cfg.Settings() {
		byEnv[s.Env] = s
	}
	for _, e := range w.c.Env {
		s, ok := byEnv[e.Name]
		if !ok {
			continue
		}
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && s.String() != "" {
			p.add("%s: %s is in the ConfigMap and the Secret; keep secrets out of the file", w, s.Name)
		}
		v, err := l.envValue(e)
		if err != nil {
			continue
		}
		if err := s.Set(v); err != nil {
			p.add("%s: $%s: %v", w, e.Name, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		p.add("%s: the config does not validate: %v", w, err)
		return nil
	}
	return cfg
}

// port resolves a probe's or Service's port to one of the container's.
func port(c *corev1.Container, p intstr.IntOrString) (corev1.ContainerPort, bool) {
	for _, cp := range c.Ports {
		if p.Type == intstr.String && cp.Name == p.StrVal || p.Type == intstr.Int && cp.ContainerPort == p.IntVal {
			return cp, true
		}
	}
	return corev1.ContainerPort{}, false
}

// checkServer checks the server's port, probes, shutdown, Service, PDB and
// anti-affinity.
func (l *layout) checkServer(p *problems, w *workload, cfg *config.Config) {
	_, listen, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		p.add("%s: listen %q: %v", w, cfg.Listen, err)
		return
	}
	want, _ := strconv.Atoi(listen)
	if _, ok := port(w.c, intstr.FromInt32(int32(want))); !ok {
		p.add("%s: the container does not expose the port cikit listens on, %d", w, want)
	}
	for _, probe := range []struct {
		kind string
		p    *corev1.Probe
		path string
	}{{"readiness", w.c.ReadinessProbe, "/readyz"}, {"liveness", w.c.LivenessProbe, "/healthz"}} {
		if probe.p == nil || probe.p.HTTPGet == nil {
			p.add("%s: no HTTP %s probe", w, probe.kind)
			continue
		}
		if probe.p.HTTPGet.Path != probe.path {
			p.add("%s: the %s probe gets %s, not %s", w, probe.kind, probe.p.HTTPGet.Path, probe.path)
		}
		if cp, ok := port(w.c, probe.p.HTTPGet.Port); !ok || int(cp.ContainerPort) != want {
			p.add("%s: the %s probe's port %s is not the one cikit listens on, %d", w, probe.kind, probe.p.HTTPGet.Port.String(), want)
		}
	}
	grace := w.pod.Spec.TerminationGracePeriodSeconds
	if grace == nil || time.Duration(*grace)*time.Second <= cfg.ShutdownTimeout {
		p.add("%s: terminationGracePeriodSeconds must exceed shutdown-timeout %s", w, cfg.ShutdownTimeout)
	}

	served := false
	for _, svc := range l.services {
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		if len(svc.Spec.Selector) == 0 || !sel.Matches(labels.Set(w.pod.Labels)) {
			continue
		}
		served = true
		for _, sp := range svc.Spec.Ports {
			target := sp.TargetPort
			if target.Type == intstr.Int && target.IntVal == 0 {
				target = intstr.FromInt32(sp.Port)
			}
			if cp, ok := port(w.c, target); !ok || int(cp.ContainerPort) != want {
				p.add("Service %s: port %d targets %s, not the port cikit listens on, %d", svc.Name, sp.Port, target.String(), want)
			}
		}
	}
	if !served {
		p.add("%s: no Service selects it", w)
	}

	budgeted := false
	for _, pdb := range l.pdbs {
		l.checkSelector(p, "PodDisruptionBudget "+pdb.Name, pdb.Spec.Selector, w.pod)
		budgeted = true
	}
	if !budgeted {
		p.add("%s: no PodDisruptionBudget", w)
	}

	aff := w.pod.Spec.Affinity
	if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 0 {
		p.add("%s: no pod anti-affinity", w)
		return
	}
	for _, term := range aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey != corev1.LabelHostname {
			p.add("%s: the anti-affinity spreads over %s, not nodes", w, term.TopologyKey)
		}
		l.checkSelector(p, w.String()+" anti-affinity", term.LabelSelector, w.pod)
	}
}

// checkNotSelected checks that the server's Service and PDB do not select
// the pods of another workload.
func (l *layout) checkNotSelected(p *problems, w *workload) {
	set := labels.Set(w.pod.Labels)
	for _, svc := range l.services {
		if len(svc.Spec.Selector) > 0 && labels.SelectorFromSet(svc.Spec.Selector).Matches(set) {
			p.add("Service %s selects the pods of %s", svc.Name, w)
		}
	}
	for _, pdb := range l.pdbs {
		if s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && s.Matches(set) {
			p.add("PodDisruptionBudget %s selects the pods of %s", pdb.Name, w)
		}
	}
}

// checkRunner checks that the runner reaches the server's Service, holds a
// token the servers accept, and stops within its grace period.
func (l *layout) checkRunner(p *problems, w, server *workload, cfg *config.Config) {
	u, err := url.Parse(w.flags["server"])
	if err != nil || u.Scheme != "http" && u.Scheme != "https" {
		p.add("%s: -server %q is not an http(s) URL", w, w.flags["server"])
		return
	}
	reached := false
	for _, svc := range l.services {
		host := svc.Name + "." + svc.Namespace + ".svc"
		if u.Hostname() != host && u.Hostname() != host+".cluster.local" {
			continue
		}
		if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(server.pod.Labels)) {
			p.add("%s: -server names Service %s, which does not select the servers", w, svc.Name)
		}
		for _, sp := range svc.Spec.Ports {
			if strconv.Itoa(int(sp.Port)) == u.Port() {
				reached = true
			}
		}
	}
	if !reached {
		p.add("%s: -server %s is no port of a Service of the layout", w, u)
	}

	token := ""
	for _, e := range w.c.Env {
		if e.Name == "CIKIT_REGISTRATION_TOKEN" {
			token, _ = l.envValue(e)
		}
	}
	if token == "" || !slices.Contains(cfg.Runners.RegistrationTokens, token) {
		p.add("%s: its registration token is not one of the servers' runners.registration-tokens", w)
	}

	duration := func(flag string, def time.Duration) time.Duration {
		v, ok := w.flags[flag]
		if !ok {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			p.add("%s: -%s %q: %v", w, flag, v, err)
		}
		return d
	}
	// The current job's shutdown grace, then its steps' grace between
	// SIGTERM and SIGKILL.
	need := duration("shutdown-grace", agent.DefaultShutdownGrace) + duration("grace", process.DefaultGrace)
	grace := w.pod.Spec.TerminationGracePeriodSeconds
	if grace == nil || time.Duration(*grace)*time.Second <= need {
		p.add("%s: terminationGracePeriodSeconds must exceed the runner's shutdown grace and step grace, %s", w, need)
	}
	if w.flags["sandbox"] != "off" {
		sc := w.c.SecurityContext
		if sc == nil || sc.ProcMount == nil || *sc.ProcMount != corev1.UnmaskedProcMount {
			p.add("%s: the sandbox mounts a /proc of its own, which needs procMount Unmasked", w)
		}
	}
}

func TestManifests(t *testing.T) {
	t.Parallel()
	l, err := readLayout(".")
	require.NoError(t, err)
	require.Empty(t, l.check())
	require.Len(t, l.deployments, 2)
	require.Len(t, l.jobs, 1)
	require.Len(t, l.services, 1)
	require.Len(t, l.pdbs, 1)
	require.Len(t, l.configMaps, 1)
	require.Len(t, l.secrets, 1)
}

// TestNoSecretApplied: `kubectl apply -f deploy/kubernetes/` must never
// install the example's placeholders.
func TestNoSecretApplied(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(manifests, "*"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		require.Contains(t, []string{".yaml"}, filepath.Ext(f), "%s: kubectl applies .yaml, .yml and .json; keep to .yaml", f)
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		objs, err := decode(f, data)
		require.NoError(t, err)
		for _, o := range objs {
			require.NotEqual(t, "Secret", o.GetObjectKind().GroupVersionKind().Kind, "%s holds a Secret", f)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
spec:
  replicas: 1
  selector:
    matchLabels: {app: d}
  template:
    metadata:
      labels: {app: d}
    spec:
      containers:
        - name: c
          image: i
`
	objs, err := decode("ok.yaml", []byte("# a comment\n---\n"+deployment+"---\n# only a comment\n---\n"+strings.Replace(deployment, "name: d", "name: e", 1)))
	require.NoError(t, err, "the control decodes")
	require.Len(t, objs, 2)
	require.IsType(t, &appsv1.Deployment{}, objs[0])
	require.Equal(t, int32(1), *objs[0].(*appsv1.Deployment).Spec.Replicas)
	require.Equal(t, "e", objs[1].(*appsv1.Deployment).Name)

	for _, tc := range []struct {
		name, old, new string
		want           []string
	}{
		{"unknown field", "  replicas: 1", "  replica: 1", []string{"broken.yaml: document 1", `unknown field "spec.replica"`}},
		{"unknown nested field", "image: i", "image: i\n          imagePullPolicyy: Always", []string{`unknown field "spec.template.spec.containers[0].imagePullPolicyy"`}},
		{"field in the wrong case", "  replicas: 1", "  Replicas: 1", []string{`unknown field "spec.Replicas"`}},
		{"wrong type", "replicas: 1", "replicas: three", []string{"replicas", "int32"}},
		{"string for a number", "replicas: 1", `replicas: "1"`, []string{"replicas", "int32"}},
		{"list for a map", "labels: {app: d}\n    spec", "labels: [app]\n    spec", []string{"labels"}},
		{"duplicate field", "  replicas: 1", "  replicas: 1\n  replicas: 2", []string{`key "replicas" already set`}},
		{"misspelt kind", "kind: Deployment", "kind: Deploymnet", []string{`no kind "Deploymnet" is registered`}},
		{"removed apiVersion", "apiVersion: apps/v1", "apiVersion: extensions/v1beta1", []string{`no kind "Deployment" is registered for version "extensions/v1beta1"`}},
		{"kind outside the layout", "kind: Deployment", "kind: StatefulSet", []string{`no kind "StatefulSet" is registered`}},
		{"no kind", "kind: Deployment\n", "", []string{"'Kind' is missing"}},
		{"bad YAML", "replicas: 1", "replicas: [1", []string{"broken.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := strings.Replace(deployment, tc.old, tc.new, 1)
			require.NotEqual(t, deployment, in)
			_, err := decode("broken.yaml", []byte(in))
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

// TestCheckRejects breaks the real layout one way at a time: the check
// must name each.
func TestCheckRejects(t *testing.T) {
	t.Parallel()
	server := func(l *layout) *appsv1.Deployment { return find(l.deployments, "cikit-server") }
	runner := func(l *layout) *appsv1.Deployment { return find(l.deployments, "cikit-runner") }
	serverC := func(l *layout) *corev1.Container { return &server(l).Spec.Template.Spec.Containers[0] }
	runnerC := func(l *layout) *corev1.Container { return &runner(l).Spec.Template.Spec.Containers[0] }
	file := func(l *layout) string { return l.configMaps[0].Data["config.yaml"] }
	setConfig := func(l *layout, s string) { l.configMaps[0].Data["config.yaml"] = s }
	for _, tc := range []struct {
		name   string
		mutate func(l *layout)
		want   string
	}{
		{"readiness path", func(l *layout) { serverC(l).ReadinessProbe.HTTPGet.Path = "/ready" }, "readiness probe gets /ready, not /readyz"},
		{"liveness port", func(l *layout) { serverC(l).LivenessProbe.HTTPGet.Port = intstr.FromInt32(9090) }, "liveness probe's port 9090 is not the one cikit listens on, 8080"},
		{"listen elsewhere", func(l *layout) { setConfig(l, strings.Replace(file(l), `listen: ":8080"`, `listen: ":9000"`, 1)) }, "does not expose the port cikit listens on, 9000"},
		{"unknown key in the config", func(l *layout) { setConfig(l, strings.Replace(file(l), "  partitions:", "  partitionz:", 1)) }, "field partitionz not found"},
		{"config fails Validate", func(l *layout) { setConfig(l, strings.Replace(file(l), "format: json", "format: logfmt", 1)) }, `log.format: must be text or json, not "logfmt"`},
		{"secret missing", func(l *layout) {
			c := serverC(l)
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "CIKIT_WEBHOOKS_GITHUB_SECRETS" })
		}, "webhooks: set at least one secret"},
		{"unknown variable", func(l *layout) { serverC(l).Env[1].Name = "CIKIT_POSTGRES_URI" }, "$CIKIT_POSTGRES_URI is no variable cikit serve reads"},
		{"a setting given to the runner", func(l *layout) {
			runnerC(l).Env = append(runnerC(l).Env, corev1.EnvVar{Name: "CIKIT_LOG_LEVEL", Value: "debug"})
		}, "$CIKIT_LOG_LEVEL is no variable cikit runner reads"},
		{"secret key missing", func(l *layout) { serverC(l).Env[1].ValueFrom.SecretKeyRef.Key = "pg-url" }, "Secret cikit has no key pg-url"},
		{"secret in the file too", func(l *layout) { setConfig(l, file(l)+"webhooks:\n  github-secrets: [in-the-file]\n") }, "webhooks.github-secrets is in the ConfigMap and the Secret"},
		{"server grace", func(l *layout) { server(l).Spec.Template.Spec.TerminationGracePeriodSeconds = ptr(int64(30)) }, "terminationGracePeriodSeconds must exceed shutdown-timeout 30s"},
		{"runner grace", func(l *layout) { runner(l).Spec.Template.Spec.TerminationGracePeriodSeconds = ptr(int64(40)) }, "must exceed the runner's shutdown grace and step grace, 40s"},
		{"runner grace flag", func(l *layout) { runnerC(l).Command = append(runnerC(l).Command, "-shutdown-grace", "5m") }, "must exceed the runner's shutdown grace and step grace, 5m10s"},
		{"images differ", func(l *layout) { runnerC(l).Image = "ghcr.io/cikit/cikit:v2" }, "the workloads run different images"},
		{"job's config", func(l *layout) { l.jobs[0].Spec.Template.Spec.Volumes[0].ConfigMap.Name = "other" }, "reads its config from cikit-config/config.yaml, Job cikit-migrate from other/config.yaml"},
		{"config path", func(l *layout) { serverC(l).Command[3] = "/etc/config.yaml" }, "nothing is mounted at /etc"},
		{"service target", func(l *layout) { l.services[0].Spec.Ports[0].TargetPort = intstr.FromString("metrics") }, "targets metrics, not the port cikit listens on"},
		{"service selects runners", func(l *layout) { delete(l.services[0].Spec.Selector, "app.kubernetes.io/component") }, "Service cikit selects the pods of Deployment cikit-runner"},
		{"selector", func(l *layout) { server(l).Spec.Selector.MatchLabels["app.kubernetes.io/component"] = "api" }, "Deployment cikit-server: the selector"},
		{"pdb selector", func(l *layout) { l.pdbs[0].Spec.Selector.MatchLabels["app.kubernetes.io/component"] = "runner" }, "PodDisruptionBudget cikit-server: the selector"},
		{"anti-affinity", func(l *layout) {
			server(l).Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey = "topology.kubernetes.io/zone"
		}, "spreads over topology.kubernetes.io/zone, not nodes"},
		{"service links", func(l *layout) { server(l).Spec.Template.Spec.EnableServiceLinks = nil }, "enableServiceLinks must be false"},
		{"runner's server", func(l *layout) { runnerC(l).Command[3] = "http://cikit-api.cikit.svc:8080" }, "is no port of a Service of the layout"},
		{"runner's token", func(l *layout) { runnerC(l).Env[0].ValueFrom.SecretKeyRef.Key = "vcs-github-token" }, "not one of the servers' runners.registration-tokens"},
		{"host users", func(l *layout) { runner(l).Spec.Template.Spec.HostUsers = nil }, "procMount Unmasked needs hostUsers: false"},
		{"masked proc", func(l *layout) { runnerC(l).SecurityContext.ProcMount = nil }, "needs procMount Unmasked"},
		{"writable root", func(l *layout) { serverC(l).SecurityContext.ReadOnlyRootFilesystem = ptr(false) }, "read-only root file system"},
		{"no limits", func(l *layout) { serverC(l).Resources = corev1.ResourceRequirements{} }, "CPU and memory requests and a memory limit"},
		{"real secret", func(l *layout) { l.secrets[0].StringData["vcs-github-token"] = "ghp_real" }, "vcs-github-token is not marked REPLACE-ME"},
		{"namespace", func(l *layout) { l.jobs[0].Namespace = "default" }, `cikit-migrate is in namespace "default", not "cikit"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, err := readLayout(".")
			require.NoError(t, err)
			tc.mutate(l)
			got := l.check()
			require.NotEmpty(t, got)
			require.Contains(t, strings.Join(got, "\n"), tc.want)
		})
	}
}

func find(ds []*appsv1.Deployment, name string) *appsv1.Deployment {
	for _, d := range ds {
		if d.Name == name {
			return d
		}
	}
	panic("no Deployment " + name)
}

func ptr[T any](v T) *T { return &v }

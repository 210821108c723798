package process_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/fleet/checkout"
	"github.com/cikit/cikit/fleet/image"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/internal/imagetest"
	"github.com/cikit/cikit/internal/testenv"
	"github.com/cikit/cikit/vcs/gitserve/gitservetest"
)

// firstByte records when the first byte after the line after is written
// to it.
type firstByte struct {
	after string
	seen  []byte
	at    time.Time
}

func (f *firstByte) Write(p []byte) (int, error) {
	if f.at.IsZero() {
		f.seen = append(f.seen, p...)
		if i := bytes.Index(f.seen, []byte(f.after)); i >= 0 && len(f.seen) > i+len(f.after) {
			f.at = time.Now()
		}
	}
	return len(p), nil
}

// BenchmarkSandboxStart measures what starting a job costs: from calling
// RunJob to the first step's onStep call, and to the first byte the
// step prints, for a one-step job on an empty source tree, with plain
// processes and in a bubblewrap sandbox. It reports the p50 and p95 of
// both.
func BenchmarkSandboxStart(b *testing.B) {
	for _, mode := range []struct {
		name    string
		sandbox *process.Sandbox
	}{
		{"plain", nil},
		{"bwrap", &process.Sandbox{}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			e, err := process.New(process.Config{Source: b.TempDir(), WorkRoot: searchableDir(b), Env: []string{"PATH=" + os.Getenv("PATH")}, Sandbox: mode.sandbox})
			if errors.Is(err, process.ErrSandboxUnavailable) {
				testenv.ToolUnavailable(b, testenv.Bubblewrap, err)
			}
			if err != nil {
				b.Fatal(err)
			}
			spec := &cikit.JobSpec{ID: "bench", Steps: []cikit.Step{{Name: "hello", Run: "echo hello"}}}
			benchStart(b, e, process.Job{Spec: spec})
		})
	}
	// A job in an image, on a view unpacked once: the sandbox binds the
	// image's entries and the host loader's files, and the supervisor
	// starts under the host's loader.
	b.Run("bwrap-image", func(b *testing.B) {
		e, err := process.New(process.Config{Source: b.TempDir(), WorkRoot: searchableDir(b), Env: []string{"PATH=" + os.Getenv("PATH")}, Sandbox: &process.Sandbox{}})
		if errors.Is(err, process.ErrSandboxUnavailable) {
			testenv.ToolUnavailable(b, testenv.Bubblewrap, err)
		}
		if err != nil {
			b.Fatal(err)
		}
		spec := &cikit.JobSpec{ID: "bench", Steps: []cikit.Step{{Name: "hello", Run: "echo hello"}}}
		benchStart(b, e, process.Job{Spec: spec, Image: busyboxView(b, "1.36")})
	})
}

// benchStart runs job (whose first step is "hello" and prints) b.N times
// and reports the p50 and p95 of the time to its first step's onStep call
// and to the first byte the step prints.
func benchStart(b *testing.B, e *process.Executor, job process.Job) {
	const header = "--- hello\n" // written by the executor before the step starts
	var toStep, toOutput []time.Duration
	for b.Loop() {
		out := &firstByte{after: header}
		var stepped time.Time
		job.Output, job.OnStep = out, func(int) { stepped = time.Now() }
		start := time.Now()
		res := e.RunJob(context.Background(), job)
		if res.State != cikit.JobSucceeded || out.at.IsZero() {
			b.Fatalf("the job did not print: %+v", res)
		}
		toStep = append(toStep, stepped.Sub(start))
		toOutput = append(toOutput, out.at.Sub(start))
	}
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"onStep", toStep}, {"output", toOutput}} {
		slices.Sort(m.d)
		b.ReportMetric(ms(m.d[len(m.d)/2]), "ms-to-"+m.name+"-p50")
		b.ReportMetric(ms(m.d[min(len(m.d)-1, len(m.d)*95/100)]), "ms-to-"+m.name+"-p95")
	}
}

// BenchmarkCheckoutStart measures what starting a job that checks out
// its commit costs: RunJob to the first step, the checkout of a small
// repository (20 files) over git's smart HTTP included, with the
// runner's cache warm after the first run, with plain processes and in a
// sandbox: one that shows the cache to the job, and one whose user cannot
// reach it, so that each checkout copies the objects into the workspace.
func BenchmarkCheckoutStart(b *testing.B) {
	repos := gitservetest.NewRepos(b)
	repos.Create(b, "acme/app", "main")
	files := map[string]string{"go.mod": "module example.com/app\n"}
	for i := range 20 {
		files[fmt.Sprintf("pkg/f%d.go", i)] = fmt.Sprintf("package pkg\n\nconst F%d = %d\n", i, i)
	}
	sha := repos.Commit(b, "acme/app", "main", files)
	srv := gitservetest.Serve(b, repos.Root, gitservetest.BasicAuth("job", "tok"))
	jc := &cikit.JobContext{RunContext: cikit.RunContext{Repository: "acme/app", Ref: "refs/heads/main", SHA: sha}, RunID: "r", Attempt: 1,
		Source: &cikit.CheckoutSource{URL: srv.URL + "/acme/app.git", Username: "job", Token: "tok-bench"}}
	for _, mode := range []struct {
		name    string
		sandbox *process.Sandbox
		private bool // the cache is in a directory only the runner's user may search
	}{
		{"plain", nil, false},
		{"bwrap", &process.Sandbox{}, false},
		{"bwrap-copied", &process.Sandbox{}, true},
	} {
		b.Run(mode.name, func(b *testing.B) {
			if mode.private && os.Geteuid() != 0 {
				b.Skip("only a runner started as root has a sandbox user of another uid, which a directory can keep out")
			}
			dir := searchableDir(b)
			if mode.private {
				dir = filepath.Join(dir, "private")
				if err := os.Mkdir(dir, 0o700); err != nil {
					b.Fatal(err)
				}
			}
			cache := filepath.Join(dir, "cache")
			co, err := checkout.New(checkout.Config{CacheDir: cache})
			if err != nil {
				b.Fatal(err)
			}
			e, err := process.New(process.Config{Source: b.TempDir(), WorkRoot: searchableDir(b), Env: []string{"PATH=" + os.Getenv("PATH")}, Sandbox: mode.sandbox, Checkout: co})
			if errors.Is(err, process.ErrSandboxUnavailable) {
				testenv.ToolUnavailable(b, testenv.Bubblewrap, err)
			}
			if err != nil {
				b.Fatal(err)
			}
			benchStart(b, e, process.Job{Context: jc, Spec: &cikit.JobSpec{ID: "bench", Checkout: &cikit.Checkout{}, Steps: []cikit.Step{{Name: "hello", Run: "cat go.mod"}}}})
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkArtifactTransfer measures what a 32 MiB artifact of random
// bytes (which zstd cannot shrink) costs a job, plain processes, over a
// SignedFileStore served on loopback: "upload" runs a GitHub job whose
// upload-artifact step packs and uploads it (with overwrite), "download"
// a native job that needs its producer and gets it unpacked before its
// first step. Each op is a whole job; compare with BenchmarkSandboxStart
// for the job's own cost.
func BenchmarkArtifactTransfer(b *testing.B) {
	f := newFiles(b)
	bd := &bundle{src: b.TempDir(), work: searchableDir(b)}
	e, err := process.New(process.Config{Source: bd.src, WorkRoot: bd.work, Env: []string{"PATH=" + os.Getenv("PATH")}, Transfer: artifacts.Sender{HTTP: f.client}})
	if err != nil {
		b.Fatal(err)
	}
	bd.exec = e
	const size = 32 << 20
	blob := make([]byte, size)
	_, _ = rand.Read(blob)
	if err := os.WriteFile(filepath.Join(bd.src, "blob.bin"), blob, 0o644); err != nil {
		b.Fatal(err)
	}
	upload := &cikit.JobSpec{ID: "build", Format: "github", Steps: []cikit.Step{
		{Name: "up", Uses: "actions/upload-artifact@v4", With: map[string]string{"name": "blob", "path": "blob.bin", "overwrite": "true"}},
	}}
	b.Run("upload", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			if res, out := f.run(b, bd, upload, nil); res.State != cikit.JobSucceeded {
				b.Fatalf("%s: %s", res.Reason, out)
			}
		}
	})
	download := &cikit.JobSpec{ID: "test", Format: "native", Needs: []string{"build"}, Steps: steps("test -f blob.bin")}
	b.Run("download", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			if res, out := f.run(b, bd, download, map[string]cikit.NeedResult{"build": succeeded}); res.State != cikit.JobSucceeded {
				b.Fatalf("%s: %s", res.Reason, out)
			}
		}
	})
}

// BenchmarkImageStart measures the start of a job on an image the
// runner's store holds (pull policy if-not-present): from RunJob to the
// first step, the job's view of the image (an overlay mount where the
// runner may mount) and its sandbox included, beside the same job on
// the host's directories (bwrap-host) in the same run. It reports the
// p50 and p95 of both.
func BenchmarkImageStart(b *testing.B) {
	reg, base, _ := serviceRegistry(b)
	spec := &cikit.JobSpec{ID: "bench", Steps: []cikit.Step{{Name: "hello", Run: "echo hello"}}}
	e := imageExecutor(b, reg, true)
	inImage := *spec
	inImage.Image = base
	if res := e.RunJob(context.Background(), process.Job{Spec: &inImage}); res.State != cikit.JobSucceeded {
		b.Fatalf("the first run, which pulls the image: %+v", res)
	}
	b.Run("bwrap-image", func(b *testing.B) { benchStart(b, e, process.Job{Spec: &inImage}) })
	b.Run("bwrap-host", func(b *testing.B) { benchStart(b, e, process.Job{Spec: spec}) })
}

// BenchmarkServiceReady measures what a service costs a job: RunJob to
// the first step of a job in an image with the pingd service (its image
// cached, its port probed until it accepts), beside the same job
// without it, in the same run; p50 and p95 of both.
func BenchmarkServiceReady(b *testing.B) {
	reg, base, svc := serviceRegistry(b)
	e := imageExecutor(b, reg, false)
	plain := &cikit.JobSpec{ID: "bench", Image: base, Steps: []cikit.Step{{Name: "hello", Run: "echo hello"}}}
	withService := *plain
	withService.Services = []cikit.Service{{Name: "db", Image: svc}}
	if res := e.RunJob(context.Background(), process.Job{Spec: &withService}); res.State != cikit.JobSucceeded {
		b.Fatalf("the first run, which pulls the images: %+v", res)
	}
	b.Run("with-service", func(b *testing.B) { benchStart(b, e, process.Job{Spec: &withService}) })
	b.Run("without", func(b *testing.B) { benchStart(b, e, process.Job{Spec: plain}) })
}

// imageExecutor is a sandboxed executor whose jobs run in images of
// reg, cached (pull policy if-not-present), and, with host, on the host
// when they name none.
func imageExecutor(b *testing.B, reg *imagetest.Registry, host bool) *process.Executor {
	cfg := process.Config{Source: b.TempDir(), WorkRoot: searchableDir(b), Env: []string{"PATH=" + os.Getenv("PATH")}}
	withImages(b, reg, func(im *process.Images) { im.Host, im.PullPolicy = host, image.PullIfNotPresent })(&cfg)
	e, err := process.New(cfg)
	if errors.Is(err, process.ErrSandboxUnavailable) {
		testenv.ToolUnavailable(b, testenv.Bubblewrap, err)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return e
}

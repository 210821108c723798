package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Services the harnesses know, as passed to [ServiceUnavailable].
const (
	PostgreSQL = "PostgreSQL"
	Redis      = "Redis"
)

// Environment variables that point tests at a service instance other
// than the default on 127.0.0.1.
const (
	DatabaseURLVar = "CIKIT_TEST_DATABASE_URL" // PostgreSQL connection URL
	RedisURLVar    = "CIKIT_TEST_REDIS_URL"    // Redis URL, redis://host:port/db
)

// envVars maps a service to the variable that points tests at it, so the
// messages of ServiceUnavailable can say what to set.
var envVars = map[string]string{
	PostgreSQL: DatabaseURLVar,
	Redis:      RedisURLVar,
}

// InCI reports whether the tests run in CI, where the CI environment
// variable is "true" or "1" (GitHub Actions, GitLab CI and most others set
// it to "true").
func InCI() bool {
	switch os.Getenv("CI") {
	case "true", "1":
		return true
	}
	return false
}

// ServiceUnavailable ends the test because service (for example
// [PostgreSQL]) could not be reached; err says why. In CI it fails the
// test, elsewhere it skips it. Either way it does not return.
func ServiceUnavailable(t testing.TB, service string, err error) {
	t.Helper()
	ci := InCI()
	msg := unavailableMessage(service, err, ci)
	if ci {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Tools the tests run, as passed to [ToolUnavailable].
const (
	Bubblewrap = "bubblewrap"
	Chromium   = "chromium" // headless browser of the web UI's tests
	// Busybox is Debian's static busybox, which the test images are
	// made of (internal/imagetest).
	Busybox = "busybox-static"
)

// installs maps a tool to the command that installs it on Debian and
// Ubuntu, which ./test.sh runs when it can.
var installs = map[string]string{
	Bubblewrap: "apt-get install bubblewrap",
	Chromium:   "apt-get install chromium",
	Busybox:    "apt-get install busybox-static",
}

// ToolUnavailable ends the test because tool (a program the tests run,
// such as [Bubblewrap]) is missing or does not work on this machine; err
// says why. In CI it fails the test, elsewhere it skips it. Either way it
// does not return.
func ToolUnavailable(t testing.TB, tool string, err error) {
	t.Helper()
	ci := InCI()
	msg := toolMessage(tool, err, ci)
	if ci {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func toolMessage(tool string, err error, ci bool) string {
	install, ok := installs[tool]
	if !ok {
		install = "install it"
	}
	if ci {
		return fmt.Sprintf("%s is required in CI but is not usable: %v\n"+
			"Provide it: run the tests with ./test.sh, which installs it (%s).", tool, err, install)
	}
	return fmt.Sprintf("skipping: %s is not usable: %v\n"+
		"Install it (%s), or run ./test.sh, which does.", tool, err, install)
}

func unavailableMessage(service string, err error, ci bool) string {
	envVar, ok := envVars[service]
	if !ok {
		envVar = "the environment variable that points tests at it"
	}
	if ci {
		return fmt.Sprintf("%s is required in CI but is unreachable: %v\n"+
			"Provide it: run the tests with ./test.sh, which installs and starts it, or set %s to a reachable instance.",
			service, err, envVar)
	}
	return fmt.Sprintf("skipping: %s is unreachable: %v\n"+
		"Set %s to a reachable instance, or run ./test.sh, which starts it.",
		service, err, envVar)
}

// Verdict is how a function given a stand-in test ended it.
type Verdict struct {
	Ended string // "fatal", "skip", or "" when the function returned
	Msg   string
}

// Capture calls f with a stand-in for t whose Fatal and Skip (and their
// f-variants) record a Verdict and end f's goroutine, as the real ones
// would, without failing or skipping t. It lets the harnesses' handling
// of a missing service be tested.
func Capture(t testing.TB, f func(testing.TB)) Verdict {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.v
}

type recorder struct {
	testing.TB
	v Verdict
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatal(args ...any)                 { r.end("fatal", fmt.Sprint(args...)) }
func (r *recorder) Fatalf(format string, args ...any) { r.end("fatal", fmt.Sprintf(format, args...)) }
func (r *recorder) Skip(args ...any)                  { r.end("skip", fmt.Sprint(args...)) }
func (r *recorder) Skipf(format string, args ...any)  { r.end("skip", fmt.Sprintf(format, args...)) }

func (r *recorder) end(how, msg string) {
	r.v = Verdict{Ended: how, Msg: msg}
	runtime.Goexit()
}

// SharedTestdataVar points tests at the collection of real files written
// by other people (workflows, pipeline files, webhook payloads) that is
// kept beside the repository, not in it.
const SharedTestdataVar = "CIKIT_SHARED_TESTDATA"

// SharedTestdata returns the directory sub of that collection: where
// SharedTestdataVar points, else ../shared/testdata beside the module's
// root. When it is absent the test is skipped with a message saying so,
// and fails in CI, where the collection is always provided.
func SharedTestdata(t testing.TB, sub string) string {
	t.Helper()
	root := os.Getenv(SharedTestdataVar)
	if root == "" {
		root = filepath.Join(moduleRoot(), "..", "shared", "testdata")
	}
	dir := filepath.Join(root, sub)
	if _, err := os.Stat(dir); err != nil {
		msg := fmt.Sprintf("the real %s files are not at %s (%v): they are kept beside the repository in ../shared/testdata, or where %s points",
			sub, dir, err, SharedTestdataVar)
		if InCI() {
			t.Fatal(msg)
		}
		t.Skip("skipping: " + msg)
	}
	return dir
}

// moduleRoot is the nearest directory above the working directory (a
// test's package directory) that holds go.mod.
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}

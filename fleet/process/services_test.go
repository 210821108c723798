package process_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/internal/imagetest"
	"github.com/cikit/cikit/internal/proctest"
	"github.com/cikit/cikit/internal/syncbuf"
)

// serviceRegistry pushes the busybox image and the pingd service image
// on it (a Go TCP service answering PING with PONG on $PORT, default
// 6390, which its config exposes).
func serviceRegistry(t testing.TB) (reg *imagetest.Registry, base, svc string) {
	t.Helper()
	reg = imagetest.NewRegistry(t, nil)
	b := imagetest.BusyboxImage(t, "1")
	reg.Push(t, "test/busybox:1", b)
	reg.Push(t, "test/pingd:1", imagetest.ServiceImage(t, b))
	return reg, reg.Host + "/test/busybox:1", reg.Host + "/test/pingd:1"
}

// uniqueArg is a command-line argument only this test's processes have.
func uniqueArg(t *testing.T) string {
	return fmt.Sprintf("--test-marker=%d-%s", os.Getpid(), t.Name())
}

// TestServicesGitLabAlias: a GitLab job with a service aliased db
// reaches it by that name on its port, once its exposed port accepts
// connections; the service's output is in the job's log in a section of
// its own, and no process of it survives the job.
func TestServicesGitLabAlias(t *testing.T) {
	t.Parallel()
	reg, base, svc := serviceRegistry(t)
	b := setup(t, withImages(t, reg))
	marker := uniqueArg(t)
	// The service takes its port from the job's variables, as GitLab
	// passes them to services, through a variable of its own.
	res := b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "gl-db", Format: "gitlab", Image: base,
		Env:      map[string]string{"DB_PORT": "6390"},
		Services: []cikit.Service{{Name: "db", Image: svc, Command: []string{marker}, Env: map[string]string{"PORT": "${DB_PORT}"}}},
		Steps:    steps(`echo PING | nc db $DB_PORT`, `grep -w db /etc/hosts`)}})
	out := b.out.String()
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	require.Contains(t, out, "--- service db is ready (port 6390 accepts connections)", "GitLab waits for the image's exposed port")
	require.Contains(t, out, "\nPONG\n", "the step reached the service by its alias")
	require.Contains(t, out, "--- service db ("+svc+") output:\nservice: listening on [::]:6390\n--- end of service db\n")
	require.Empty(t, proctest.Running("/usr/bin/pingd", marker), "the service outlived the job")
}

// TestServicesGitHubHealthCmd: a GitHub job in a container with a
// service redis whose --health-cmd decides when it is ready reaches it
// by its id, on the port its env chose; a job on the host with the same
// service reaches it as well.
func TestServicesGitHubHealthCmd(t *testing.T) {
	t.Parallel()
	reg, base, svc := serviceRegistry(t)
	b := setup(t, withImages(t, reg, func(im *process.Images) { im.Host = true }))
	marker := uniqueArg(t)
	service := cikit.Service{Name: "redis", Image: svc, Env: map[string]string{"PORT": "7001"}, Ports: []string{"7001:7001"},
		Command: []string{marker},
		Health:  &cikit.ServiceHealth{Cmd: "echo PING | nc 127.0.0.1 7001 | grep -q PONG", Interval: 20 * time.Millisecond, Retries: 500}}
	for _, image := range []string{base, ""} {
		out := &syncbuf.Buffer{}
		res := b.exec.RunJob(context.Background(), process.Job{Output: out, Spec: &cikit.JobSpec{ID: "gh-redis", Format: "github", Image: image,
			Services: []cikit.Service{service},
			Steps:    steps(`echo PING | busybox nc redis 7001`)}})
		require.Equal(t, cikit.JobSucceeded, res.State, out.String())
		require.Contains(t, out.String(), `--- service redis is ready (health check "echo PING | nc 127.0.0.1 7001 | grep -q PONG")`)
		require.Contains(t, out.String(), "\nPONG\n")
		require.Empty(t, proctest.Running("/usr/bin/pingd", marker), "the service outlived the job")
	}
}

// TestServicesUnhealthy: a service whose health check never succeeds
// fails the job before its first step, naming the service and showing
// its output; one that exits at once does too, with its exit code.
func TestServicesUnhealthy(t *testing.T) {
	t.Parallel()
	reg, base, svc := serviceRegistry(t)
	b := setup(t, withImages(t, reg))
	marker := uniqueArg(t)
	res := b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "sick", Format: "github", Image: base,
		Services: []cikit.Service{{Name: "db", Image: svc, Command: []string{marker},
			Health: &cikit.ServiceHealth{Cmd: "echo checked; exit 1", Interval: 10 * time.Millisecond, Retries: 3}}},
		Steps: steps(`echo first step ran`)}})
	require.Equal(t, cikit.JobFailed, res.State)
	require.Equal(t, cikit.FailureScript, res.FailureClass, res.Reason)
	require.Contains(t, res.Reason, "service db ("+svc+") is unhealthy: its health check \"echo checked; exit 1\" failed 3 times in a row")
	require.Contains(t, res.Reason, "its output ended with:\n")
	require.Contains(t, res.Reason, "service: listening on")
	require.NotContains(t, b.out.String(), "first step ran")
	require.Empty(t, proctest.Running("/usr/bin/pingd", marker), "the service outlived the job")

	out := &syncbuf.Buffer{}
	res = b.exec.RunJob(context.Background(), process.Job{Output: out, Spec: &cikit.JobSpec{ID: "crash", Format: "gitlab", Image: base,
		Services: []cikit.Service{{Name: "db", Image: svc, Env: map[string]string{"PORT": "not-a-port"}}},
		Steps:    steps(`echo first step ran`)}})
	require.Equal(t, cikit.JobFailed, res.State, out.String())
	require.Contains(t, res.Reason, "service db ("+svc+") ended before it was ready, with exit code 1")
	require.Contains(t, res.Reason, "not-a-port")
	require.NotContains(t, out.String(), "first step ran")
}

// TestServicesNeedImages: a runner without an image store refuses a job
// with services, as its own failure.
func TestServicesNeedImages(t *testing.T) {
	t.Parallel()
	b := setup(t, sandboxed)
	res := b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "no-store",
		Services: []cikit.Service{{Name: "db", Image: "postgres:16"}}, Steps: steps(`echo ran`)}})
	require.Equal(t, cikit.JobFailed, res.State)
	require.Equal(t, cikit.FailureInfrastructure, res.FailureClass)
	require.Contains(t, res.Reason, "this job has services (db), and this runner runs no images")
}

// TestServicesOnTheHostNetwork: with the host's network, a service
// listens there, and the job still reaches it by its name.
func TestServicesOnTheHostNetwork(t *testing.T) {
	t.Parallel()
	reg, base, svc := serviceRegistry(t)
	b := setup(t, withImages(t, reg), func(c *process.Config) { c.Sandbox.Network = true })
	marker := uniqueArg(t)
	// A port free on the host now, which the service takes.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	require.NoError(t, ln.Close())
	res := b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "host-net", Format: "gitlab", Image: base,
		Services: []cikit.Service{{Name: "cache", Image: svc, Env: map[string]string{"PORT": port}, Ports: []string{port}, Command: []string{marker}}},
		Steps:    steps(`echo PING | nc cache ` + port)}})
	require.Equal(t, cikit.JobSucceeded, res.State, b.out.String())
	require.Contains(t, b.out.String(), "--- service cache is ready (port "+port+" accepts connections)")
	require.Contains(t, b.out.String(), "\nPONG\n")
	require.Empty(t, proctest.Running("/usr/bin/pingd", marker), "the service outlived the job")

	// A port taken on the host fails the job before anything answers in
	// the service's place.
	taken, err := net.Listen("tcp", ":"+port)
	require.NoError(t, err)
	defer taken.Close()
	out := &syncbuf.Buffer{}
	res = b.exec.RunJob(context.Background(), process.Job{Output: out, Spec: &cikit.JobSpec{ID: "host-net-taken", Format: "gitlab", Image: base,
		Services: []cikit.Service{{Name: "cache", Image: svc, Env: map[string]string{"PORT": port}, Ports: []string{port}, Command: []string{marker}}},
		Steps:    steps(`echo ran`)}})
	require.Equal(t, cikit.JobFailed, res.State, out.String())
	require.Equal(t, cikit.FailureInfrastructure, res.FailureClass)
	require.Contains(t, res.Reason, "service cache: port "+port+" is in use on the runner's host")
	require.NotContains(t, out.String(), "\nran\n")
}

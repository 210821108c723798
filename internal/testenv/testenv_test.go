package testenv

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestInCI(t *testing.T) {
	// t.Setenv forbids t.Parallel: these subtests change the process
	// environment.
	for _, tc := range []struct {
		value string
		want  bool
	}{
		{"true", true},
		{"1", true},
		{"", false},
		{"false", false},
		{"0", false},
		{"yes", false},
	} {
		t.Run(fmt.Sprintf("CI=%q", tc.value), func(t *testing.T) {
			t.Setenv("CI", tc.value)
			require.Equal(t, tc.want, InCI())
		})
	}
}

// recorder stands in for a test so ServiceUnavailable's verdict can be
// observed without failing or skipping the real test. Like the real ones,
// its Fatal and Skip end the calling goroutine.
type recorder struct {
	testing.TB
	verdict string
	msg     string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatal(args ...any) {
	r.verdict, r.msg = "fatal", fmt.Sprint(args...)
	runtime.Goexit()
}

func (r *recorder) Skip(args ...any) {
	r.verdict, r.msg = "skip", fmt.Sprint(args...)
	runtime.Goexit()
}

func serviceUnavailable(t *testing.T, service string, err error) *recorder {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ServiceUnavailable(r, service, err)
	}()
	<-done
	return r
}

func TestServiceUnavailable(t *testing.T) {
	dialErr := errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

	t.Run("CI fails", func(t *testing.T) {
		t.Setenv("CI", "true")
		r := serviceUnavailable(t, PostgreSQL, dialErr)
		require.Equal(t, "fatal", r.verdict)
		require.Contains(t, r.msg, "PostgreSQL is required in CI")
		require.Contains(t, r.msg, "connection refused")
		require.Contains(t, r.msg, DatabaseURLVar)
		require.Contains(t, r.msg, "./test.sh")
	})

	t.Run("locally skips", func(t *testing.T) {
		t.Setenv("CI", "")
		r := serviceUnavailable(t, Redis, dialErr)
		require.Equal(t, "skip", r.verdict)
		require.Contains(t, r.msg, "Redis is unreachable")
		require.Contains(t, r.msg, RedisURLVar)
		require.Contains(t, r.msg, "./test.sh")
	})

	t.Run("unknown service", func(t *testing.T) {
		t.Setenv("CI", "")
		r := serviceUnavailable(t, "Kafka", dialErr)
		require.Equal(t, "skip", r.verdict)
		require.Contains(t, r.msg, "Kafka is unreachable")
	})
}

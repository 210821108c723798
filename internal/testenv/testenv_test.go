package testenv

import (
	"errors"
	"fmt"
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

func serviceUnavailable(t *testing.T, service string, err error) Verdict {
	t.Helper()
	return Capture(t, func(tb testing.TB) { ServiceUnavailable(tb, service, err) })
}

func TestServiceUnavailable(t *testing.T) {
	dialErr := errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

	t.Run("CI fails", func(t *testing.T) {
		t.Setenv("CI", "true")
		r := serviceUnavailable(t, PostgreSQL, dialErr)
		require.Equal(t, "fatal", r.Ended)
		require.Contains(t, r.Msg, "PostgreSQL is required in CI")
		require.Contains(t, r.Msg, "connection refused")
		require.Contains(t, r.Msg, DatabaseURLVar)
		require.Contains(t, r.Msg, "./test.sh")
	})

	t.Run("locally skips", func(t *testing.T) {
		t.Setenv("CI", "")
		r := serviceUnavailable(t, Redis, dialErr)
		require.Equal(t, "skip", r.Ended)
		require.Contains(t, r.Msg, "Redis is unreachable")
		require.Contains(t, r.Msg, RedisURLVar)
		require.Contains(t, r.Msg, "./test.sh")
	})

	t.Run("unknown service", func(t *testing.T) {
		t.Setenv("CI", "")
		r := serviceUnavailable(t, "Kafka", dialErr)
		require.Equal(t, "skip", r.Ended)
		require.Contains(t, r.Msg, "Kafka is unreachable")
	})
}

func TestToolUnavailable(t *testing.T) {
	missing := errors.New(`exec: "bwrap": executable file not found in $PATH`)
	toolUnavailable := func(t *testing.T, tool string) Verdict {
		t.Helper()
		return Capture(t, func(tb testing.TB) { ToolUnavailable(tb, tool, missing) })
	}

	t.Run("CI fails", func(t *testing.T) {
		t.Setenv("CI", "1")
		r := toolUnavailable(t, Bubblewrap)
		require.Equal(t, "fatal", r.Ended)
		require.Contains(t, r.Msg, "bubblewrap is required in CI")
		require.Contains(t, r.Msg, "executable file not found")
		require.Contains(t, r.Msg, "apt-get install bubblewrap")
		require.Contains(t, r.Msg, "./test.sh")
	})

	t.Run("locally skips", func(t *testing.T) {
		t.Setenv("CI", "")
		r := toolUnavailable(t, Bubblewrap)
		require.Equal(t, "skip", r.Ended)
		require.Contains(t, r.Msg, "bubblewrap is not usable")
		require.Contains(t, r.Msg, "apt-get install bubblewrap")
	})

	t.Run("unknown tool", func(t *testing.T) {
		t.Setenv("CI", "")
		r := toolUnavailable(t, "frobnicator")
		require.Equal(t, "skip", r.Ended)
		require.Contains(t, r.Msg, "frobnicator is not usable")
		require.Contains(t, r.Msg, "install it")
	})
}

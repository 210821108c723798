package redistest_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"go.uber.org/goleak"

	"github.com/cikit/cikit/internal/testenv"

	"github.com/cikit/cikit/internal/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestKey(t *testing.T) {
	t.Parallel()
	ns := &redistest.NS{Prefix: "cikit-test:ab12:"}
	require.Equal(t, "cikit-test:ab12:tenant:acme", ns.Key("tenant", "acme"))
	require.Equal(t, "cikit-test:ab12:one", ns.Key("one"))
	require.Equal(t, "cikit-test:ab12:", ns.Key())
}

func TestNewPrefixesAreUnique(t *testing.T) {
	t.Parallel()
	a, b := redistest.New(t), redistest.New(t)
	require.NotEqual(t, a.Prefix, b.Prefix)
	require.Regexp(t, `^cikit-test:[0-9a-f]+:$`, a.Prefix)
}

// TestCleanupDeletesOnlyItsKeys watches one namespace's cleanup from
// another: a sub-test's cleanups have run when t.Run returns.
func TestCleanupDeletesOnlyItsKeys(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	other := redistest.New(t)
	require.NoError(t, other.Client.Set(ctx, other.Key("keep"), "v", 0).Err())

	var prefix string
	var keys []string
	t.Run("writer", func(t *testing.T) {
		ns := redistest.New(t)
		prefix = ns.Prefix
		// More keys than one cleanup batch, of several types.
		pipe := ns.Client.Pipeline()
		for i := range 1200 {
			key := ns.Key("n", strconv.Itoa(i))
			keys = append(keys, key)
			pipe.Set(ctx, key, i, 0)
		}
		keys = append(keys, ns.Key("hash"), ns.Key("zset"))
		pipe.HSet(ctx, ns.Key("hash"), "f", "v")
		pipe.ZAdd(ctx, ns.Key("zset"), redis.Z{Score: 1, Member: "m"})
		_, err := pipe.Exec(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(len(keys)), other.Client.Exists(ctx, keys...).Val())
	})

	n, err := other.Client.Exists(ctx, keys...).Result()
	require.NoError(t, err)
	require.Zero(t, n, "keys under %s survived the cleanup", prefix)
	var left []string
	iter := other.Client.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		left = append(left, iter.Val())
	}
	require.NoError(t, iter.Err())
	require.Empty(t, left)

	v, err := other.Client.Get(ctx, other.Key("keep")).Result()
	require.NoError(t, err)
	require.Equal(t, "v", v)
}

func TestUnreachable(t *testing.T) {
	// A port that was just free: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	t.Setenv("CIKIT_TEST_REDIS_URL", "redis://"+addr+"/0")

	for ci, want := range map[string]string{"": "skip", "true": "fatal"} {
		t.Run("CI="+ci, func(t *testing.T) {
			t.Setenv("CI", ci)
			v := testenv.Capture(t, func(tb testing.TB) { redistest.New(tb) })
			require.Equal(t, want, v.Ended)
			require.Contains(t, v.Msg, "Redis")
			require.Contains(t, v.Msg, "CIKIT_TEST_REDIS_URL")
			require.Contains(t, v.Msg, addr)
		})
	}
}

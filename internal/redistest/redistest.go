package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cikit/cikit/internal/testenv"
)

// DefaultURL is the server used when CIKIT_TEST_REDIS_URL is unset.
const DefaultURL = "redis://127.0.0.1:6379/0"

// dialTimeout bounds connection attempts, so an unreachable server skips
// or fails the test in seconds rather than at the test timeout.
const dialTimeout = 5 * time.Second

// scanBatch is the COUNT hint for SCAN during cleanup: large enough for
// few round trips, small enough not to block a server shared by tests.
const scanBatch = 500

// NS is one test's namespace on the test server.
type NS struct {
	Client *redis.Client
	// Prefix starts every key of the test: "cikit-test:<random>:".
	Prefix string
}

// Key returns Prefix followed by parts joined with ":".
func (n *NS) Key(parts ...string) string {
	return n.Prefix + strings.Join(parts, ":")
}

// New returns a client and a fresh prefix for t. When t ends every key
// under the prefix is deleted and the client is closed.
func New(t testing.TB) *NS {
	t.Helper()
	rawURL := os.Getenv(testenv.RedisURLVar)
	if rawURL == "" {
		rawURL = DefaultURL
	}
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		t.Fatalf("redistest: %s: %v", testenv.RedisURLVar, err)
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = dialTimeout
	}

	// A plain dial first, so a server that is not there is reported at
	// once: the client would retry the Ping, and each dial within it, for
	// seconds and log a line for every failed round.
	conn, err := net.DialTimeout(opts.Network, opts.Addr, opts.DialTimeout)
	if err != nil {
		testenv.ServiceUnavailable(t, testenv.Redis, err)
	}
	_ = conn.Close()

	client := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*dialTimeout)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		testenv.ServiceUnavailable(t, testenv.Redis, err)
	}

	ns := &NS{Client: client, Prefix: "cikit-test:" + randomHex() + ":"}
	t.Cleanup(func() {
		if err := ns.deleteAll(); err != nil {
			t.Errorf("redistest: delete keys %s*: %v", ns.Prefix, err)
		}
		if err := client.Close(); err != nil {
			t.Errorf("redistest: close client: %v", err)
		}
	})
	return ns
}

// Flush deletes every key of the namespace now: a test's FLUSHALL, which
// leaves other tests' keys alone.
func (n *NS) Flush(ctx context.Context) error {
	return n.deleteIn(ctx)
}

// deleteAll runs as a cleanup, when t.Context() is already canceled.
func (n *NS) deleteAll() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return n.deleteIn(ctx)
}

// deleteIn deletes the namespace's keys. UNLINK frees the memory off the
// server's main thread.
func (n *NS) deleteIn(ctx context.Context) error {
	// The prefix holds only hex, letters and ":", none of which are glob
	// metacharacters, so it needs no escaping in MATCH.
	iter := n.Client.Scan(ctx, 0, n.Prefix+"*", scanBatch).Iterator()
	batch := make([]string, 0, scanBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := n.Client.Unlink(ctx, batch...).Err()
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == cap(batch) {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("scan: %w", err)
	}
	return flush()
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	return hex.EncodeToString(b[:])
}

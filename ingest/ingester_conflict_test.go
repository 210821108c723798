package ingest_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/ingest/ingesttest"
	"github.com/cikit/cikit/internal/syncbuf"
	"github.com/cikit/cikit/vcs"
)

// TestIngestLogsConflictingRedelivery: a delivery whose key (provider,
// hook, delivery id) was taken in with another body is dropped, and the
// Ingester logs the conflict as a warning with both digests — from its
// cache and from the store's record, as on a server that did not see the
// first delivery — on both stores; a redelivery of the same body is
// dropped quietly. The conflicting body's own semantic key is not taken
// for seen: a real delivery of it still creates its runs. (Before, the
// conflict was dropped without a trace, and the semantic key was cached
// as the first delivery's.)
func TestIngestLogsConflictingRedelivery(t *testing.T) {
	t.Parallel()
	for _, s := range manualStores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			runs, _ := s.new(t)
			p := &vcs.Memory{}
			for _, sha := range []string{"c1", "c2"} {
				p.AddCommit("acme/api", sha, map[string]string{".cikit.yml": native})
			}
			server := func() (*ingest.Ingester, *syncbuf.Buffer) {
				var logs syncbuf.Buffer
				in, err := ingest.NewIngester(ingest.IngesterConfig{Runs: runs, VCS: p, Debounce: -1,
					Logger: slog.New(slog.NewTextHandler(&logs, nil))})
				require.NoError(t, err)
				return in, &logs
			}
			first := ingesttest.Push("d1", "main", "c0", "c1", 0)
			first.Raw = []byte(`{"after":"c1"}`)
			conflicting := ingesttest.Push("d1", "main", "c1", "c2", 1)
			conflicting.Raw = []byte(`{"after":"c2"}`)

			one, oneLogs := server()
			d, created, err := one.Ingest(ctx, first)
			require.NoError(t, err)
			require.True(t, created)
			require.Len(t, d.RunIDs, 1)
			require.Equal(t, first.RawDigest(), d.RawDigest, "the record holds the body's digest")

			// Another server: the store's record tells.
			two, twoLogs := server()
			again, created, err := two.Ingest(ctx, conflicting)
			require.NoError(t, err)
			require.False(t, created, "the conflicting delivery is dropped")
			require.Equal(t, d.RunIDs, again.RunIDs)
			requireConflictLogged(t, twoLogs.String(), first, conflicting)
			// The same server again, from its cache.
			_, created, err = two.Ingest(ctx, conflicting)
			require.NoError(t, err)
			require.False(t, created)
			require.Equal(t, 2, strings.Count(twoLogs.String(), "conflicting redelivery"), "logged from the cache too")

			// A redelivery of the same body is no conflict.
			_, created, err = one.Ingest(ctx, first)
			require.NoError(t, err)
			require.False(t, created)
			_, created, err = two.Ingest(ctx, first)
			require.NoError(t, err)
			require.False(t, created)
			require.NotContains(t, oneLogs.String(), "conflicting redelivery")
			require.Equal(t, 2, strings.Count(twoLogs.String(), "conflicting redelivery"))

			// The push the conflicting body describes, delivered for real.
			real := *conflicting
			real.DeliveryID = "d2"
			made, created, err := two.Ingest(ctx, &real)
			require.NoError(t, err)
			require.True(t, created, "the conflicting body's semantic key was not recorded: %+v", made)
			require.Len(t, made.RunIDs, 1)
		})
	}
}

func requireConflictLogged(t *testing.T, logs string, first, conflicting *ingest.Event) {
	t.Helper()
	line := logLine(t, logs, "conflicting redelivery")
	require.Contains(t, line, "level=WARN")
	require.Contains(t, line, "delivery=d1")
	require.Contains(t, line, "provider=github")
	require.Contains(t, line, "digest_recorded="+first.RawDigest())
	require.Contains(t, line, "digest="+conflicting.RawDigest())
}

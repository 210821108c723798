package status_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/github"
	"github.com/cikit/cikit/vcs/github/githubtest"
	"github.com/cikit/cikit/vcs/status"
)

// TestBurstAgainstGitHub: a burst of 1,000 status updates (50 jobs'
// checks, 20 updates each, over two seconds) through the GitHub provider to a server that
// admits 40 requests a second and answers 403 with Retry-After beyond. All
// of them are delivered: every check ends in the state reported last.
// Within its own rate the reporter is never refused; set faster than the
// server, it is refused, waits, and still delivers everything.
func TestBurstAgainstGitHub(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		rate         float64
		burst        int
		mayBeRefused bool
	}{
		// At most 10 + 25 requests in any second: under the limit.
		{"within the limit", 25, 10, false},
		{"faster than the limit", 80, 80, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := githubtest.NewServer(githubtest.Config{})
			srv.AddToken("token")
			require.NoError(t, srv.CreateRepo("acme/api", "main"))
			sha, err := srv.Commit("acme/api", "main", map[string]string{".cikit.yml": "jobs: {}"})
			require.NoError(t, err)
			srv.SetRateLimit(githubtest.RateLimit{Requests: 40, Window: time.Second, Kind: githubtest.Secondary})
			ts := httptest.NewServer(srv)
			defer ts.Close()
			p, err := github.New(github.Config{BaseURL: ts.URL + "/", Token: "token", HTTPClient: ts.Client()})
			require.NoError(t, err)

			r := start(t, status.Config{Provider: p, Rate: tc.rate, Burst: tc.burst, Workers: 4})
			const checks, updates = 50, 20
			want := map[string]vcs.State{}
			for u := range updates {
				// The updates come over two seconds, as jobs move.
				time.Sleep(100 * time.Millisecond)
				for c := range checks {
					ctx := fmt.Sprintf("cikit/.cikit.yml: job-%02d", c)
					st := vcs.StateRunning
					switch {
					case u == 0:
						st = vcs.StatePending
					case u == updates-1 && c%2 == 0:
						st = vcs.StateSuccess
					case u == updates-1:
						st = vcs.StateFailure
					}
					require.NoError(t, r.Report("acme/api", sha, vcs.Status{Context: ctx, State: st, Description: fmt.Sprintf("update %d", u)}))
					want[ctx] = st
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			require.NoError(t, r.Flush(ctx))

			got, err := srv.Statuses("acme/api", sha)
			require.NoError(t, err)
			require.Len(t, got, checks)
			for _, st := range got {
				want := map[vcs.State]string{vcs.StateSuccess: "success", vcs.StateFailure: "failure"}[want[st.Context]]
				require.Equal(t, want, st.State, st.Context)
				require.Equal(t, fmt.Sprintf("update %d", updates-1), st.Description, st.Context)
			}
			stats := srv.Stats()
			sent, dropped, pending := r.Stats()
			t.Logf("%s: 1,000 updates → %d statuses created (%d sent), %d requests refused for the rate limit, %d dropped",
				tc.name, stats.StatusesCreated, sent, stats.Limited, dropped)
			require.Zero(t, dropped)
			require.Zero(t, pending)
			require.Equal(t, sent, stats.StatusesCreated)
			require.LessOrEqual(t, stats.StatusesCreated, checks*updates, "coalesced, never more")
			if !tc.mayBeRefused {
				require.Zero(t, stats.Limited, "within its rate the reporter stays under the server's limit")
			}
			require.LessOrEqual(t, stats.Limited, stats.StatusesCreated, "refused, it waits rather than hammering")
		})
	}
}

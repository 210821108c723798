package fleet_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/internal/clocktest"
	"github.com/cikit/cikit/internal/s3test"
)

// serviceBlobs is the blob store of an artifacts.Service behind the
// runner protocol, and the client of its presigned requests.
type serviceBlobs struct {
	store  artifacts.Presigner
	client *http.Client
}

var serviceBlobStores = []struct {
	name  string
	setup func(t *testing.T, clk *clocktest.Clock) serviceBlobs
}{
	{"s3", func(t *testing.T, clk *clocktest.Clock) serviceBlobs {
		srv := s3test.NewWith(t, s3test.Options{Buckets: []string{"blobs"}, Now: clk.Now})
		cfg := srv.Config("blobs")
		s, err := artifacts.NewS3Store(t.Context(), cfg)
		require.NoError(t, err)
		return serviceBlobs{store: s, client: cfg.HTTPClient}
	}},
	{"file", func(t *testing.T, clk *clocktest.Clock) serviceBlobs {
		fs, err := artifacts.NewFileStore(filepath.Join(t.TempDir(), "blobs"))
		require.NoError(t, err)
		mux := http.NewServeMux()
		hs := httptest.NewServer(mux)
		t.Cleanup(hs.Close)
		s, err := artifacts.NewSignedFileStore(fs, bytes.Repeat([]byte("k"), artifacts.MinSigningKeyLen), hs.URL+"/v1/blobs")
		require.NoError(t, err)
		s.Now = clk.Now
		mux.Handle("/v1/blobs/", s.Handler())
		return serviceBlobs{store: s, client: hs.Client()}
	}},
}

// TestArtifactCallsWithService: the refusals of the platform's
// artifacts.Service reach the runner as 400, never 500, on either blob
// store: a tampered, short, never sent or expired upload, another job's
// completion or abort; a completion sent again is answered 200 with the
// same artifact.
func TestArtifactCallsWithService(t *testing.T) {
	t.Parallel()
	data := []byte("the archive")
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	other := []byte("another one")
	for _, bs := range serviceBlobStores {
		t.Run(bs.name, func(t *testing.T) {
			t.Parallel()
			clk := clocktest.New(time.Now())
			blobs := bs.setup(t, clk)
			svc, err := artifacts.NewService(artifacts.ServiceConfig{Blobs: blobs.store, Manifest: artifacts.NewMemoryManifest(),
				Index: artifacts.NewMemoryCacheIndex(), Now: clk.Now})
			require.NoError(t, err)
			b := setupWith(t, memoryStores, func(c *fleet.ServerConfig) { c.Artifacts = svc })
			runner := b.register(t)
			b.newRun(t, spec("build"), spec("test"))
			c := b.claim(t, runner, "5")
			thief := b.claim(t, runner, "5")

			create := func(t *testing.T) *artifacts.Upload {
				t.Helper()
				status, out := b.call(t, http.MethodPost, jobPath(c, "uploads"), c.Token, map[string]any{"name": "dist", "size": len(data), "sha256": digest})
				require.Equal(t, http.StatusCreated, status, "%v", out)
				raw, err := json.Marshal(out)
				require.NoError(t, err)
				var up artifacts.Upload
				require.NoError(t, json.Unmarshal(raw, &up))
				require.Len(t, up.Parts, 1)
				return &up
			}
			put := func(t *testing.T, up *artifacts.Upload, body []byte) int {
				t.Helper()
				p := up.Parts[0]
				req, err := http.NewRequestWithContext(t.Context(), p.Method, p.URL, bytes.NewReader(body))
				require.NoError(t, err)
				for k, v := range p.Header {
					req.Header[k] = v
				}
				resp, err := blobs.client.Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				_, _ = io.Copy(io.Discard, resp.Body)
				return resp.StatusCode
			}
			complete := func(t *testing.T, who *claimed, up *artifacts.Upload) (int, map[string]any) {
				t.Helper()
				return b.call(t, http.MethodPost, jobPath(who, "uploads/"+up.ID+"/complete"), who.Token, map[string]any{})
			}

			up := create(t)
			require.Equal(t, http.StatusOK, put(t, up, data))
			status, out := complete(t, thief, up)
			require.Equal(t, http.StatusBadRequest, status, "another job's completion: %v", out)
			require.Contains(t, out["error"], "another job attempt")
			status, out = b.call(t, http.MethodDelete, jobPath(thief, "uploads/"+up.ID), thief.Token, nil)
			require.Equal(t, http.StatusBadRequest, status, "another job's abort: %v", out)

			status, first := complete(t, c, up)
			require.Equal(t, http.StatusOK, status, "%v", first)
			require.Equal(t, up.ID, first["id"])
			status, again := complete(t, c, up)
			require.Equal(t, http.StatusOK, status, "a completion sent again: %v", again)
			require.Equal(t, first, again)
			status, out = complete(t, thief, up)
			require.Equal(t, http.StatusBadRequest, status, "another job's completion of a completed upload: %v", out)
			require.Contains(t, []int{http.StatusConflict, http.StatusPreconditionFailed}, put(t, up, data), "the request sent again")

			for _, tc := range []struct {
				name   string
				tamper func(t *testing.T, up *artifacts.Upload)
			}{
				{"never sent", func(*testing.T, *artifacts.Upload) {}},
				{"other bytes", func(t *testing.T, up *artifacts.Upload) {
					require.Equal(t, http.StatusBadRequest, put(t, up, other))
				}},
				{"short", func(t *testing.T, up *artifacts.Upload) {
					require.Equal(t, http.StatusBadRequest, put(t, up, data[1:]))
				}},
				// Last: the S3 SDK signs by the time of day, which the
				// servers' clock has passed since.
				{"expired", func(t *testing.T, up *artifacts.Upload) {
					require.Equal(t, http.StatusOK, put(t, up, data))
					clk.Advance(artifacts.DefaultUploadTTL)
				}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					up := create(t)
					tc.tamper(t, up)
					status, out := complete(t, c, up)
					require.Equal(t, http.StatusBadRequest, status, "%v", out)
					status, out = complete(t, c, up)
					require.Equal(t, http.StatusBadRequest, status, "again: %v", out)
				})
			}
		})
	}
}

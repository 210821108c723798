package image_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/fleet/image"
)

const (
	testUser     = "robot"
	testPassword = "s3cret-Pa55word-never-stored"
)

// privateRegistry is a registry that answers only requests carrying
// the test's basic-auth credentials.
func privateRegistry(t *testing.T) *testRegistry {
	t.Helper()
	tr := newRegistry(t)
	tr.setIntercept(func(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, bool) {
		if u, p, ok := r.BasicAuth(); ok && u == testUser && p == testPassword {
			return w, false
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required for the test registry"}]}`)
		return w, true
	})
	return tr
}

func writeDockerConfig(t *testing.T, auths string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"auths":{`+auths+`}}`), 0o600))
	return path
}

func TestPullCredentials(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tr := privateRegistry(t)
	img := randomImage(t, 1024, 1)
	ref := tr.push(t, "private/app:1", img, remote.WithAuth(&authn.Basic{Username: testUser, Password: testPassword}))

	t.Run("none", func(t *testing.T) {
		t.Parallel()
		_, err := newPuller(t, image.Config{}).Pull(ctx, ref, image.PullOptions{})
		require.ErrorIs(t, err, image.ErrConfig)
		require.ErrorContains(t, err, "authentication required for the test registry")
	})
	t.Run("denied", func(t *testing.T) {
		t.Parallel()
		_, err := newPuller(t, image.Config{}).Pull(ctx, ref, image.PullOptions{Auth: &authn.Basic{Username: testUser, Password: "wrong"}})
		require.ErrorIs(t, err, image.ErrConfig)
		require.ErrorContains(t, err, "UNAUTHORIZED")
	})
	t.Run("docker config", func(t *testing.T) {
		t.Parallel()
		auth := base64.StdEncoding.EncodeToString([]byte(testUser + ":" + testPassword))
		cfg := writeDockerConfig(t, fmt.Sprintf(`"http://%s/v2/":{"auth":%q},"index.docker.io":{"username":"x","password":"y"}`, tr.host, auth))
		pulled, err := newPuller(t, image.Config{DockerConfig: cfg}).Pull(ctx, ref, image.PullOptions{})
		require.NoError(t, err)
		defer pulled.Release()
		require.Equal(t, digestOf(t, img), pulled.Digest)
	})
	t.Run("job credentials", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		var logs bytes.Buffer
		p := newPuller(t, image.Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		pulled, err := p.Pull(ctx, ref, image.PullOptions{Policy: image.PullIfNotPresent, Auth: &authn.Basic{Username: testUser, Password: testPassword}})
		require.NoError(t, err)
		pulled.Release()
		require.Equal(t, digestOf(t, img), pulled.Digest)
		require.Contains(t, logs.String(), "image pulled")
		require.NotContains(t, logs.String(), testPassword)

		secrets := [][]byte{[]byte(testPassword), []byte(base64.StdEncoding.EncodeToString([]byte(testUser + ":" + testPassword)))}
		require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			for _, s := range secrets {
				require.False(t, bytes.Contains(b, s), "%s holds the job's credentials", path)
			}
			return nil
		}))

		// The credentials were for that pull only; the cached image
		// stays usable without them.
		again, err := p.Pull(ctx, ref, image.PullOptions{Policy: image.PullIfNotPresent})
		require.NoError(t, err)
		again.Release()
		_, err = p.Pull(ctx, ref, image.PullOptions{Policy: image.PullAlways})
		require.ErrorIs(t, err, image.ErrConfig)
	})
}

func TestJobCredentialsAreNotSentToMirrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	origin := privateRegistry(t)
	mirror := newRegistry(t)
	img := randomImage(t, 512, 1)
	ref := origin.push(t, "private/app:1", img, remote.WithAuth(&authn.Basic{Username: testUser, Password: testPassword}))
	mirror.push(t, "private/app:1", img)
	var sawAuth atomic.Bool
	mirror.setIntercept(func(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, bool) {
		if r.Header.Get("Authorization") != "" {
			sawAuth.Store(true)
		}
		return w, false
	})
	p := newPuller(t, image.Config{Mirrors: map[string][]string{origin.host: {mirror.host}}})
	pulled, err := p.Pull(ctx, ref, image.PullOptions{Auth: &authn.Basic{Username: testUser, Password: testPassword}})
	require.NoError(t, err)
	pulled.Release()
	require.Positive(t, mirror.count("/blobs/"))
	require.False(t, sawAuth.Load())
}

func TestDockerConfigRefusesCredentialHelpers(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"credsStore":"desktop"}`), 0o600))
	_, err := image.New(image.Config{Dir: t.TempDir(), DockerConfig: path})
	require.ErrorContains(t, err, "credential helpers, which are not supported")

	_, err = image.New(image.Config{Dir: t.TempDir(), DockerConfig: writeDockerConfig(t, `"r.example":{"auth":"!!"}`)})
	require.ErrorContains(t, err, "not base64")
}

package runtime_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/runtime"
)

func TestRenderCache(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "go.sum"), []byte("sum\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "web"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "web", "package-lock.json"), []byte("{}\n"), 0o644))
	sum, err := runtime.HashFiles(ws, []string{"go.sum"})
	require.NoError(t, err)
	require.Len(t, sum, 64)
	both, err := runtime.HashFiles(ws, []string{"go.sum", "**/package-lock.json"})
	require.NoError(t, err)
	env := map[string]string{"CI_COMMIT_REF_SLUG": "main", "POLICY": "pull", "CACHE_FALLBACK_KEY": "global"}
	for _, tt := range []struct {
		name    string
		format  string
		cache   cikit.Cache
		want    runtime.CacheKeys
		wantErr string
	}{
		{name: "native hash", format: "native",
			cache: cikit.Cache{Key: `deps-{{ hash("go.sum") }}`, RestoreKeys: []string{"deps-"}},
			want:  runtime.CacheKeys{Key: "deps-" + sum, RestoreKeys: []string{"deps-"}, Policy: "pull-push", When: "on_success"}},
		{name: "native hash of two globs", format: "native",
			cache: cikit.Cache{Key: `{{hash("go.sum", "**/package-lock.json")}}`, Policy: "pull", When: "always"},
			want:  runtime.CacheKeys{Key: both, Policy: "pull", When: "always"}},
		{name: "native without key", format: "native",
			want: runtime.CacheKeys{Key: "default", Policy: "pull-push", When: "on_success"}},
		{name: "native unknown placeholder", format: "native", cache: cikit.Cache{Key: "{{ matrix.os }}"},
			wantErr: "matrix.os"},
		{name: "native unterminated", format: "native", cache: cikit.Cache{Key: `{{ hash("go.sum")`},
			wantErr: "unterminated"},
		{name: "gitlab variables", format: "gitlab",
			cache: cikit.Cache{Key: "$CI_COMMIT_REF_SLUG-deps", FallbackKeys: []string{"${CI_COMMIT_REF_SLUG}-old", "$NOPE"}, Policy: "$POLICY"},
			want:  runtime.CacheKeys{Key: "main-deps", FallbackKeys: []string{"main-old", "global"}, Policy: "pull", When: "on_success"}},
		{name: "gitlab key files with prefix", format: "gitlab",
			cache: cikit.Cache{KeyFiles: []string{"go.sum"}, KeyPrefix: "$CI_COMMIT_REF_SLUG"},
			want:  runtime.CacheKeys{Key: "main-" + sum, FallbackKeys: []string{"global"}, Policy: "pull-push", When: "on_success"}},
		{name: "gitlab key files without prefix", format: "gitlab",
			cache: cikit.Cache{KeyFiles: []string{"go.sum"}, When: "on_failure"},
			want:  runtime.CacheKeys{Key: sum, FallbackKeys: []string{"global"}, Policy: "pull-push", When: "on_failure"}},
		{name: "gitlab key files missing", format: "gitlab",
			cache: cikit.Cache{KeyFiles: []string{"Gemfile.lock"}, KeyPrefix: "gems"},
			want:  runtime.CacheKeys{Key: "gems-default", FallbackKeys: []string{"global"}, Policy: "pull-push", When: "on_success"}},
		{name: "gitlab empty once expanded", format: "gitlab", cache: cikit.Cache{Key: "$NOPE"}, wantErr: "empty once rendered"},
		{name: "a slash", format: "gitlab", cache: cikit.Cache{Key: "a/b"}, wantErr: `must not hold "/"`},
		{name: "too long", format: "native", cache: cikit.Cache{Key: strings.Repeat("k", 513)}, wantErr: "513 bytes"},
		{name: "bad policy", format: "native", cache: cikit.Cache{Key: "k", Policy: "pushy"}, wantErr: `cache policy "pushy"`},
		{name: "bad when", format: "native", cache: cikit.Cache{Key: "k", When: "never"}, wantErr: `cache when "never"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := runtime.RenderCache(tt.format, tt.cache, ws, env)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("RenderCache (-want +got):\n%s", d)
			}
		})
	}
}

func TestCacheKeysPolicy(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		policy       string
		pulls, pushs bool
	}{{"pull-push", true, true}, {"pull", true, false}, {"push", false, true}} {
		k := runtime.CacheKeys{Policy: tt.policy}
		require.Equal(t, tt.pulls, k.Pulls(), tt.policy)
		require.Equal(t, tt.pushs, k.Pushes(), tt.policy)
	}
}

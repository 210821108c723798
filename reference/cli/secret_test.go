package cli

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/reference/api"
	"github.com/cikit/cikit/reference/auth"
	"github.com/cikit/cikit/secrets"
)

// testAccess is the auth.Service of the test servers, and
// testAdminToken the secret of its bootstrap admin's token.
var testAccess, testAdminToken = newTestAccess()

func newTestAccess() (*auth.Service, string) {
	s, err := auth.New(auth.Config{Store: auth.NewMemoryStore(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	token, _, err := s.Bootstrap(context.Background())
	if err != nil {
		panic(err)
	}
	return s, token
}

// secretServer serves a real API with a memory secret store.
func secretServer(t *testing.T) (*httptest.Server, *secrets.MemoryStore) {
	t.Helper()
	kr, err := secrets.NewKeyring(secrets.Key{ID: "k1", Secret: bytes.Repeat([]byte{3}, secrets.KeyBytes)})
	require.NoError(t, err)
	store := secrets.NewMemoryStore(kr)
	a, err := api.New(api.Config{Runs: dag.NewMemoryStore(dag.MemoryConfig{}), Secrets: store, Access: testAccess,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return srv, store
}

type secretResult struct {
	code           int
	stdout, stderr string
}

func secretRun(t *testing.T, stdin string, args ...string) secretResult {
	t.Helper()
	var out, errOut bytes.Buffer
	code := MainIO(t.Context(), append([]string{"secret"}, args...), strings.NewReader(stdin), &out, &errOut)
	return secretResult{code, out.String(), errOut.String()}
}

func fetchValue(t *testing.T, store secrets.Store, scope secrets.Scope, name string) (string, bool) {
	t.Helper()
	got, err := store.Fetch(context.Background(), secrets.Request{Scopes: []secrets.Scope{scope}, Names: []string{name}})
	require.NoError(t, err)
	if len(got) == 0 {
		return "", false
	}
	return got[0].Value, true
}

func TestSecretSetListDelete(t *testing.T) {
	t.Parallel()
	srv, store := secretServer(t)
	conn := []string{"-server", srv.URL, "-token", testAdminToken}
	repo := secrets.RepoScope("acme/api")

	r := secretRun(t, "s3cr3t-value\n", append(append([]string{"set"}, conn...), "-scope", "repo:acme/api", "DEPLOY_TOKEN")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "set DEPLOY_TOKEN in repo:acme/api")
	require.NotContains(t, r.stdout+r.stderr, "s3cr3t-value")
	v, ok := fetchValue(t, store, repo, "DEPLOY_TOKEN")
	require.True(t, ok)
	require.Equal(t, "s3cr3t-value", v, "one trailing newline is trimmed")

	r = secretRun(t, "line one\nline two\n\n", append(append([]string{"set"}, conn...), "-scope", "repo:acme/api", "MULTI")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	v, _ = fetchValue(t, store, repo, "MULTI")
	require.Equal(t, "line one\nline two\n", v, "only one newline is trimmed")

	r = secretRun(t, "windows-value\r\n", append(append([]string{"set"}, conn...), "-scope", "repo:acme/api", "CRLF")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	v, _ = fetchValue(t, store, repo, "CRLF")
	require.Equal(t, "windows-value", v)

	file := filepath.Join(t.TempDir(), "key.pem")
	require.NoError(t, os.WriteFile(file, []byte("-----BEGIN KEY-----\nabc\n-----END KEY-----\n"), 0o600))
	r = secretRun(t, "ignored", append(append([]string{"set"}, conn...), "-scope", "org:acme", "-value-file", file, "SIGNING_KEY")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	v, _ = fetchValue(t, store, secrets.OrgScope("acme"), "SIGNING_KEY")
	require.Equal(t, "-----BEGIN KEY-----\nabc\n-----END KEY-----", v)

	r = secretRun(t, "", append(append([]string{"list"}, conn...), "-scope", "repo:acme/api")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 4, r.stdout)
	require.Regexp(t, `^NAME\s+SCOPE\s+UPDATED$`, lines[0])
	require.Regexp(t, `^CRLF\s+repo:acme/api\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`, lines[1])
	require.Regexp(t, `^DEPLOY_TOKEN\s+repo:acme/api\s+`, lines[2])
	require.Regexp(t, `^MULTI\s+`, lines[3])
	require.NotContains(t, r.stdout, "s3cr3t")

	r = secretRun(t, "", append(append([]string{"delete"}, conn...), "-scope", "repo:acme/api", "DEPLOY_TOKEN")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	_, ok = fetchValue(t, store, repo, "DEPLOY_TOKEN")
	require.False(t, ok)
	r = secretRun(t, "", append(append([]string{"delete"}, conn...), "-scope", "repo:acme/api", "DEPLOY_TOKEN")...)
	require.Equal(t, ExitFailed, r.code)
	require.Contains(t, r.stderr, "404 Not Found: secrets: not found: no secret DEPLOY_TOKEN in repo:acme/api")

	r = secretRun(t, "", append(append([]string{"list"}, conn...), "-scope", "env:acme/api:prod")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, "NAME  SCOPE  UPDATED\n", r.stdout)
	require.Contains(t, r.stderr, "no secrets in env:acme/api:prod")
}

func TestSecretErrors(t *testing.T) {
	t.Parallel()
	srv, store := secretServer(t)
	conn := []string{"-server", srv.URL, "-token", testAdminToken}
	set := func(stdin string, args ...string) secretResult {
		return secretRun(t, stdin, append(append([]string{"set"}, conn...), args...)...)
	}
	for name, c := range map[string]struct {
		r    secretResult
		code int
		msg  string
	}{
		"no command":       {secretRun(t, ""), ExitInvalid, "Usage: cikit secret"},
		"unknown command":  {secretRun(t, "", "get"), ExitInvalid, `unknown command "get"`},
		"no scope":         {set("value-1", "X"), ExitInvalid, "-scope is required"},
		"bad scope":        {set("value-1", "-scope", "repo:api", "X"), ExitInvalid, "repo:OWNER/NAME"},
		"no name":          {set("value-1", "-scope", "org:acme"), ExitInvalid, "takes one secret NAME"},
		"value in argv":    {set("", "-scope", "org:acme", "X", "the-value"), ExitInvalid, "never from the command line"},
		"flag after name":  {set("value-1", "X", "-scope", "org:acme"), ExitInvalid, "flags go before"},
		"bad name":         {set("value-1", "-scope", "org:acme", "BAD-NAME"), ExitInvalid, "letters, digits and _"},
		"too short":        {set("abc\n", "-scope", "org:acme", "X"), ExitInvalid, "could not be masked"},
		"empty":            {set("", "-scope", "org:acme", "X"), ExitInvalid, "could not be masked"},
		"too large":        {set(strings.Repeat("v", secrets.MaxValueBytes+1), "-scope", "org:acme", "X"), ExitInvalid, "over 65536 bytes"},
		"NUL":              {set("a\x00bcdef", "-scope", "org:acme", "X"), ExitInvalid, "NUL"},
		"missing file":     {set("", "-scope", "org:acme", "-value-file", "/nonexistent/file", "X"), ExitInvalid, "-value-file"},
		"list with a name": {secretRun(t, "", append(append([]string{"list"}, conn...), "-scope", "org:acme", "X")...), ExitInvalid, "takes no argument"},
		"bad server": {secretRun(t, "", "list", "-server", "ftp://host", "-token", testAdminToken, "-scope", "org:acme"),
			ExitInvalid, "not a base URL"},
		"wrong token": {secretRun(t, "value-1", "set", "-server", srv.URL, "-token", "not-an-admin-token", "-scope", "org:acme", "X"),
			ExitFailed, "401 Unauthorized: auth: not authenticated: the bearer token is not a cikit token"},
		"help": {secretRun(t, "", "set", "-h"), ExitOK, "-value-file"},
	} {
		require.Equal(t, c.code, c.r.code, "%s: %s", name, c.r.stderr)
		require.Contains(t, c.r.stderr, c.msg, name)
		require.NotContains(t, c.r.stderr, "the-value", name)
	}
	list, err := store.List(t.Context(), secrets.OrgScope("acme"))
	require.NoError(t, err)
	require.Empty(t, list, "nothing was set")
}

func TestSecretServerDown(t *testing.T) {
	t.Parallel()
	srv, _ := secretServer(t)
	url := srv.URL
	srv.Close()
	r := secretRun(t, "", "list", "-server", url, "-token", testAdminToken, "-scope", "org:acme")
	require.Equal(t, ExitFailed, r.code)
	require.Contains(t, r.stderr, "the server did not answer")
	require.NotContains(t, r.stderr, testAdminToken)
}

func TestSecretNotConfigured(t *testing.T) {
	t.Parallel()
	a, err := api.New(api.Config{Runs: dag.NewMemoryStore(dag.MemoryConfig{}), Access: testAccess, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	r := secretRun(t, "", "list", "-server", srv.URL, "-token", testAdminToken, "-scope", "org:acme")
	require.Equal(t, ExitFailed, r.code)
	require.Contains(t, r.stderr, "404 Not Found: secrets are not configured")
}

// TestSecretEnvironment: the server and the token come from the
// environment when no flag gives them.
func TestSecretEnvironment(t *testing.T) {
	srv, store := secretServer(t)
	t.Setenv(ServerEnv, srv.URL)
	t.Setenv(TokenEnv, testAdminToken)
	r := secretRun(t, "from-the-env\n", "set", "-scope", "org:acme", "ENV_SET")
	require.Equal(t, ExitOK, r.code, r.stderr)
	v, _ := fetchValue(t, store, secrets.OrgScope("acme"), "ENV_SET")
	require.Equal(t, "from-the-env", v)
	t.Setenv(TokenEnv, "")
	r = secretRun(t, "", "list", "-scope", "org:acme")
	require.Equal(t, ExitInvalid, r.code)
	require.Contains(t, r.stderr, "an admin token is required: set $CIKIT_TOKEN")
}

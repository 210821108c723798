package api_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/reference/api"
	"github.com/cikit/cikit/secrets"
)

func secretStore(t *testing.T) *secrets.MemoryStore {
	t.Helper()
	kr, err := secrets.NewKeyring(secrets.Key{ID: "k1", Secret: bytes.Repeat([]byte{7}, secrets.KeyBytes)})
	require.NoError(t, err)
	return secrets.NewMemoryStore(kr)
}

// call sends a request with the bearer token (none when empty) and body.
func call(t *testing.T, h http.Handler, method, target, token, body string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, target, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestSecretsNotConfigured(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Config{})
	adminToken := f.admin
	for _, m := range []string{"GET /api/v1/secrets?scope=repo:acme/api", "PUT /api/v1/secrets/TOKEN?scope=repo:acme/api", "DELETE /api/v1/secrets/TOKEN?scope=repo:acme/api"} {
		method, target, _ := strings.Cut(m, " ")
		requireError(t, call(t, f.api, method, target, adminToken, `{"value":"abcdef"}`), http.StatusNotFound, "secrets are not configured")
	}
}

func TestSecretsSetListDelete(t *testing.T) {
	t.Parallel()
	store := secretStore(t)
	f := newFixture(t, api.Config{Secrets: store})
	adminToken := f.admin
	list := func(scope string) api.SecretList {
		return decode[api.SecretList](t, call(t, f.api, "GET", "/api/v1/secrets?scope="+scope, adminToken, ""), http.StatusOK)
	}
	require.Equal(t, api.SecretList{Secrets: []api.SecretInfo{}}, list("repo:acme/api"))
	require.Contains(t, call(t, f.api, "GET", "/api/v1/secrets?scope=repo:acme/api", adminToken, "").Body.String(), `"secrets":[]`)

	for _, name := range []string{"TOKEN", "DEPLOY_KEY"} {
		rec := call(t, f.api, "PUT", "/api/v1/secrets/"+name+"?scope=repo:acme/api", adminToken, `{"value":"value-of-`+name+`"}`, "Content-Type", "application/json")
		require.Equal(t, http.StatusNoContent, rec.Code, rec.Body.String())
		require.Empty(t, rec.Body.String())
	}
	rec := call(t, f.api, "PUT", "/api/v1/secrets/TOKEN?scope=env:acme/api:prod", adminToken, `{"value":"prod-token"}`, "Content-Type", "application/json; charset=utf-8")
	require.Equal(t, http.StatusNoContent, rec.Code, rec.Body.String())
	rec = call(t, f.api, "PUT", "/api/v1/secrets/TOKEN?scope=repo:acme/api", adminToken, `{"value":"replaced-token"}`)
	require.Equal(t, http.StatusNoContent, rec.Code, "no Content-Type is JSON")

	got := list("repo:acme/api")
	require.Len(t, got.Secrets, 2)
	require.Equal(t, "DEPLOY_KEY", got.Secrets[0].Name, "by name")
	require.Equal(t, "TOKEN", got.Secrets[1].Name)
	require.Equal(t, "repo:acme/api", got.Secrets[0].Scope)
	require.False(t, got.Secrets[0].UpdatedAt.IsZero())
	body := call(t, f.api, "GET", "/api/v1/secrets?scope=repo:acme/api", adminToken, "").Body.String()
	require.NotContains(t, body, "value-of")
	require.NotContains(t, body, "replaced-token")
	require.Len(t, list("env:acme/api:prod").Secrets, 1)

	s, err := store.Fetch(t.Context(), secrets.Request{Scopes: []secrets.Scope{secrets.RepoScope("acme/api")}, Names: []string{"TOKEN"}})
	require.NoError(t, err)
	require.Equal(t, "replaced-token", s[0].Value)

	rec = call(t, f.api, "DELETE", "/api/v1/secrets/TOKEN?scope=repo:acme/api", adminToken, "")
	require.Equal(t, http.StatusNoContent, rec.Code, rec.Body.String())
	requireError(t, call(t, f.api, "DELETE", "/api/v1/secrets/TOKEN?scope=repo:acme/api", adminToken, ""), http.StatusNotFound, "no secret TOKEN in repo:acme/api")
	require.Len(t, list("repo:acme/api").Secrets, 1)
	require.Len(t, list("env:acme/api:prod").Secrets, 1, "delete is per scope")

	rec = call(t, f.api, "POST", "/api/v1/secrets/TOKEN?scope=repo:acme/api", adminToken, "")
	requireError(t, rec, http.StatusMethodNotAllowed, "use PUT, DELETE")
	require.Equal(t, "PUT, DELETE", rec.Header().Get("Allow"))
	requireError(t, call(t, f.api, "POST", "/api/v1/secrets?scope=repo:acme/api", adminToken, ""), http.StatusMethodNotAllowed, "use GET")
}

func TestSecretsBadInput(t *testing.T) {
	t.Parallel()
	store := secretStore(t)
	f := newFixture(t, api.Config{Secrets: store})
	adminToken := f.admin
	const value = "the-value-abc"
	put := func(target, body string, header ...string) *httptest.ResponseRecorder {
		return call(t, f.api, "PUT", target, adminToken, body, header...)
	}
	type field struct {
		Error string `json:"error"`
		Field string `json:"field"`
	}
	for name, c := range map[string]struct {
		rec    *httptest.ResponseRecorder
		status int
		field  string
		msg    string
	}{
		"no scope":         {call(t, f.api, "GET", "/api/v1/secrets", adminToken, ""), 400, "scope", "scope is required"},
		"empty scope":      {call(t, f.api, "GET", "/api/v1/secrets?scope=", adminToken, ""), 400, "scope", "scope is required"},
		"bad scope":        {call(t, f.api, "GET", "/api/v1/secrets?scope=team:x", adminToken, ""), 400, "scope", "the kind is org, repo or env"},
		"repo no owner":    {call(t, f.api, "GET", "/api/v1/secrets?scope=repo:api", adminToken, ""), 400, "scope", "repo:OWNER/NAME"},
		"unknown param":    {call(t, f.api, "GET", "/api/v1/secrets?scope=repo:acme/api&scop=x", adminToken, ""), 400, "scop", `did you mean "scope"`},
		"scope twice":      {call(t, f.api, "GET", "/api/v1/secrets?scope=repo:acme/api&scope=org:acme", adminToken, ""), 400, "scope", "given 2 times"},
		"put no scope":     {put("/api/v1/secrets/X", `{"value":"`+value+`"}`), 400, "scope", "scope is required"},
		"bad name":         {put("/api/v1/secrets/BAD-NAME?scope=repo:acme/api", `{"value":"`+value+`"}`), 400, "name", "letters, digits and _"},
		"platform's name":  {put("/api/v1/secrets/CIKIT_TOKEN?scope=repo:acme/api", `{"value":"`+value+`"}`), 400, "name", "the platform's"},
		"NUL in name":      {put("/api/v1/secrets/A%00B?scope=repo:acme/api", `{"value":"`+value+`"}`), 400, "name", "letters, digits and _"},
		"delete bad name":  {call(t, f.api, "DELETE", "/api/v1/secrets/1X?scope=repo:acme/api", adminToken, ""), 400, "name", "not starting with a digit"},
		"not JSON":         {put("/api/v1/secrets/X?scope=repo:acme/api", value), 400, "", "not a JSON object"},
		"unknown member":   {put("/api/v1/secrets/X?scope=repo:acme/api", `{"value":"`+value+`","valu":"`+value+`"}`), 400, "", "not a JSON object"},
		"trailing data":    {put("/api/v1/secrets/X?scope=repo:acme/api", `{"value":"`+value+`"} {"value":"`+value+`"}`), 400, "", "and nothing else"},
		"value not string": {put("/api/v1/secrets/X?scope=repo:acme/api", `{"value":12345}`), 400, "", "not a JSON object"},
		"no value":         {put("/api/v1/secrets/X?scope=repo:acme/api", `{}`), 400, "value", "has no value"},
		"too short":        {put("/api/v1/secrets/X?scope=repo:acme/api", `{"value":"abc"}`), 400, "value", "could not be masked"},
		"NUL in value":     {put("/api/v1/secrets/X?scope=repo:acme/api", `{"value":"`+value+`\u0000"}`), 400, "value", "NUL"},
		"value too large":  {put("/api/v1/secrets/X?scope=repo:acme/api", `{"value":"`+strings.Repeat("v", secrets.MaxValueBytes+1)+`"}`), 413, "value", "at most 65536"},
		"body too large":   {put("/api/v1/secrets/X?scope=repo:acme/api", `{"value":"`+strings.Repeat(`\u0041`, api.MaxSecretBodyBytes/6+1)+`"}`), 413, "value", "the body is over"},
		"not JSON type":    {put("/api/v1/secrets/X?scope=repo:acme/api", `{"value":"`+value+`"}`, "Content-Type", "text/plain"), 415, "Content-Type", "application/json"},
	} {
		require.Equal(t, c.status, c.rec.Code, "%s: %s", name, c.rec.Body)
		got := decode[field](t, c.rec, c.status)
		require.Contains(t, got.Error, c.msg, name)
		require.Equal(t, c.field, got.Field, name)
		require.NotContains(t, c.rec.Body.String(), value, "%s: the value is never in an answer", name)
	}
	// A value of the largest size, every byte escaped, fits in the body.
	rec := put("/api/v1/secrets/LARGEST?scope=repo:acme/api", `{"value":"`+strings.Repeat(`\u0041`, secrets.MaxValueBytes)+`"}`)
	require.Equal(t, http.StatusNoContent, rec.Code, rec.Body.String())
	infos, err := store.List(t.Context(), secrets.RepoScope("acme/api"))
	require.NoError(t, err)
	require.Len(t, infos, 1, "only the valid Set stored anything")
}

// brokenSecrets fails as its err says.
type brokenSecrets struct {
	*secrets.MemoryStore
	mu  sync.Mutex
	err error
}

func (s *brokenSecrets) fail() error { s.mu.Lock(); defer s.mu.Unlock(); return s.err }

func (s *brokenSecrets) Set(context.Context, secrets.Scope, string, string) error { return s.fail() }
func (s *brokenSecrets) List(context.Context, secrets.Scope) ([]secrets.Info, error) {
	return nil, s.fail()
}
func (s *brokenSecrets) Delete(context.Context, secrets.Scope, string) error { return s.fail() }

func TestSecretsStoreFailure(t *testing.T) {
	t.Parallel()
	var logged bytes.Buffer
	var logMu sync.Mutex
	store := &brokenSecrets{MemoryStore: secretStore(t), err: errors.New("connection refused")}
	access, adminToken := newAccess(t)
	a, err := api.New(api.Config{Runs: dag.NewMemoryStore(dag.MemoryConfig{}), Secrets: store, Access: access,
		Logger: slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logged}, nil))})
	require.NoError(t, err)
	const value = "never-logged-value"
	for _, c := range [][2]string{{"GET", "/api/v1/secrets?scope=repo:acme/api"}, {"PUT", "/api/v1/secrets/X?scope=repo:acme/api"}, {"DELETE", "/api/v1/secrets/X?scope=repo:acme/api"}} {
		rec := call(t, a, c[0], c[1], adminToken, `{"value":"`+value+`"}`)
		requireError(t, rec, http.StatusServiceUnavailable, "failed; try again")
		require.Equal(t, "5", rec.Header().Get("Retry-After"))
		require.NotContains(t, rec.Body.String(), "connection refused", "the store's error is logged, not answered")
	}
	logMu.Lock()
	require.Contains(t, logged.String(), "connection refused")
	require.NotContains(t, logged.String(), value)
	logMu.Unlock()

	// A permanent error of the store is the caller's: never a 503.
	store.mu.Lock()
	store.err = fmt.Errorf("%w: the scope is too deep for this store", secrets.ErrInvalid)
	store.mu.Unlock()
	requireError(t, call(t, a, "PUT", "/api/v1/secrets/X?scope=repo:acme/api", adminToken, `{"value":"`+value+`"}`), http.StatusBadRequest, "too deep")
	store.mu.Lock()
	store.err = fmt.Errorf("%w: no secret X", secrets.ErrNotFound)
	store.mu.Unlock()
	requireError(t, call(t, a, "DELETE", "/api/v1/secrets/X?scope=repo:acme/api", adminToken, ""), http.StatusNotFound, "no secret X")
}

func TestSecretsLogNoValues(t *testing.T) {
	t.Parallel()
	var logged bytes.Buffer
	var logMu sync.Mutex
	access, adminToken := newAccess(t)
	a, err := api.New(api.Config{Runs: dag.NewMemoryStore(dag.MemoryConfig{}), Secrets: secretStore(t), Access: access,
		Logger: slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logged}, nil))})
	require.NoError(t, err)
	const value = "never-logged-value"
	require.Equal(t, http.StatusNoContent, call(t, a, "PUT", "/api/v1/secrets/AUDITED?scope=org:acme", adminToken, `{"value":"`+value+`"}`).Code)
	require.Equal(t, http.StatusNoContent, call(t, a, "DELETE", "/api/v1/secrets/AUDITED?scope=org:acme", adminToken, "").Code)
	logMu.Lock()
	defer logMu.Unlock()
	require.Contains(t, logged.String(), "secret set")
	require.Contains(t, logged.String(), "AUDITED")
	require.Contains(t, logged.String(), "secret deleted")
	require.NotContains(t, logged.String(), value)
	require.NotContains(t, logged.String(), adminToken)
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

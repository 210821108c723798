package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"time"

	"github.com/cikit/cikit/secrets"
)

// MaxSecretBodyBytes bounds the body of PUT /api/v1/secrets/{name}: a
// value of secrets.MaxValueBytes with every byte escaped in JSON
// (\u00XX, six bytes), and room for the object around it.
const MaxSecretBodyBytes = 6*secrets.MaxValueBytes + 1024

// SecretInfo is a secret as GET /api/v1/secrets lists it: never its
// value.
type SecretInfo struct {
	Name  string `json:"name"`
	Scope string `json:"scope"`
	// UpdatedAt is when its value was last set.
	UpdatedAt time.Time `json:"updated_at"`
}

// SecretList is the answer of GET /api/v1/secrets.
type SecretList struct {
	// Secrets are by name.
	Secrets []SecretInfo `json:"secrets"`
}

// SecretValue is the body of PUT /api/v1/secrets/{name}.
type SecretValue struct {
	Value string `json:"value"`
}

// secretsOn answers 404 when the API has no secret store and 400 for a
// bad scope; else it returns the scope of the request. Its route's rule
// has checked that the caller is an admin of the scope.
func (a *API) secretsOn(w http.ResponseWriter, r *http.Request) (secrets.Scope, bool) {
	if a.secrets == nil {
		writeError(w, http.StatusNotFound, "secrets are not configured: the platform has no secret store")
		return secrets.Scope{}, false
	}
	q, ok := queryParams(w, r, "scope")
	if !ok {
		return secrets.Scope{}, false
	}
	s, present := q["scope"]
	if !present || s == "" {
		writeFieldError(w, http.StatusBadRequest, "scope", "the query parameter scope is required: org:NAME, repo:OWNER/NAME or env:OWNER/NAME:ENVIRONMENT")
		return secrets.Scope{}, false
	}
	scope, err := secrets.ParseScope(s)
	if err != nil {
		writeFieldError(w, http.StatusBadRequest, "scope", err.Error())
		return secrets.Scope{}, false
	}
	return scope, true
}

// secretName returns the {name} of the path, or answers 400.
func secretName(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("name")
	if err := secrets.ValidName(name); err != nil || !validText(name) {
		msg := fmt.Sprintf("the secret name %q is not UTF-8 without NUL bytes", name)
		if err != nil {
			msg = err.Error()
		}
		writeFieldError(w, http.StatusBadRequest, "name", msg)
		return "", false
	}
	return name, true
}

func (a *API) listSecrets(w http.ResponseWriter, r *http.Request) {
	scope, ok := a.secretsOn(w, r)
	if !ok {
		return
	}
	infos, err := a.secrets.List(r.Context(), scope)
	if err != nil {
		a.secretFail(w, r, "listing the secrets", err)
		return
	}
	out := SecretList{Secrets: make([]SecretInfo, 0, len(infos))}
	for _, i := range infos {
		out.Secrets = append(out.Secrets, SecretInfo{Name: i.Name, Scope: i.Scope.String(), UpdatedAt: i.Updated.UTC()})
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) setSecret(w http.ResponseWriter, r *http.Request) {
	scope, ok := a.secretsOn(w, r)
	if !ok {
		return
	}
	name, ok := secretName(w, r)
	if !ok {
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			writeFieldError(w, http.StatusUnsupportedMediaType, "Content-Type", fmt.Sprintf("the body is JSON: send Content-Type: application/json, not %q", ct))
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxSecretBodyBytes))
	if err != nil {
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			writeFieldError(w, http.StatusRequestEntityTooLarge, "value", fmt.Sprintf("the body is over %d bytes; a secret's value has at most %d", MaxSecretBodyBytes, secrets.MaxValueBytes))
			return
		}
		if r.Context().Err() == nil {
			writeError(w, http.StatusBadRequest, "reading the body failed: "+err.Error())
		}
		return
	}
	var in struct {
		Value *string `json:"value"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || dec.More() {
		// The decoder's message may quote the body, and so the value.
		writeError(w, http.StatusBadRequest, `the body is not a JSON object {"value": "<the secret>"} and nothing else`)
		return
	}
	switch {
	case in.Value == nil:
		writeFieldError(w, http.StatusBadRequest, "value", `the body has no value: send {"value": "<the secret>"}`)
		return
	case len(*in.Value) > secrets.MaxValueBytes:
		writeFieldError(w, http.StatusRequestEntityTooLarge, "value", fmt.Sprintf("the value has %d bytes; a secret's value has at most %d", len(*in.Value), secrets.MaxValueBytes))
		return
	}
	if err := secrets.ValidValue(*in.Value); err != nil {
		writeFieldError(w, http.StatusBadRequest, "value", err.Error())
		return
	}
	if err := a.secrets.Set(r.Context(), scope, name, *in.Value); err != nil {
		a.secretFail(w, r, "storing the secret", err)
		return
	}
	a.log.LogAttrs(r.Context(), slog.LevelInfo, "api: secret set", slog.String("scope", scope.String()), slog.String("name", name))
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) deleteSecret(w http.ResponseWriter, r *http.Request) {
	scope, ok := a.secretsOn(w, r)
	if !ok {
		return
	}
	name, ok := secretName(w, r)
	if !ok {
		return
	}
	if err := a.secrets.Delete(r.Context(), scope, name); err != nil {
		a.secretFail(w, r, "deleting the secret", err)
		return
	}
	a.log.LogAttrs(r.Context(), slog.LevelInfo, "api: secret deleted", slog.String("scope", scope.String()), slog.String("name", name))
	w.WriteHeader(http.StatusNoContent)
}

// secretFail answers an error of the secret store: 404 for a secret
// that is not there, 400 for input it refuses, 503 for a failure, which
// is logged. The store's errors hold no value.
func (a *API) secretFail(w http.ResponseWriter, r *http.Request, what string, err error) {
	switch {
	case errors.Is(err, secrets.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, secrets.ErrInvalid), errors.Is(err, secrets.ErrTooShort):
		writeError(w, http.StatusBadRequest, err.Error())
	case r.Context().Err() != nil:
	default:
		a.log.LogAttrs(r.Context(), slog.LevelError, "api: "+what+" failed", slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.String("error", err.Error()))
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, what+" failed; try again")
	}
}

package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/cikit/cikit/reference/auth"
)

// MaxManageBodyBytes bounds the bodies of the token, service account and
// role routes.
const MaxManageBodyBytes = 8 << 10

// Me is the answer of GET /api/v1/me: who the caller is and what it may
// do.
type Me struct {
	User     string         `json:"user"`
	Login    string         `json:"login"`
	Kind     string         `json:"kind"`
	Service  bool           `json:"service,omitempty"`
	Token    string         `json:"token,omitempty"`
	Bindings []auth.Binding `json:"bindings"`
	// CSRFToken is a session's token, which its requests that change
	// something send as X-CSRF-Token.
	CSRFToken string `json:"csrf_token,omitempty"`
}

// TokenRequest is the body of POST /api/v1/tokens.
type TokenRequest struct {
	Name string `json:"name"`
	// User is a service account's login, for a platform admin making
	// its token; empty: the caller.
	User string `json:"user,omitempty"`
	// TTL is a Go duration ("720h"); empty: the platform's default.
	TTL string `json:"ttl,omitempty"`
	// Never: a service account's token that does not expire.
	Never   bool      `json:"never,omitempty"`
	MaxRole auth.Role `json:"max_role,omitempty"`
	Org     string    `json:"org,omitempty"`
	Repo    string    `json:"repo,omitempty"`
}

// TokenList is the answer of GET /api/v1/tokens.
type TokenList struct {
	Tokens []*auth.Token `json:"tokens"`
}

// ServiceAccountRequest is the body of POST /api/v1/service-accounts.
type ServiceAccountRequest struct {
	Login string `json:"login"`
	Name  string `json:"name,omitempty"`
}

// RoleList is the answer of GET /api/v1/roles.
type RoleList struct {
	Roles []auth.Binding `json:"roles"`
}

// AuditPage is the answer of GET /api/v1/audit: newest first; Next is
// the cursor (before=) of the next page, absent on the last.
type AuditPage struct {
	Entries []auth.Entry `json:"entries"`
	Next    string       `json:"next,omitempty"`
}

// readJSON decodes r's body, at most MaxManageBodyBytes of one JSON
// object with known fields, into v; it answers 400, 413 or 415.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			writeFieldError(w, http.StatusUnsupportedMediaType, "Content-Type", fmt.Sprintf("the body is JSON: send Content-Type: application/json, not %q", ct))
			return false
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxManageBodyBytes))
	if err != nil {
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d bytes", MaxManageBodyBytes))
		} else if r.Context().Err() == nil {
			writeError(w, http.StatusBadRequest, "reading the body failed: "+err.Error())
		}
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil || dec.More() {
		msg := "the body is not one JSON object"
		if err != nil {
			msg += ": " + err.Error()
		}
		writeError(w, http.StatusBadRequest, msg)
		return false
	}
	return true
}

// authFail answers an error of the Access's management calls.
func (a *API) authFail(w http.ResponseWriter, r *http.Request, what string, err error) {
	switch {
	case errors.Is(err, auth.ErrInvalid):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, auth.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, auth.ErrConflict):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, auth.ErrUnauthenticated), errors.Is(err, auth.ErrForbidden), errors.Is(err, auth.ErrCSRF), errors.Is(err, auth.ErrRateLimited):
		a.refuse(w, r, err)
	default:
		a.fail(w, r, what, err)
	}
}

func (a *API) me(w http.ResponseWriter, r *http.Request) {
	if _, ok := queryParams(w, r); !ok {
		return
	}
	p := auth.FromContext(r.Context())
	g, err := a.access.Grants(r.Context(), p)
	if err != nil {
		a.authFail(w, r, "reading the caller's roles", err)
		return
	}
	out := Me{User: p.User, Login: p.Login, Kind: string(p.Kind), Service: p.Service, Token: p.Token, Bindings: g.Bindings(), CSRFToken: p.CSRF}
	if out.Bindings == nil {
		out.Bindings = []auth.Binding{}
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) createToken(w http.ResponseWriter, r *http.Request) {
	if _, ok := queryParams(w, r); !ok {
		return
	}
	var in TokenRequest
	if !readJSON(w, r, &in) {
		return
	}
	tp := auth.TokenParams{User: in.User, Name: in.Name, Never: in.Never, MaxRole: in.MaxRole, Org: in.Org, Repo: in.Repo}
	if in.TTL != "" {
		d, err := time.ParseDuration(in.TTL)
		if err != nil || d <= 0 {
			writeFieldError(w, http.StatusBadRequest, "ttl", fmt.Sprintf("the ttl %q is not a positive duration such as 720h", in.TTL))
			return
		}
		tp.TTL = d
	}
	t, err := a.access.TokenCreate(r.Context(), auth.FromContext(r.Context()), tp)
	if err != nil {
		a.authFail(w, r, "creating the token", err)
		return
	}
	note(r, "token/"+t.ID)
	writeJSON(w, http.StatusCreated, t)
}

func (a *API) listTokens(w http.ResponseWriter, r *http.Request) {
	q, ok := queryParams(w, r, "all")
	if !ok {
		return
	}
	all := false
	if v, ok := q["all"]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeFieldError(w, http.StatusBadRequest, "all", "all is true or false")
			return
		}
		all = b
	}
	ts, err := a.access.TokenList(r.Context(), auth.FromContext(r.Context()), all)
	if err != nil {
		a.authFail(w, r, "listing tokens", err)
		return
	}
	writeJSON(w, http.StatusOK, TokenList{Tokens: ts})
}

func (a *API) revokeToken(w http.ResponseWriter, r *http.Request) {
	if !idsAndNoQuery(w, r, "id") {
		return
	}
	if err := a.access.TokenRevoke(r.Context(), auth.FromContext(r.Context()), r.PathValue("id")); err != nil {
		a.authFail(w, r, "revoking the token", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) createServiceAccount(w http.ResponseWriter, r *http.Request) {
	if _, ok := queryParams(w, r); !ok {
		return
	}
	var in ServiceAccountRequest
	if !readJSON(w, r, &in) {
		return
	}
	note(r, "user/"+in.Login[:min(len(in.Login), auth.MaxLoginBytes)])
	u, err := a.access.ServiceAccountCreate(r.Context(), auth.FromContext(r.Context()), in.Login, in.Name)
	if err != nil {
		a.authFail(w, r, "creating the service account", err)
		return
	}
	writeJSON(w, http.StatusCreated, u)
}

func (a *API) listRoles(w http.ResponseWriter, r *http.Request) {
	if _, ok := queryParams(w, r); !ok {
		return
	}
	bs, err := a.access.BindingList(r.Context(), auth.FromContext(r.Context()))
	if err != nil {
		a.authFail(w, r, "listing roles", err)
		return
	}
	writeJSON(w, http.StatusOK, RoleList{Roles: bs})
}

func bindingTarget(b auth.Binding) string {
	return fmt.Sprintf("role/%s/%s@%s/%s", b.User, b.Role, b.Org, b.Repo)
}

func (a *API) grantRole(w http.ResponseWriter, r *http.Request) {
	if _, ok := queryParams(w, r); !ok {
		return
	}
	var b auth.Binding
	if !readJSON(w, r, &b) {
		return
	}
	note(r, bindingTarget(b))
	if err := a.access.BindingGrant(r.Context(), auth.FromContext(r.Context()), b); err != nil {
		a.authFail(w, r, "granting the role", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// revokeRole takes the binding in the query (user, role, org, repo): a
// DELETE has no body.
func (a *API) revokeRole(w http.ResponseWriter, r *http.Request) {
	q, ok := queryParams(w, r, "user", "role", "org", "repo")
	if !ok {
		return
	}
	role, err := auth.ParseRole(q["role"])
	if err != nil {
		writeFieldError(w, http.StatusBadRequest, "role", err.Error())
		return
	}
	b := auth.Binding{User: q["user"], Role: role, Org: q["org"], Repo: q["repo"]}
	note(r, bindingTarget(b))
	if err := a.access.BindingRevoke(r.Context(), auth.FromContext(r.Context()), b); err != nil {
		a.authFail(w, r, "revoking the role", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) listAudit(w http.ResponseWriter, r *http.Request) {
	q, ok := queryParams(w, r, "actor", "action", "target", "before", "limit")
	if !ok {
		return
	}
	aq := auth.AuditQuery{Actor: q["actor"], Action: q["action"], TargetPrefix: q["target"], Before: q["before"], Limit: auth.DefaultAuditLimit}
	if v := q["limit"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > auth.MaxAuditLimit {
			writeFieldError(w, http.StatusBadRequest, "limit", fmt.Sprintf("the limit %q is not a number from 1 to %d", v, auth.MaxAuditLimit))
			return
		}
		aq.Limit = n
	}
	es, err := a.access.AuditList(r.Context(), aq)
	if err != nil {
		a.authFail(w, r, "reading the audit log", err)
		return
	}
	out := AuditPage{Entries: es}
	if len(es) == aq.Limit {
		out.Next = es[len(es)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}

// UserList is the answer of GET /api/v1/users.
type UserList struct {
	Users []*auth.User `json:"users"`
}

func (a *API) listUsers(w http.ResponseWriter, r *http.Request) {
	if _, ok := queryParams(w, r); !ok {
		return
	}
	us, err := a.access.UserList(r.Context(), auth.FromContext(r.Context()))
	if err != nil {
		a.authFail(w, r, "listing users", err)
		return
	}
	if us == nil {
		us = []*auth.User{}
	}
	writeJSON(w, http.StatusOK, UserList{Users: us})
}

// disableUser disables (or enables) a user: a disabled user's tokens and
// sessions stop working at once.
func (a *API) disableUser(disabled bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !idsAndNoQuery(w, r, "login") {
			return
		}
		if err := a.access.UserDisable(r.Context(), auth.FromContext(r.Context()), r.PathValue("login"), disabled); err != nil {
			a.authFail(w, r, "changing the user", err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

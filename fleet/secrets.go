package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/lease"
	"github.com/cikit/cikit/secrets"
)

// IDTokenIssuer mints a job's OIDC ID token for audiences; a
// *secrets.Issuer is one.
type IDTokenIssuer interface {
	Issue(ctx context.Context, id secrets.Identity, audience ...string) (string, error)
}

// JobSecrets gives claimed jobs their secrets and OIDC ID tokens (see
// docs/runner-protocol.md, "Secrets"). At the claim, the Server mints the
// job's ID token for Audience and hands it to the runner; the runner
// presents it, before the job's first step, to POST
// /v1/jobs/{run_id}/{job_id}/secrets, where the Broker releases exactly
// the secrets the job's stored spec names, and the Server mints the ID
// tokens the spec asks for (GitLab's id_tokens) and, for a GitHub job
// with the permission id-token: write, the credential its steps request
// tokens with (GET …/id-token, GitHub's ACTIONS_ID_TOKEN_REQUEST_URL).
type JobSecrets struct {
	// Issuer mints the jobs' ID tokens. Required.
	Issuer IDTokenIssuer
	// Broker releases secrets. Required; its verifier must accept tokens
	// of Audience only.
	Broker *secrets.Broker
	// Audience is the audience of the tokens runners present for the
	// secrets call, which no job may ask a token for. Required.
	Audience string
	// RunnerEnvironment is the tokens' runner_environment claim.
	// Default: "self-hosted".
	RunnerEnvironment string
}

// Limits of the secrets calls.
const (
	maxSecretsBodyBytes = 32 << 10
	secretsTimeout      = 30 * time.Second
	kindIDRequest       = "idreq"
)

// needsSecrets reports whether a job of spec asks for secrets or ID
// tokens at run time.
func needsSecrets(spec *cikit.JobSpec) bool {
	return len(spec.Secrets) > 0 || len(spec.IDTokens) > 0 || mayRequestIDTokens(spec)
}

// mayRequestIDTokens reports whether a job of spec may request ID tokens
// itself: its permissions, as its Admission caps them, give id-token:
// write. A fork's job capped to read permissions gets none, whatever its
// pipeline asks for.
func mayRequestIDTokens(spec *cikit.JobSpec) bool {
	return cikit.EffectivePermissions(spec)["id-token"] == "write"
}

// secretsToken mints, at the claim, the ID token the runner presents for
// the job's secrets; "" for a job that needs none. A server without
// JobSecrets refuses a job that needs them as a configuration failure.
func (s *Server) secretsToken(ctx context.Context, o *Offer, jc *cikit.JobContext) (string, error) {
	if !needsSecrets(o.Spec) {
		return "", nil
	}
	js := s.cfg.Secrets
	if js == nil {
		what := "ID tokens"
		if len(o.Spec.Secrets) > 0 {
			what = "the secrets " + strings.Join(o.Spec.Secrets, ", ")
		}
		return "", &claimFailure{class: cikit.FailureConfig, err: fmt.Errorf("the job asks for %s, and this platform has no secrets configured", what)}
	}
	id := secrets.IdentityFor(jc, o.Spec, js.RunnerEnvironment)
	if id.Repository == "" {
		return "", &claimFailure{class: cikit.FailureConfig, err: errors.New("the job asks for secrets or ID tokens, and its run names no repository to scope them to")}
	}
	tok, err := js.Issuer.Issue(ctx, id, js.Audience)
	if err != nil {
		class := cikit.FailureInfrastructure
		if errors.Is(err, secrets.ErrInvalid) {
			class = cikit.FailureConfig
		}
		return "", &claimFailure{class: class, err: fmt.Errorf("minting the job's ID token: %w", err)}
	}
	return tok, nil
}

// secretsRequest is the body of POST …/secrets.
type secretsRequest struct {
	IDToken string `json:"id_token"`
}

// secretsResponse answers it. Values are secrets: the runner keeps them
// in memory, gives them to the job's steps and masks them.
type secretsResponse struct {
	Secrets map[string]string `json:"secrets"`
	// Scopes are the scopes the job could read; From the scope of each
	// secret.
	Scopes []string          `json:"scopes"`
	From   map[string]string `json:"from,omitempty"`
	// IDTokens are the ID tokens of the spec's id_tokens, by variable.
	IDTokens map[string]string `json:"id_tokens,omitempty"`
	// IDTokenRequestToken is the credential of GET …/id-token, for a job
	// with the permission id-token: write.
	IDTokenRequestToken string `json:"id_token_request_token,omitempty"`
	// Withheld says the job's run is a pull request's from a fork, whose
	// jobs get no secrets: a GitHub job reads them as empty.
	Withheld bool `json:"withheld,omitempty"`
}

// missingBody is the 422 answer for secrets not found.
type missingBody struct {
	errorBody
	Missing []string `json:"missing,omitempty"`
	Scopes  []string `json:"scopes,omitempty"`
}

func (s *Server) routeSecrets() {
	s.mux.HandleFunc("POST /v1/jobs/{run_id}/{job_id}/secrets", s.jobSecrets)
	s.mux.HandleFunc("GET /v1/jobs/{run_id}/{job_id}/id-token", s.idToken)
}

// jobSecrets releases a job attempt's secrets for its ID token.
func (s *Server) jobSecrets(w http.ResponseWriter, r *http.Request) {
	c, a, ok := s.job(w, r)
	if !ok {
		return
	}
	js := s.cfg.Secrets
	if js == nil {
		writeError(w, http.StatusNotFound, "secrets are not configured on this server")
		return
	}
	var req secretsRequest
	if !decodeBodyMax(w, r, &req, maxSecretsBodyBytes) {
		return
	}
	if req.IDToken == "" {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "id_token is required: the ID token the claim handed out", Field: "id_token"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), secretsTimeout)
	defer cancel()
	if err := s.cfg.Leases.Check(ctx, a, c.Lease); err != nil {
		s.leaseError(w, a, err)
		return
	}
	j, err := s.cfg.Jobs.JobGet(ctx, a.RunID, a.JobID)
	switch {
	case errors.Is(err, cikit.ErrNotFound):
		writeError(w, http.StatusNotFound, "no such job")
		return
	case err != nil:
		s.log.Error("fleet: reading a job for its secrets", "run", a.RunID, "job", a.JobID, "error", err)
		writeError(w, http.StatusServiceUnavailable, "the job store is unavailable; try again")
		return
	case j.Attempt != a.Attempt:
		writeJSON(w, http.StatusConflict, errorBody{Error: fmt.Sprintf("attempt %d of the job is not current", a.Attempt), Stale: true})
		return
	}
	spec := j.Spec
	// Checked before anything is released: a job refused for its spec
	// gets no secret, and holds no lease, even for a moment.
	for _, t := range spec.IDTokens {
		if slices.Contains(t.Audience, js.Audience) {
			writeJSON(w, http.StatusUnprocessableEntity, errorBody{Error: fmt.Sprintf("id_tokens %s: the audience %q is the platform's own, which no job may ask for", t.Name, js.Audience), Code: "audience"})
			return
		}
	}
	g, err := js.Broker.Release(ctx, req.IDToken, secrets.Want{RunID: a.RunID, JobID: a.JobID, Attempt: a.Attempt, Names: spec.Secrets, Admission: spec.Admission})
	if err != nil {
		s.secretsError(w, a, err)
		return
	}
	resp := secretsResponse{Secrets: g.Values, Scopes: []string{}, Withheld: g.Withheld, From: map[string]string{}}
	for _, sc := range g.Scopes {
		resp.Scopes = append(resp.Scopes, sc.String())
	}
	for n, sc := range g.From {
		resp.From[n] = sc.String()
	}
	if g.Withheld {
		if spec.Format != "github" && (len(spec.Secrets) > 0 || len(spec.IDTokens) > 0) {
			s.endSecrets(ctx, a)
			writeJSON(w, http.StatusUnprocessableEntity, missingBody{errorBody: errorBody{Error: "the job may read no secret scope (by default a pull request from a fork reads none), so it gets no secrets and no ID tokens; the job names " + namesOf(spec), Code: "withheld"}, Missing: spec.Secrets})
			return
		}
		writeJSON(w, http.StatusOK, resp)
		return
	}
	id := secrets.IdentityOf(g.Claims)
	for _, t := range spec.IDTokens {
		tok, err := js.Issuer.Issue(ctx, id, t.Audience...)
		if err != nil {
			s.endSecrets(ctx, a)
			s.secretsError(w, a, err)
			return
		}
		if resp.IDTokens == nil {
			resp.IDTokens = map[string]string{}
		}
		resp.IDTokens[t.Name] = tok
	}
	if mayRequestIDTokens(spec) {
		resp.IDTokenRequestToken, err = s.signer.sign(&jobClaims{Kind: kindIDRequest, RunID: a.RunID, JobID: a.JobID, Attempt: a.Attempt,
			Lease: c.Lease, RunnerID: c.RunnerID, Expires: c.Expires, Repository: c.Repository, Identity: &id})
		if err != nil {
			s.endSecrets(ctx, a)
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

func namesOf(spec *cikit.JobSpec) string {
	var parts []string
	parts = append(parts, spec.Secrets...)
	for _, t := range spec.IDTokens {
		parts = append(parts, t.Name)
	}
	return strings.Join(parts, ", ")
}

// secretsError answers a refused or failed release.
func (s *Server) secretsError(w http.ResponseWriter, a lease.Attempt, err error) {
	var missing *secrets.MissingError
	switch {
	case errors.As(err, &missing):
		b := missingBody{errorBody: errorBody{Error: missing.Error(), Code: "missing"}, Missing: missing.Names}
		for _, sc := range missing.Scopes {
			b.Scopes = append(b.Scopes, sc.String())
		}
		writeJSON(w, http.StatusUnprocessableEntity, b)
	case errors.Is(err, secrets.ErrTokenInvalid), errors.Is(err, secrets.ErrReplayed):
		writeError(w, http.StatusUnauthorized, err.Error())
	case errors.Is(err, secrets.ErrForbidden):
		writeError(w, http.StatusForbidden, err.Error())
	case errors.Is(err, secrets.ErrInvalid), errors.Is(err, secrets.ErrTooShort):
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{Error: err.Error(), Code: "invalid"})
	default:
		s.log.Error("fleet: releasing a job's secrets failed", "run", a.RunID, "job", a.JobID, "attempt", a.Attempt, "error", err)
		writeError(w, http.StatusServiceUnavailable, "the secret providers are unavailable; try again")
	}
}

// idToken mints an ID token for a step of a GitHub job with the
// permission id-token: write (GitHub's ACTIONS_ID_TOKEN_REQUEST_URL):
// GET …/id-token?audience=AUD with the request token as bearer answers
// {"value": JWT}.
func (s *Server) idToken(w http.ResponseWriter, r *http.Request) {
	token, ok := bearer(r.Header.Get("Authorization"))
	var c jobClaims
	if !ok || s.signer.verify(token, kindIDRequest, &c) != nil || c.Identity == nil {
		writeError(w, http.StatusUnauthorized, "a valid ID token request token is required (ACTIONS_ID_TOKEN_REQUEST_TOKEN)")
		return
	}
	if c.RunID != r.PathValue("run_id") || c.JobID != r.PathValue("job_id") {
		writeError(w, http.StatusForbidden, "the request token is for another job")
		return
	}
	if !s.cfg.Now().Before(c.Expires) {
		writeError(w, http.StatusUnauthorized, "the request token has expired")
		return
	}
	if s.refuseRunner(w, c.RunnerID, s.checkRunner(r.Context(), c.RunnerID)) {
		return
	}
	js := s.cfg.Secrets
	if js == nil {
		writeError(w, http.StatusNotFound, "ID tokens are not configured on this server")
		return
	}
	aud := r.URL.Query().Get("audience")
	switch {
	case aud == "":
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "audience is required: the audience the token is for, such as sts.amazonaws.com", Field: "audience"})
		return
	case len(aud) > cikit.MaxAudienceBytes || strings.ContainsFunc(aud, func(r rune) bool { return r < ' ' || r == 0x7f }):
		writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("audience must be 1 to %d printable bytes", cikit.MaxAudienceBytes), Field: "audience"})
		return
	case aud == js.Audience:
		writeError(w, http.StatusForbidden, "that audience is the platform's own, which no job may ask a token for")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), secretsTimeout)
	defer cancel()
	a := lease.Attempt{RunID: c.RunID, JobID: c.JobID, Attempt: c.Attempt}
	if err := s.cfg.Leases.Check(ctx, a, c.Lease); err != nil {
		s.leaseError(w, a, err)
		return
	}
	tok, err := js.Issuer.Issue(ctx, *c.Identity, aud)
	if err != nil {
		s.secretsError(w, a, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Count int    `json:"count"`
		Value string `json:"value"`
	}{1, tok})
}

// renewSecrets renews the attempt's dynamic secrets that are due, on a
// heartbeat. A failure is logged: the lease's own expiry is the limit.
func (s *Server) renewSecrets(ctx context.Context, a lease.Attempt) {
	if s.cfg.Secrets == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, secretsTimeout)
	defer cancel()
	if err := s.cfg.Secrets.Broker.Renew(ctx, a.RunID, a.JobID, a.Attempt); err != nil {
		s.log.Warn("fleet: renewing a job's dynamic secrets failed", "run", a.RunID, "job", a.JobID, "attempt", a.Attempt, "error", err)
	}
}

// endSecrets revokes the attempt's dynamic secrets: it ended. A failure
// is logged; the broker's keeper revokes them later.
func (s *Server) endSecrets(ctx context.Context, a lease.Attempt) {
	if s.cfg.Secrets == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), secretsTimeout)
	defer cancel()
	if err := s.cfg.Secrets.Broker.End(ctx, a.RunID, a.JobID, a.Attempt); err != nil {
		s.log.Warn("fleet: revoking a job's dynamic secrets failed; the keeper retries", "run", a.RunID, "job", a.JobID, "attempt", a.Attempt, "error", err)
	}
}

// EndSecrets revokes the dynamic secrets of a job attempt that ended
// without its runner's word: the platform calls it for attempts the
// reaper ended.
func (s *Server) EndSecrets(ctx context.Context, runID, jobID string, attempt int) {
	s.endSecrets(ctx, lease.Attempt{RunID: runID, JobID: jobID, Attempt: attempt})
}

package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cikit/cikit"
)

// ErrStale is the server refusing a call about a job attempt that is no
// longer current: another attempt owns the job, and this one must stop.
var ErrStale = errors.New("agent: the job attempt is no longer current")

// client speaks the runner protocol v1.
type client struct {
	base *url.URL
	http *http.Client
}

// apiError is an answer other than the one a call expects.
type apiError struct {
	Status int
	Msg    string
	// Code is the error body's code, telling apart answers of one status
	// ("cache_exists", "not_found"); empty when it has none.
	Code   string
	Header http.Header
}

func (e *apiError) Error() string { return fmt.Sprintf("server answered %d: %s", e.Status, e.Msg) }

// transient reports whether the answer says to send the request again
// later: a server error, or a request the server's guards cut rather
// than refused (408: its body arrived slower than the server's minimum
// rate, as from a runner starved or stopped mid-upload; 429: too many
// requests).
func (e *apiError) transient() bool {
	return e.Status >= 500 || e.Status == http.StatusRequestTimeout || e.Status == http.StatusTooManyRequests
}

type registration struct {
	RunnerID    string   `json:"runner_id"`
	RunnerToken string   `json:"runner_token"`
	Labels      []string `json:"labels"`
}

// job is a claimed job attempt.
type job struct {
	RunID             string         `json:"run_id"`
	JobID             string         `json:"job_id"`
	Attempt           int            `json:"attempt"`
	JobToken          string         `json:"job_token"`
	LeaseExpiresAt    time.Time      `json:"lease_expires_at"`
	HeartbeatInterval string         `json:"heartbeat_interval"`
	Deadline          time.Time      `json:"deadline"`
	Spec              *cikit.JobSpec `json:"spec"`
	// MaxLogBytes is where the job's log is cut; 0: nowhere.
	MaxLogBytes int64 `json:"max_log_bytes"`
	// Context is the job's run context, its needs and its source; nil
	// from a server older than the field.
	Context *cikit.JobContext `json:"context"`
	// SecretsToken is the job's ID token for the secrets call; empty for
	// a job that needs no secrets.
	SecretsToken string `json:"secrets_token"`
}

type heartbeat struct {
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	// LeaseRemainingMS is nil from a server older than the field.
	LeaseRemainingMS *int64 `json:"lease_remaining_ms"`
	CancelRequested  bool   `json:"cancel_requested"`
}

// leaseEnd returns when the lease the heartbeat renewed ends, on this
// machine's monotonic clock: sent, the time taken just before the
// heartbeat was sent, plus the time the server says the lease has left,
// which it measured after renewing it; so it is never after the lease's
// end on the server, however long the call took, and no clocks of two
// machines are compared. From a server that does not say (older than
// lease_remaining_ms), it is lease_expires_at by this machine's wall
// clock, which is right only as far as the two clocks agree.
func (h *heartbeat) leaseEnd(sent time.Time) time.Time {
	if h.LeaseRemainingMS != nil {
		return sent.Add(time.Duration(*h.LeaseRemainingMS) * time.Millisecond)
	}
	return sent.Add(h.LeaseExpiresAt.Sub(sent.Round(0)))
}

type completion struct {
	Result       cikit.JobState     `json:"result"`
	ExitCode     int                `json:"exit_code"`
	FailureClass cikit.FailureClass `json:"failure_class,omitempty"`
	Reason       string             `json:"reason,omitempty"`
	Log          *logTotals         `json:"log,omitempty"`
	// The job's report.
	Outputs            map[string]string   `json:"outputs,omitempty"`
	Annotations        []cikit.Annotation  `json:"annotations,omitempty"`
	Commit             string              `json:"commit,omitempty"`
	CheckoutDurationMS int64               `json:"checkout_duration_ms,omitempty"`
	EnvNames           []string            `json:"env_names,omitempty"`
	Caches             []cikit.CacheReport `json:"caches,omitempty"`
	ImageRef           string              `json:"image,omitempty"`
	ImageDigest        string              `json:"image_digest,omitempty"`
}

// reports reports whether c carries a report beyond how the job ended.
func (c *completion) reports() bool {
	return len(c.Outputs) > 0 || len(c.Annotations) > 0 || c.Commit != "" || c.CheckoutDurationMS != 0 || len(c.EnvNames) > 0 || len(c.Caches) > 0 ||
		c.ImageRef != "" || c.ImageDigest != ""
}

type logTotals struct {
	TotalBytes int64  `json:"total_bytes"`
	SHA256     string `json:"sha256"`
	// DroppedBytes is the output discarded after the log was cut.
	DroppedBytes int64 `json:"dropped_bytes,omitempty"`
}

// url is the server's URL of path, which is escaped already (job IDs may
// hold slashes, escaped as %2F), with query.
func (c *client) url(path string, query url.Values) string {
	u := *c.base
	u.RawPath = strings.TrimSuffix(c.base.EscapedPath(), "/") + path
	u.Path, _ = url.PathUnescape(u.RawPath) // escaped by us: valid
	u.RawQuery = query.Encode()
	return u.String()
}

func jobPath(j *job, call string) string {
	return "/v1/jobs/" + url.PathEscape(j.RunID) + "/" + url.PathEscape(j.JobID) + "/" + call
}

// do sends a request and decodes a JSON answer of status want into out;
// 409 with a stale body is ErrStale.
func (c *client) do(ctx context.Context, method, u, token string, body io.Reader, contentType string, want int, out any) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return resp, err
	}
	if resp.StatusCode != want {
		var e struct {
			Error string `json:"error"`
			Stale bool   `json:"stale"`
			Code  string `json:"code"`
		}
		_ = json.Unmarshal(b, &e)
		if resp.StatusCode == http.StatusConflict && e.Stale {
			return resp, fmt.Errorf("%w: %s", ErrStale, e.Error)
		}
		return resp, &apiError{Status: resp.StatusCode, Msg: cmpOr(e.Error, strings.TrimSpace(string(b))), Code: e.Code, Header: resp.Header}
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp, fmt.Errorf("decoding the answer to %s %s: %w", method, u, err)
		}
	}
	return resp, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (c *client) postJSON(ctx context.Context, path, token string, in, out any, want int) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, http.MethodPost, c.url(path, nil), token, bytes.NewReader(b), "application/json", want, out)
	return err
}

func (c *client) register(ctx context.Context, regToken, name string, labels []string, version string) (*registration, error) {
	var r registration
	err := c.postJSON(ctx, "/v1/runners", regToken, map[string]any{"name": name, "labels": labels, "version": version}, &r, http.StatusCreated)
	return &r, err
}

// claim long-polls for a job; nil without error when none came in wait.
func (c *client) claim(ctx context.Context, runnerToken string, wait time.Duration) (*job, error) {
	q := url.Values{"wait": {strconv.Itoa(int(wait / time.Second))}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url("/v1/jobs/claim", q), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+runnerToken)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	// The server hands out no spec larger than cikit.MaxJobSpecBytes, so
	// an answer past MaxClaimBytes is not one to decode.
	b, err := io.ReadAll(io.LimitReader(resp.Body, cikit.MaxClaimBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > cikit.MaxClaimBytes {
		return nil, fmt.Errorf("the answer to a claim is larger than %s (cikit.MaxClaimBytes)", cikit.FormatBytes(cikit.MaxClaimBytes))
	}
	switch resp.StatusCode {
	case http.StatusNoContent:
		return nil, nil
	case http.StatusOK:
		var j job
		if err := json.Unmarshal(b, &j); err != nil {
			return nil, fmt.Errorf("decoding a claimed job: %w", err)
		}
		if j.Spec == nil || j.JobToken == "" {
			return nil, errors.New("a claimed job without spec or job token")
		}
		return &j, nil
	}
	var e struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	_ = json.Unmarshal(b, &e)
	return nil, &apiError{Status: resp.StatusCode, Msg: cmpOr(e.Error, strings.TrimSpace(string(b))), Code: e.Code, Header: resp.Header}
}

// heartbeat renews the lease of j and returns the answer, and when the
// lease ends (heartbeat.leaseEnd).
func (c *client) heartbeat(ctx context.Context, j *job) (*heartbeat, time.Time, error) {
	var h heartbeat
	sent := time.Now() // before the server may extend the lease
	err := c.postJSON(ctx, jobPath(j, "heartbeat"), j.JobToken, struct{}{}, &h, http.StatusOK)
	return &h, h.leaseEnd(sent), err
}

func (c *client) complete(ctx context.Context, j *job, comp *completion) error {
	return c.postJSON(ctx, jobPath(j, "complete"), j.JobToken, comp, nil, http.StatusOK)
}

// finishLog tells the server the log's totals; the server's verdict
// (complete or not) is its business.
func (c *client) finishLog(ctx context.Context, j *job, t *logTotals) error {
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	u := c.url(jobPath(j, "log/finish"), url.Values{"attempt": {strconv.Itoa(j.Attempt)}})
	_, err = c.do(ctx, http.MethodPost, u, j.JobToken, bytes.NewReader(b), "application/json", http.StatusOK, nil)
	return err
}

func (c *client) giveBack(ctx context.Context, j *job) error {
	return c.postJSON(ctx, jobPath(j, "return"), j.JobToken, struct{}{}, nil, http.StatusOK)
}

// jobSecrets is the answer of the secrets call.
type jobSecrets struct {
	Secrets             map[string]string `json:"secrets"`
	Scopes              []string          `json:"scopes"`
	IDTokens            map[string]string `json:"id_tokens"`
	IDTokenRequestToken string            `json:"id_token_request_token"`
	Withheld            bool              `json:"withheld"`
}

// secrets presents the job's ID token for its secrets.
func (c *client) secrets(ctx context.Context, j *job) (*jobSecrets, error) {
	var s jobSecrets
	err := c.postJSON(ctx, jobPath(j, "secrets"), j.JobToken, map[string]string{"id_token": j.SecretsToken}, &s, http.StatusOK)
	return &s, err
}

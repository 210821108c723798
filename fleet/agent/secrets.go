package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/cikit/cikit/fleet/process"
)

// fetchSecrets is the job's process.SecretsFetcher: the secrets call,
// tried again while the server or a provider is unavailable, within ctx.
func (a *Agent) fetchSecrets(j *job) process.SecretsFetcher {
	if j.SecretsToken == "" {
		return nil
	}
	return func(ctx context.Context) (*process.FetchedSecrets, error) {
		backoff := 200 * time.Millisecond
		for attempt := 1; ; attempt++ {
			s, err := a.c.secrets(ctx, j)
			if err == nil {
				f := &process.FetchedSecrets{Values: s.Secrets, IDTokens: s.IDTokens, Withheld: s.Withheld}
				if s.IDTokenRequestToken != "" {
					f.IDTokenRequest = &process.IDTokenRequest{URL: a.c.url(jobPath(j, "id-token"), url.Values{"api-version": {"1"}}), Token: s.IDTokenRequestToken}
				}
				return f, nil
			}
			var ae *apiError
			if errors.As(err, &ae) && !ae.transient() {
				if ae.Status == http.StatusUnprocessableEntity || ae.Status == http.StatusForbidden {
					return nil, fmt.Errorf("the secrets call: %w", &refusal{msg: ae.Msg})
				}
				return nil, fmt.Errorf("the secrets call: %w", err)
			}
			if errors.Is(err, ErrStale) || attempt == 5 {
				return nil, fmt.Errorf("the secrets call: %w", err)
			}
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("the secrets call: %w", context.Cause(ctx))
			case <-time.After(backoff):
			}
			backoff *= 2
		}
	}
}

// refusal is the server refusing a job its secrets for good, in the
// server's words (which name the secrets missing). It matches
// process.ErrSecretsRefused; it is the error a refused fetch wraps, so
// that the job's reason, which the executor makes of what the fetch's
// error wraps, is the server's message rather than the sentinel's.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

// Is makes a refusal match process.ErrSecretsRefused.
func (r *refusal) Is(target error) bool { return target == process.ErrSecretsRefused }

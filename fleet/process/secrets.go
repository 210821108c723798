package process

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cikit/cikit"
)

// FetchedSecrets are what a job's runner fetched for it before its first
// step. They live in memory only: in the environment of the job's step
// processes, never in a file of the runner.
type FetchedSecrets struct {
	// Values are the secrets the job names, by name: in the environment
	// of a native or GitLab job's steps, in a GitHub job's secrets
	// context. Each is masked in the job's output.
	Values map[string]string
	// IDTokens are OIDC ID tokens by variable (GitLab's id_tokens), in
	// the environment of every step; masked.
	IDTokens map[string]string
	// IDTokenRequest is, for a GitHub job with the permission id-token:
	// write, where its steps request ID tokens (GitHub's
	// ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN).
	IDTokenRequest *IDTokenRequest
	// Withheld says the job's run is a pull request's from a fork, whose
	// jobs get no secrets: a GitHub job reads them as empty, and its log
	// says so.
	Withheld bool
}

// IDTokenRequest is where a GitHub job's steps request ID tokens: GET URL
// with "&audience=AUD" and "Authorization: Bearer Token".
type IDTokenRequest struct {
	URL   string
	Token string
}

// SecretsFetcher fetches a job's secrets; see Job.FetchSecrets.
type SecretsFetcher func(ctx context.Context) (*FetchedSecrets, error)

// ErrSecretsRefused is what a SecretsFetcher wraps when the platform
// refused the job its secrets for good (a secret missing from every scope
// the job may read, a fork's pull request): the job fails as a
// configuration failure. Any other error is an infrastructure failure.
var ErrSecretsRefused = errors.New("secrets refused")

// fetchSecrets fetches the job's secrets through Job.FetchSecrets, masks
// them, and checks that every secret the spec names has a value; false
// with the job's result when it must not go on.
func (j *jobRun) fetchSecrets(ctx context.Context) (Result, bool) {
	spec := j.spec
	var f *FetchedSecrets
	if fetch := j.job.FetchSecrets; fetch != nil {
		fmt.Fprintf(j.pw, "--- secrets: fetching %s\n", secretsWanted(spec))
		var err error
		f, err = fetch(ctx)
		switch {
		case err == nil:
		case ctx.Err() != nil && context.Cause(ctx) == errTimeout:
			return j.fail(cikit.FailureTimeout, "timed out after %s while its secrets were fetched", j.timeout), false
		case ctx.Err() != nil:
			r := j.fail("", "cancelled while its secrets were fetched")
			r.State = cikit.JobCancelled
			return r, false
		case errors.Is(err, ErrSecretsRefused):
			// The platform's reason, without the sentinel's words.
			return j.fail(cikit.FailureConfig, "secrets: %s", strings.TrimPrefix(err.Error(), ErrSecretsRefused.Error()+": ")), false
		default:
			return j.fail(cikit.FailureInfrastructure, "secrets: %v", err), false
		}
	}
	// Masked before any of them can reach a step (Job.Secrets' own are
	// already): a value refused as too short to mask fails the job,
	// naming the secret, never the value.
	if f != nil {
		for _, name := range slices.Sorted(maps.Keys(f.Values)) {
			if err := j.addMask(f.Values[name]); err != nil {
				return j.fail(cikit.FailureConfig, "secret %s cannot be masked in the job's output: %v", name, err), false
			}
		}
		for _, name := range slices.Sorted(maps.Keys(f.IDTokens)) {
			if err := j.addMask(f.IDTokens[name]); err != nil {
				return j.fail(cikit.FailureConfig, "ID token %s: %v", name, err), false
			}
		}
		if f.IDTokenRequest != nil {
			if err := j.addMask(f.IDTokenRequest.Token); err != nil {
				return j.fail(cikit.FailureConfig, "ID token request token: %v", err), false
			}
		}
		all := maps.Clone(j.job.Secrets)
		if all == nil {
			all = map[string]string{}
		}
		maps.Copy(all, f.Values)
		j.job.Secrets = all
		j.idTokens = f.IDTokens
		// The job's capped permissions decide, not what the platform
		// handed: a fork's job capped below id-token: write requests
		// no ID tokens even from a platform that sent the means.
		if cikit.EffectivePermissions(spec)["id-token"] == "write" {
			j.idRequest = f.IDTokenRequest
		}
	}
	var missing []string
	for _, name := range spec.Secrets {
		if _, ok := j.secret(name); !ok && name != "*" {
			missing = append(missing, name)
		}
	}
	tokensMissing := false
	for _, t := range spec.IDTokens {
		if _, ok := j.idTokens[t.Name]; !ok {
			missing, tokensMissing = append(missing, t.Name+" (an ID token)"), true
		}
	}
	switch {
	case len(missing) == 0:
	case f != nil && f.Withheld && j.github:
		fmt.Fprintf(j.pw, "--- secrets: withheld: the platform gives this job no secret scope (by default, a pull request from a fork gets none); %s read empty\n", strings.Join(missing, ", "))
	default:
		why := "each secret a job names must be set"
		if tokensMissing && j.job.FetchSecrets == nil {
			why = "this runner gets no ID tokens: it runs without a platform that issues them"
		}
		return j.fail(cikit.FailureConfig, "secrets: %s not given to the job: %s", strings.Join(missing, ", "), why), false
	}
	if f != nil {
		fmt.Fprintf(j.pw, "--- secrets: %d given, masked in this log\n", len(f.Values))
	}
	if j.github && cikit.EffectivePermissions(spec)["id-token"] == "write" && j.idRequest == nil {
		fmt.Fprintf(j.pw, "--- warning: the job has the permission id-token: write, and this runner can get it no ID tokens: ACTIONS_ID_TOKEN_REQUEST_URL is not set\n")
	}
	return Result{}, true
}

// secret returns the value of the secret name: GitHub's secret names are
// case-insensitive.
func (j *jobRun) secret(name string) (string, bool) {
	if v, ok := j.job.Secrets[name]; ok {
		return v, true
	}
	if j.github {
		for k, v := range j.job.Secrets {
			if strings.EqualFold(k, name) {
				return v, true
			}
		}
	}
	return "", false
}

// secretEnv returns the variables the job's secrets and ID tokens give
// its steps: a GitLab job gets every secret it was given (as CI/CD
// variables are), a native job those it names; a GitHub job reads them in
// the secrets context instead, and gets the ID token request variables
// when it may request tokens.
func (j *jobRun) secretEnv() map[string]string {
	env := map[string]string{}
	switch {
	case j.github:
		if r := j.idRequest; r != nil {
			env["ACTIONS_ID_TOKEN_REQUEST_URL"], env["ACTIONS_ID_TOKEN_REQUEST_TOKEN"] = r.URL, r.Token
		}
	case j.spec.Format == formatGitLab:
		maps.Copy(env, j.job.Secrets)
	default:
		for _, name := range j.spec.Secrets {
			if v, ok := j.job.Secrets[name]; ok {
				env[name] = v
			}
		}
	}
	maps.Copy(env, j.idTokens)
	return env
}

// secretsWanted says what the job asks for, for its log.
func secretsWanted(spec *cikit.JobSpec) string {
	var parts []string
	if len(spec.Secrets) > 0 {
		parts = append(parts, strings.Join(spec.Secrets, ", "))
	}
	for _, t := range spec.IDTokens {
		parts = append(parts, t.Name+" (ID token for "+strings.Join(t.Audience, ", ")+")")
	}
	if cikit.EffectivePermissions(spec)["id-token"] == "write" {
		parts = append(parts, "the right to request ID tokens")
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, "; ")
}

// addMask masks value in the job's output from now on.
func (j *jobRun) addMask(value string) error { return j.masker.Add(value) }

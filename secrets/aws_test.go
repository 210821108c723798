package secrets_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/smtest"
	"github.com/cikit/cikit/secrets"
	"github.com/cikit/cikit/secrets/secretstest"
)

func newAWS(t *testing.T, srv *smtest.Server, cfg secrets.AWSConfig) *secrets.AWS {
	t.Helper()
	cfg.Region = smtest.Region
	cfg.BaseEndpoint = srv.URL()
	cfg.Credentials = credentials.NewStaticCredentialsProvider(smtest.AccessKeyID, smtest.SecretAccessKey, "")
	cfg.HTTPClient = srv.HTTPClient()
	a, err := secrets.NewAWS(cfg)
	require.NoError(t, err)
	return a
}

func TestAWSProvider(t *testing.T) {
	t.Parallel()
	secretstest.RunProviderTests(t, func(t *testing.T, seed map[secrets.Scope]map[string]string) secrets.Provider {
		srv := smtest.New(t)
		a := newAWS(t, srv, secrets.AWSConfig{})
		for scope, values := range seed {
			for name, value := range values {
				srv.Put(a.SecretID(scope, name), value)
			}
		}
		return a
	})
}

func TestAWSProviderWithoutBatch(t *testing.T) {
	t.Parallel()
	secretstest.RunProviderTests(t, func(t *testing.T, seed map[secrets.Scope]map[string]string) secrets.Provider {
		srv := smtest.New(t)
		srv.Refuse(smtest.OpBatchGetSecretValue)
		a := newAWS(t, srv, secrets.AWSConfig{Prefix: "ci/prod/"})
		for scope, values := range seed {
			for name, value := range values {
				srv.Put(a.SecretID(scope, name), value)
			}
		}
		return a
	})
}

func TestAWSSecretID(t *testing.T) {
	t.Parallel()
	srv := smtest.New(t)
	a := newAWS(t, srv, secrets.AWSConfig{})
	require.Equal(t, "aws", a.Name())
	require.Equal(t, "cikit/org/acme/TOKEN", a.SecretID(secrets.OrgScope("acme"), "TOKEN"))
	require.Equal(t, "cikit/org/acme/platform/TOKEN", a.SecretID(secrets.OrgScope("acme/platform"), "TOKEN"))
	require.Equal(t, "cikit/repo/acme/api/TOKEN", a.SecretID(secrets.RepoScope("acme/api"), "TOKEN"))
	require.Equal(t, "cikit/env/acme/api/prod/TOKEN", a.SecretID(secrets.EnvScope("acme/api", "prod"), "TOKEN"))
	other := newAWS(t, srv, secrets.AWSConfig{Prefix: "teams/ci-"})
	require.Equal(t, "teams/ci-repo/acme/api/TOKEN", other.SecretID(secrets.RepoScope("acme/api"), "TOKEN"))
}

func TestAWSBatches(t *testing.T) {
	t.Parallel()
	srv := smtest.New(t)
	a := newAWS(t, srv, secrets.AWSConfig{})
	scopes := []secrets.Scope{secrets.EnvScope("acme/api", "prod"), secrets.RepoScope("acme/api"), secrets.OrgScope("acme")}
	names := make([]string, secrets.MaxSecretsPerJob)
	for i := range names {
		names[i] = fmt.Sprintf("S%03d", i)
		srv.Put(a.SecretID(scopes[i%3], names[i]), "value-"+names[i])
	}
	got, err := a.Fetch(t.Context(), secrets.Request{Scopes: scopes, Names: names})
	require.NoError(t, err)
	require.Len(t, got, len(names))
	require.Equal(t, 3*secrets.MaxSecretsPerJob/20, srv.Calls(smtest.OpBatchGetSecretValue), "20 secrets per request")
	require.Zero(t, srv.Calls(smtest.OpGetSecretValue))

	srv.Refuse(smtest.OpBatchGetSecretValue)
	got, err = a.Fetch(t.Context(), secrets.Request{Scopes: scopes, Names: names[:10]})
	require.NoError(t, err)
	require.Len(t, got, 10)
	require.Equal(t, 30, srv.Calls(smtest.OpGetSecretValue), "without BatchGetSecretValue, one request per secret")
	batches := srv.Calls(smtest.OpBatchGetSecretValue)
	_, err = a.Fetch(t.Context(), secrets.Request{Scopes: scopes, Names: names[:1]})
	require.NoError(t, err)
	require.Equal(t, batches, srv.Calls(smtest.OpBatchGetSecretValue), "once denied, BatchGetSecretValue is not asked again")
}

func TestAWSRefusesBadValues(t *testing.T) {
	t.Parallel()
	srv := smtest.New(t)
	a := newAWS(t, srv, secrets.AWSConfig{})
	repo := secrets.RepoScope("acme/api")
	srv.Put(a.SecretID(repo, "GOOD"), "good-value")
	srv.PutBinary(a.SecretID(repo, "BINARY"), []byte("binary-value"))
	srv.Put(a.SecretID(repo, "LARGE"), strings.Repeat("x", secrets.MaxValueBytes+1))
	srv.Put(a.SecretID(repo, "SHORT"), "abc")
	srv.Put(a.SecretID(repo, "NUL"), "nul\x00value")
	srv.PutError(a.SecretID(repo, "DENIED"), "AccessDeniedException")
	srv.PutError(a.SecretID(repo, "UNDECRYPTABLE"), "DecryptionFailure")
	for name, want := range map[string]string{
		"BINARY":        "SecretBinary",
		"LARGE":         "the limit is",
		"SHORT":         "could not be masked",
		"NUL":           "NUL",
		"DENIED":        "AccessDeniedException",
		"UNDECRYPTABLE": "DecryptionFailure",
	} {
		_, err := a.Fetch(t.Context(), secrets.Request{Scopes: []secrets.Scope{repo}, Names: []string{"GOOD", name}})
		require.ErrorContains(t, err, want, name)
		require.ErrorContains(t, err, `"cikit/repo/acme/api/`+name+`"`, "the error names the AWS secret")
		require.NotContains(t, err.Error(), "binary-value")
	}
	// Without BatchGetSecretValue too.
	srv.Refuse(smtest.OpBatchGetSecretValue)
	_, err := a.Fetch(t.Context(), secrets.Request{Scopes: []secrets.Scope{repo}, Names: []string{"GOOD", "UNDECRYPTABLE"}})
	require.ErrorContains(t, err, "DecryptionFailure")
	require.ErrorContains(t, err, `"cikit/repo/acme/api/UNDECRYPTABLE"`)
	_, err = a.Fetch(t.Context(), secrets.Request{Scopes: []secrets.Scope{repo}, Names: []string{"BINARY"}})
	require.ErrorContains(t, err, "SecretBinary")
}

func TestAWSTimeout(t *testing.T) {
	t.Parallel()
	srv := smtest.New(t)
	srv.Stall(smtest.OpBatchGetSecretValue)
	a := newAWS(t, srv, secrets.AWSConfig{Timeout: 100 * time.Millisecond})
	_, err := a.Fetch(t.Context(), secrets.Request{Scopes: []secrets.Scope{secrets.RepoScope("acme/api")}, Names: []string{"X"}})
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestNewAWSRefusesBadConfig(t *testing.T) {
	t.Parallel()
	_, err := secrets.NewAWS(secrets.AWSConfig{Region: "us-east-1", Prefix: "has space/"})
	require.ErrorIs(t, err, secrets.ErrInvalid)
	require.ErrorContains(t, err, "Prefix")
	_, err = secrets.NewAWS(secrets.AWSConfig{Region: "us-east-1", Prefix: strings.Repeat("p", 257)})
	require.ErrorIs(t, err, secrets.ErrInvalid)
	_, err = secrets.NewAWS(secrets.AWSConfig{Region: "us-east-1", Timeout: -time.Second})
	require.ErrorContains(t, err, "Timeout")
}

func TestNewAWSNeedsARegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	_, err := secrets.NewAWS(secrets.AWSConfig{})
	require.ErrorContains(t, err, "Region")
	a, err := secrets.NewAWS(secrets.AWSConfig{Region: "eu-west-1"})
	require.NoError(t, err, "credentials come from the default chain, when first used")
	require.Equal(t, "aws", a.Name())
}

package smtest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/smtest"
)

func TestServerWithTheSDK(t *testing.T) {
	t.Parallel()
	srv := smtest.New(t)
	srv.Put("cikit/repo/acme/api/TOKEN", "token-value")
	srv.PutBinary("cikit/repo/acme/api/BLOB", []byte{0, 1, 2})
	srv.PutError("cikit/repo/acme/api/BROKEN", "DecryptionFailure")
	c := srv.Client()
	ctx := t.Context()

	out, err := c.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("cikit/repo/acme/api/TOKEN")})
	require.NoError(t, err)
	require.Equal(t, "token-value", aws.ToString(out.SecretString))
	require.Equal(t, "cikit/repo/acme/api/TOKEN", aws.ToString(out.Name))

	out, err = c.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("cikit/repo/acme/api/BLOB")})
	require.NoError(t, err)
	require.Nil(t, out.SecretString)
	require.Equal(t, []byte{0, 1, 2}, out.SecretBinary)

	_, err = c.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("nope")})
	var nf *types.ResourceNotFoundException
	require.ErrorAs(t, err, &nf)

	batch, err := c.BatchGetSecretValue(ctx, &secretsmanager.BatchGetSecretValueInput{
		SecretIdList: []string{"cikit/repo/acme/api/TOKEN", "nope", "cikit/repo/acme/api/BROKEN"},
	})
	require.NoError(t, err)
	require.Len(t, batch.SecretValues, 1)
	require.Equal(t, "token-value", aws.ToString(batch.SecretValues[0].SecretString))
	require.Len(t, batch.Errors, 2)
	require.Equal(t, "ResourceNotFoundException", aws.ToString(batch.Errors[0].ErrorCode))
	require.Equal(t, "DecryptionFailure", aws.ToString(batch.Errors[1].ErrorCode))
	require.Equal(t, 1, srv.Calls(smtest.OpBatchGetSecretValue))
	require.Equal(t, 3, srv.Calls(smtest.OpGetSecretValue))

	ids := make([]string, 21)
	for i := range ids {
		ids[i] = fmt.Sprint("id", i)
	}
	_, err = c.BatchGetSecretValue(ctx, &secretsmanager.BatchGetSecretValueInput{SecretIdList: ids})
	var ip *types.InvalidParameterException
	require.ErrorAs(t, err, &ip, "at most 20 ids")

	srv.Refuse(smtest.OpBatchGetSecretValue)
	_, err = c.BatchGetSecretValue(ctx, &secretsmanager.BatchGetSecretValueInput{SecretIdList: ids[:1]})
	var ae smithy.APIError
	require.True(t, errors.As(err, &ae))
	require.Equal(t, "AccessDeniedException", ae.ErrorCode())
}

func TestServerWantsASignature(t *testing.T) {
	t.Parallel()
	srv := smtest.New(t)
	for name, c := range map[string]struct {
		auth   string
		status int
		typ    string
	}{
		"no header":     {"", http.StatusForbidden, "MissingAuthenticationTokenException"},
		"not SigV4":     {"Bearer x", http.StatusBadRequest, "IncompleteSignatureException"},
		"other account": {"AWS4-HMAC-SHA256 Credential=OTHER/20260101/us-east-1/secretsmanager/aws4_request, SignedHeaders=host, Signature=00", http.StatusBadRequest, "IncompleteSignatureException"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL(), strings.NewReader(`{"SecretId":"x"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", "secretsmanager.GetSecretValue")
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := srv.HTTPClient().Do(req)
		require.NoError(t, err)
		var body struct {
			Type string `json:"__type"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		resp.Body.Close()
		require.Equal(t, c.status, resp.StatusCode, name)
		require.Equal(t, c.typ, body.Type, name)
	}
}

package secrets

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"
)

// Defaults of AWSConfig.
const (
	// DefaultAWSPrefix begins the names of the AWS secrets cikit reads.
	DefaultAWSPrefix = "cikit/"
	// DefaultAWSTimeout bounds one Fetch, all its requests and retries.
	DefaultAWSTimeout = 30 * time.Second
)

// Limits of AWS Secrets Manager.
const (
	// awsBatchIDs is how many secrets one BatchGetSecretValue asks for.
	awsBatchIDs = 20
	// awsMaxName is the longest name of an AWS secret: a longer ID
	// cannot exist, and is not asked for.
	awsMaxName = 512
	// awsParallel bounds the requests one Fetch has in flight.
	awsParallel = 4
)

// awsPrefixRE is what AWS allows in a secret's name.
var awsPrefixRE = regexp.MustCompile(`^[A-Za-z0-9/_+=.@-]*$`)

// AWSConfig configures the AWS Secrets Manager provider.
type AWSConfig struct {
	// Client is the Secrets Manager client to use. When nil, one is made
	// of Region, BaseEndpoint, Credentials and HTTPClient.
	Client *secretsmanager.Client
	// Region of the secrets; empty takes it from the environment
	// (AWS_REGION, the shared configuration file).
	Region string
	// BaseEndpoint is the URL of a Secrets Manager other than AWS's
	// regional one, such as a VPC endpoint or a local server.
	BaseEndpoint string
	// Credentials sign the requests; nil takes them from the SDK's
	// default chain (environment, shared files, web identity, container
	// and instance roles).
	Credentials aws.CredentialsProvider
	// HTTPClient sends the requests; nil is the SDK's.
	HTTPClient secretsmanager.HTTPClient
	// Prefix begins the names of the secrets cikit reads (default
	// DefaultAWSPrefix), so that an IAM policy can grant exactly them:
	// "arn:aws:secretsmanager:*:*:secret:cikit/*". It holds what AWS
	// allows in a name: letters, digits and /_+=.@-, at most 256 bytes.
	Prefix string
	// Timeout bounds one Fetch (default DefaultAWSTimeout).
	Timeout time.Duration
}

// AWS is a Provider of secrets kept in AWS Secrets Manager.
//
// # Names
//
// The secret NAME of a scope is the AWS secret of name Prefix + path
// (see SecretID), with the default prefix:
//
//	org:acme            cikit/org/acme/NAME
//	repo:acme/api       cikit/repo/acme/api/NAME
//	env:acme/api:prod   cikit/env/acme/api/prod/NAME
//
// A name with its path is never ambiguous: names and environments hold
// no slash, organisations and repositories may (GitLab groups).
//
// # Values
//
// A secret's value is its SecretString, as it is: a JSON value of
// several keys is one secret. A secret holding SecretBinary is refused
// with an error naming it, rather than given encoded or skipped: store
// the value as a string. Values must pass ValidValue (an error names
// the secret otherwise).
//
// # Requests
//
// Fetch asks for all the names of all the scopes at once, 20 secrets per
// BatchGetSecretValue, a few requests at a time, so that the role needs
// secretsmanager:BatchGetSecretValue (on "*") and GetSecretValue on the
// prefix. When AWS denies BatchGetSecretValue (AccessDeniedException:
// a role granted GetSecretValue only), the provider falls back, for good,
// to one GetSecretValue per secret. A secret that does not exist is
// left out; any other error of a secret (access denied, decryption
// failure, marked for deletion) fails the Fetch naming it.
type AWS struct {
	client  *secretsmanager.Client
	prefix  string
	timeout time.Duration
	// noBatch is set once AWS has denied BatchGetSecretValue.
	noBatch atomic.Bool
}

// NewAWS returns the provider cfg describes.
func NewAWS(cfg AWSConfig) (*AWS, error) {
	prefix := cmp.Or(cfg.Prefix, DefaultAWSPrefix)
	if len(prefix) > 256 || !awsPrefixRE.MatchString(prefix) {
		return nil, fmt.Errorf("%w: AWSConfig.Prefix %q: use at most 256 letters, digits and /_+=.@-", ErrInvalid, prefix)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("%w: AWSConfig.Timeout (%s) must not be negative", ErrInvalid, cfg.Timeout)
	}
	a := &AWS{client: cfg.Client, prefix: prefix, timeout: cmp.Or(cfg.Timeout, DefaultAWSTimeout)}
	if a.client != nil {
		return a, nil
	}
	o := secretsmanager.Options{Region: cfg.Region, Credentials: cfg.Credentials, HTTPClient: cfg.HTTPClient}
	if cfg.BaseEndpoint != "" {
		o.BaseEndpoint = aws.String(cfg.BaseEndpoint)
	}
	if o.Region == "" || o.Credentials == nil {
		var opts []func(*config.LoadOptions) error
		if cfg.Region != "" {
			opts = append(opts, config.WithRegion(cfg.Region))
		}
		// Loading reads the environment and the shared files; credentials
		// are retrieved when first used.
		ac, err := config.LoadDefaultConfig(context.Background(), opts...)
		if err != nil {
			return nil, fmt.Errorf("secrets: loading the AWS configuration: %w", err)
		}
		o.Region = cmp.Or(o.Region, ac.Region)
		if o.Credentials == nil {
			o.Credentials = ac.Credentials
		}
	}
	if o.Region == "" {
		return nil, fmt.Errorf("%w: AWSConfig.Region is empty and the environment names no region (AWS_REGION)", ErrInvalid)
	}
	a.client = secretsmanager.New(o)
	return a, nil
}

// Name returns "aws".
func (a *AWS) Name() string { return "aws" }

// SecretID returns the name of the AWS secret that holds secret name of
// scope.
func (a *AWS) SecretID(scope Scope, name string) string {
	switch scope.Kind {
	case ScopeOrg:
		return a.prefix + "org/" + scope.Org + "/" + name
	case ScopeRepo:
		return a.prefix + "repo/" + scope.Repo + "/" + name
	default:
		return a.prefix + "env/" + scope.Repo + "/" + scope.Env + "/" + name
	}
}

// Fetch implements Provider.
func (a *AWS) Fetch(ctx context.Context, r Request) ([]Secret, error) {
	names, err := validRequest(r)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	asked := map[string]bool{}
	var ids []string
	for _, sc := range r.Scopes {
		for _, n := range names {
			if id := a.SecretID(sc, n); !asked[id] && len(id) <= awsMaxName {
				asked[id] = true
				ids = append(ids, id)
			}
		}
	}
	values, err := a.values(ctx, ids)
	if err != nil {
		return nil, err
	}
	var out []Secret
	for _, n := range names {
		for _, sc := range r.Scopes {
			if v, ok := values[a.SecretID(sc, n)]; ok {
				out = append(out, Secret{Name: n, Value: v, Scope: sc})
				break
			}
		}
	}
	return out, nil
}

// values reads the secrets ids, and returns those that exist by ID.
func (a *AWS) values(ctx context.Context, ids []string) (map[string]string, error) {
	var (
		mu    sync.Mutex
		out   = map[string]string{}
		first error
		wg    sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
			cancel()
		}
	}
	put := func(id string, value *string, binary []byte) {
		v, err := awsValue(id, value, binary)
		if err != nil {
			fail(err)
			return
		}
		mu.Lock()
		out[id] = v
		mu.Unlock()
	}
	// One request a secret goes with more of them in flight.
	size, parallel := 1, 2*awsParallel
	if !a.noBatch.Load() {
		size, parallel = awsBatchIDs, awsParallel
	}
	work := make(chan []string)
	for range min(parallel, (len(ids)+size-1)/size) {
		wg.Go(func() {
			for part := range work {
				if err := a.read(ctx, part, put); err != nil {
					fail(err)
				}
			}
		})
	}
feed:
	for i := 0; i < len(ids); i += size {
		select {
		case work <- ids[i:min(i+size, len(ids))]:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if first != nil {
		return nil, first
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("secrets: aws: %w", err)
	}
	return out, nil
}

// read reads the secrets ids: in one BatchGetSecretValue, or, once AWS
// has denied that, one by one.
func (a *AWS) read(ctx context.Context, ids []string, put func(id string, value *string, binary []byte)) error {
	if !a.noBatch.Load() {
		err := a.readBatch(ctx, ids, put)
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDeniedException" {
			return err
		}
		a.noBatch.Store(true)
	}
	for _, id := range ids {
		out, err := a.client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
		if err != nil {
			var ae smithy.APIError
			if errors.As(err, &ae) && ae.ErrorCode() == "ResourceNotFoundException" {
				continue
			}
			return fmt.Errorf("secrets: aws: reading the secret %q: %w", id, err)
		}
		put(id, out.SecretString, out.SecretBinary)
	}
	return nil
}

func (a *AWS) readBatch(ctx context.Context, ids []string, put func(id string, value *string, binary []byte)) error {
	out, err := a.client.BatchGetSecretValue(ctx, &secretsmanager.BatchGetSecretValueInput{SecretIdList: ids})
	if err != nil {
		return fmt.Errorf("secrets: aws: reading %d secrets (%s …): %w", len(ids), ids[0], err)
	}
	asked := make(map[string]bool, len(ids))
	for _, id := range ids {
		asked[id] = true
	}
	for _, e := range out.Errors {
		if aws.ToString(e.ErrorCode) == "ResourceNotFoundException" {
			continue
		}
		return fmt.Errorf("secrets: aws: reading the secret %q: %s: %s", aws.ToString(e.SecretId), aws.ToString(e.ErrorCode), aws.ToString(e.Message))
	}
	for _, v := range out.SecretValues {
		id := aws.ToString(v.Name)
		if !asked[id] {
			return fmt.Errorf("secrets: aws: BatchGetSecretValue returned the secret %q, which was not asked for", id)
		}
		put(id, v.SecretString, v.SecretBinary)
	}
	return nil
}

// awsValue is the value of the secret id, or why it cannot be one.
func awsValue(id string, value *string, binary []byte) (string, error) {
	if value == nil {
		if binary != nil {
			return "", fmt.Errorf("%w: the AWS secret %q holds a binary value (SecretBinary); cikit reads SecretString only: store the value as a string", ErrInvalid, id)
		}
		return "", fmt.Errorf("%w: the AWS secret %q has no SecretString", ErrInvalid, id)
	}
	if err := ValidValue(*value); err != nil {
		return "", fmt.Errorf("the AWS secret %q: %w", id, err)
	}
	return *value, nil
}

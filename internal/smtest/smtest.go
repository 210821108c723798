package smtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// Region and credentials of the server's clients.
const (
	Region          = "us-east-1"
	AccessKeyID     = "AKIDSMTEST"
	SecretAccessKey = "smtest-secret-access-key"
)

// Operations the server serves, as X-Amz-Target names them after
// "secretsmanager.".
const (
	OpGetSecretValue      = "GetSecretValue"
	OpBatchGetSecretValue = "BatchGetSecretValue"
)

// maxBody bounds a request's body; AWS's requests are far smaller.
const maxBody = 1 << 20

// maxBatchIDs is BatchGetSecretValue's limit on SecretIdList.
const maxBatchIDs = 20

// Server is an in-process Secrets Manager. It is safe for concurrent use.
type Server struct {
	srv     *httptest.Server
	created time.Time
	closed  chan struct{}

	mu      sync.Mutex
	secrets map[string]secret
	errs    map[string]string
	refused map[string]bool
	stalled map[string]bool
	calls   map[string]int
}

type secret struct {
	str    *string
	binary []byte
}

// New starts a server for t, closed when t ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		secrets: map[string]secret{},
		errs:    map[string]string{},
		refused: map[string]bool{},
		stalled: map[string]bool{},
		calls:   map[string]int{},
		closed:  make(chan struct{}),
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	// Cleanups run last first: stalled requests end, then the server.
	t.Cleanup(func() { close(s.closed) })
	return s
}

// URL is the server's base URL, the BaseEndpoint of a client.
func (s *Server) URL() string { return s.srv.URL }

// HTTPClient is an HTTP client whose connections are closed with the
// server.
func (s *Server) HTTPClient() *http.Client { return s.srv.Client() }

// Client returns an SDK client of the server.
func (s *Server) Client() *secretsmanager.Client {
	return secretsmanager.New(secretsmanager.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.URL()),
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		HTTPClient:   s.HTTPClient(),
	})
}

// Put stores a secret whose value is a string (SecretString).
func (s *Server) Put(id, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secrets[id] = secret{str: &value}
}

// PutBinary stores a secret whose value is binary (SecretBinary).
func (s *Server) PutBinary(id string, value []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secrets[id] = secret{binary: append([]byte(nil), value...)}
}

// PutError makes reading secret id answer the error errType (such as
// "DecryptionFailure" or "AccessDeniedException").
func (s *Server) PutError(id, errType string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs[id] = errType
}

// Refuse makes operation op (OpGetSecretValue, OpBatchGetSecretValue)
// answer AccessDeniedException.
func (s *Server) Refuse(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused[op] = true
}

// Stall makes operation op answer nothing until its request is
// cancelled, as an unreachable endpoint would: the way to test timeouts.
func (s *Server) Stall(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalled[op] = true
}

// Calls returns how many requests of operation op the server answered.
func (s *Server) Calls(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

type apiError struct {
	status int
	Type   string `json:"__type"`
	Msg    string `json:"message"`
}

func errorf(status int, typ, format string, args ...any) *apiError {
	return &apiError{status: status, Type: typ, Msg: fmt.Sprintf(format, args...)}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	out, err := s.handle(w, r)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Requestid", "smtest-request")
	if err != nil {
		w.WriteHeader(err.status)
		_ = json.NewEncoder(w).Encode(err)
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) (any, *apiError) {
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		return nil, errorf(http.StatusNotFound, "UnknownOperationException", "%s %s: the JSON protocol is POST /", r.Method, r.URL.Path)
	}
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return nil, errorf(http.StatusForbidden, "MissingAuthenticationTokenException", "Missing Authentication Token")
	}
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") || !strings.Contains(auth, "Credential="+AccessKeyID+"/") ||
		!strings.Contains(auth, "SignedHeaders=") || !strings.Contains(auth, "Signature=") {
		return nil, errorf(http.StatusBadRequest, "IncompleteSignatureException", "Authorization header is not a SigV4 signature of %s: %q", AccessKeyID, auth)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-amz-json-1.1" {
		return nil, errorf(http.StatusBadRequest, "SerializationException", "Content-Type %q; want application/x-amz-json-1.1", ct)
	}
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "secretsmanager.")
	if !ok || (op != OpGetSecretValue && op != OpBatchGetSecretValue) {
		return nil, errorf(http.StatusBadRequest, "UnknownOperationException", "X-Amz-Target %q is not an operation of this server", r.Header.Get("X-Amz-Target"))
	}
	s.mu.Lock()
	s.calls[op]++
	refused, stalled := s.refused[op], s.stalled[op]
	s.mu.Unlock()
	if refused {
		return nil, errorf(http.StatusBadRequest, "AccessDeniedException", "User is not authorized to perform: secretsmanager:%s", op)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "SerializationException", "reading the request: %v", err)
	}
	if stalled {
		// The body read, the server notices when the client goes.
		select {
		case <-r.Context().Done():
		case <-s.closed:
		}
		return nil, errorf(http.StatusServiceUnavailable, "ServiceUnavailable", "the request was cancelled")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	switch op {
	case OpGetSecretValue:
		var in struct {
			SecretId     string
			VersionId    string
			VersionStage string
		}
		if err := dec.Decode(&in); err != nil {
			return nil, errorf(http.StatusBadRequest, "SerializationException", "%v", err)
		}
		if in.SecretId == "" {
			return nil, errorf(http.StatusBadRequest, "InvalidParameterException", "SecretId is required")
		}
		return s.get(in.SecretId)
	default:
		var in struct {
			SecretIdList []string
			Filters      []json.RawMessage
			MaxResults   *int
			NextToken    *string
		}
		if err := dec.Decode(&in); err != nil {
			return nil, errorf(http.StatusBadRequest, "SerializationException", "%v", err)
		}
		if in.Filters != nil || in.MaxResults != nil || in.NextToken != nil {
			return nil, errorf(http.StatusBadRequest, "InvalidRequestException", "this server serves SecretIdList only")
		}
		if len(in.SecretIdList) == 0 || len(in.SecretIdList) > maxBatchIDs {
			return nil, errorf(http.StatusBadRequest, "InvalidParameterException",
				"SecretIdList has %d ids; it has 1 to %d", len(in.SecretIdList), maxBatchIDs)
		}
		return s.batch(in.SecretIdList), nil
	}
}

type entry struct {
	ARN           string
	Name          string
	SecretString  *string `json:",omitempty"`
	SecretBinary  []byte  `json:",omitempty"` // base64, as AWS sends it
	VersionId     string
	VersionStages []string
	CreatedDate   float64
}

func (s *Server) get(id string) (*entry, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if typ, ok := s.errs[id]; ok {
		return nil, errorf(http.StatusBadRequest, typ, "smtest: %s of %s", typ, id)
	}
	sec, ok := s.secrets[id]
	if !ok {
		return nil, errorf(http.StatusBadRequest, "ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
	}
	return &entry{
		ARN:           "arn:aws:secretsmanager:" + Region + ":123456789012:secret:" + id + "-AbCdEf",
		Name:          id,
		SecretString:  sec.str,
		SecretBinary:  sec.binary,
		VersionId:     "00000000-0000-0000-0000-000000000001",
		VersionStages: []string{"AWSCURRENT"},
		CreatedDate:   float64(s.created.Unix()),
	}, nil
}

type batchOut struct {
	SecretValues []*entry
	Errors       []batchError
}

type batchError struct {
	SecretId  string
	ErrorCode string
	Message   string
}

func (s *Server) batch(ids []string) batchOut {
	out := batchOut{SecretValues: []*entry{}, Errors: []batchError{}}
	for _, id := range ids {
		e, err := s.get(id)
		if err != nil {
			out.Errors = append(out.Errors, batchError{SecretId: id, ErrorCode: err.Type, Message: err.Msg})
			continue
		}
		out.SecretValues = append(out.SecretValues, e)
	}
	return out
}

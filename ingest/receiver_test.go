package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/internal/syncbuf"
)

// Secrets of the receivers under test.
const (
	testGitHubSecret   = "gh-secret"
	testGitLabToken    = "gl-token"
	testStandardSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

// receiverNow is the clock of the receivers under test.
var receiverNow = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// publishRecorder keeps what it is given, or fails with err.
type publishRecorder struct {
	err    error
	mu     sync.Mutex
	events []*ingest.Event
}

func (p *publishRecorder) Publish(ctx context.Context, ev *ingest.Event) error {
	if p.err != nil {
		return p.err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, ev)
	return nil
}

func (p *publishRecorder) published() []*ingest.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.events)
}

type receiverBundle struct {
	receiver  *ingest.Receiver
	publisher *publishRecorder
	logs      *syncbuf.Buffer
}

// setupReceiver returns a receiver of every source, with a recording
// publisher and its log in a buffer; change adjusts its configuration.
func setupReceiver(t *testing.T, change func(*ingest.ReceiverConfig)) *receiverBundle {
	t.Helper()
	b := &receiverBundle{publisher: &publishRecorder{}, logs: &syncbuf.Buffer{}}
	cfg := ingest.ReceiverConfig{
		GitHubSecrets:   []string{testGitHubSecret},
		GitLabTokens:    []string{testGitLabToken},
		StandardSecrets: []string{testStandardSecret},
		Publisher:       b.publisher,
		Now:             func() time.Time { return receiverNow },
		Logger:          slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if change != nil {
		change(&cfg)
	}
	r, err := ingest.NewReceiver(cfg)
	require.NoError(t, err)
	b.receiver = r
	return b
}

// Minimal payloads of the receiver tests.
const (
	testPushBody = `{"ref":"refs/heads/main","before":"1111111111111111111111111111111111111111",` +
		`"after":"2222222222222222222222222222222222222222","repository":{"name":"api","owner":{"login":"acme"}},` +
		`"sender":{"login":"alice"}}`
	testGitLabPushBody = `{"object_kind":"push","ref":"refs/heads/main","after":"2222222222222222222222222222222222222222",` +
		`"checkout_sha":"2222222222222222222222222222222222222222","project":{"path_with_namespace":"acme/platform/api"}}`
	testDispatchBody = `{"type":"pipeline.dispatch","data":{"repository":"acme/api","ref":"refs/heads/main"}}`
)

// gitHubRequest is a GitHub delivery of event with body, signed with secret.
func gitHubRequest(event, delivery, body, secret string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-GitHub-Hook-ID", "42")
	req.Header.Set("X-Hub-Signature-256", ingest.SignGitHub(secret, []byte(body)))
	return req
}

// gitLabRequest is a GitLab delivery with body and token.
func gitLabRequest(delivery, body, token string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gitlab-Event", "Push Hook")
	req.Header.Set("Idempotency-Key", delivery)
	req.Header.Set("X-Gitlab-Token", token)
	return req
}

// standardRequest is a Standard Webhooks delivery with body, signed
// with secret as sent at sent.
func standardRequest(t *testing.T, id, body, secret string, sent time.Time) *http.Request {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	setStandardHeaders(t, req.Header, id, body, secret, sent)
	return req
}

func setStandardHeaders(t *testing.T, h http.Header, id, body, secret string, sent time.Time) {
	t.Helper()
	sig, err := ingest.SignStandard(secret, id, sent, []byte(body))
	require.NoError(t, err)
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", fmt.Sprint(sent.Unix()))
	h.Set("webhook-signature", sig)
}

// serveDelivery has the receiver answer req, and returns the status, the
// decoded JSON body, its values printed, and the headers of the answer.
func serveDelivery(t *testing.T, r http.Handler, req *http.Request) (int, map[string]string, http.Header) {
	t.Helper()
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var answer map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &answer), "answer %q", rec.Body.String())
	body := make(map[string]string, len(answer))
	for k, v := range answer {
		body[k] = fmt.Sprint(v)
	}
	return rec.Code, body, rec.Header()
}

func TestReceiverPublishes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  func(*ingest.ReceiverConfig)
		req  func(t *testing.T) *http.Request
		want ingest.Event
	}{
		{
			name: "GitHub push",
			req: func(t *testing.T) *http.Request {
				return gitHubRequest("push", "gh-1", testPushBody, testGitHubSecret)
			},
			want: ingest.Event{
				Provider: ingest.GitHub, DeliveryID: "gh-1", HookID: "42", Kind: ingest.KindPush,
				Org: "acme", Repo: "api", RefType: ingest.RefBranch, RefName: "main",
				SHA: "2222222222222222222222222222222222222222", Before: "1111111111111111111111111111111111111111",
				Actor: "alice", EventTime: receiverNow, Raw: json.RawMessage(testPushBody),
			},
		},
		{
			name: "GitLab push with token",
			req: func(t *testing.T) *http.Request {
				return gitLabRequest("gl-1", testGitLabPushBody, testGitLabToken)
			},
			want: ingest.Event{
				Provider: ingest.GitLab, DeliveryID: "gl-1", HookID: "push", Kind: ingest.KindPush,
				Org: "acme/platform", Repo: "api", RefType: ingest.RefBranch, RefName: "main",
				SHA: "2222222222222222222222222222222222222222", EventTime: receiverNow, Raw: json.RawMessage(testGitLabPushBody),
			},
		},
		{
			name: "GitLab push with signing token",
			cfg: func(c *ingest.ReceiverConfig) {
				c.GitLabTokens = nil
				c.GitLabSigningTokens = []string{testStandardSecret}
			},
			req: func(t *testing.T) *http.Request {
				req := gitLabRequest("gl-2", testGitLabPushBody, "")
				req.Header.Del("X-Gitlab-Token")
				setStandardHeaders(t, req.Header, "gl-2", testGitLabPushBody, testStandardSecret, receiverNow.Add(-time.Minute))
				return req
			},
			want: ingest.Event{
				Provider: ingest.GitLab, DeliveryID: "gl-2", HookID: "push", Kind: ingest.KindPush,
				Org: "acme/platform", Repo: "api", RefType: ingest.RefBranch, RefName: "main",
				SHA: "2222222222222222222222222222222222222222", EventTime: receiverNow, Raw: json.RawMessage(testGitLabPushBody),
			},
		},
		{
			name: "Standard Webhooks dispatch",
			req: func(t *testing.T) *http.Request {
				return standardRequest(t, "msg_1", testDispatchBody, testStandardSecret, receiverNow)
			},
			want: ingest.Event{
				Provider: ingest.Manual, DeliveryID: "msg_1", Kind: ingest.KindDispatch,
				Org: "acme", Repo: "api", RefType: ingest.RefBranch, RefName: "main",
				EventTime: receiverNow, Raw: json.RawMessage(testDispatchBody),
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupReceiver(t, tc.cfg)
			status, body, _ := serveDelivery(t, b.receiver, tc.req(t))
			require.Equal(t, http.StatusAccepted, status)
			require.Equal(t, map[string]string{"delivery_id": tc.want.DeliveryID}, body)
			got := b.publisher.published()
			require.Len(t, got, 1)
			require.Equal(t, tc.want, *got[0])
		})
	}
}

func TestReceiverRefuses(t *testing.T) {
	t.Parallel()
	stale := receiverNow.Add(-ingest.DefaultTolerance - time.Second)
	for _, tc := range []struct {
		name   string
		cfg    func(*ingest.ReceiverConfig)
		req    func(t *testing.T) *http.Request
		status int
		body   map[string]string
		log    string // in the log, not in the answer
	}{
		{
			name: "no provider",
			req: func(t *testing.T) *http.Request {
				return httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(testPushBody))
			},
			status: http.StatusBadRequest,
			body:   map[string]string{"error": "no X-GitHub-Event, X-Gitlab-Event or webhook-id header: not a webhook this receiver knows"},
		},
		{
			name: "provider without secrets",
			cfg:  func(c *ingest.ReceiverConfig) { c.GitLabTokens = nil },
			req: func(t *testing.T) *http.Request {
				return gitLabRequest("gl-1", testGitLabPushBody, testGitLabToken)
			},
			status: http.StatusBadRequest,
			body:   map[string]string{"error": "this receiver accepts no GitLab deliveries", "delivery_id": "gl-1"},
		},
		{
			name: "form-encoded GitHub delivery",
			req: func(t *testing.T) *http.Request {
				req := gitHubRequest("push", "gh-1", "payload="+testPushBody, testGitHubSecret)
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				return req
			},
			status: http.StatusUnsupportedMediaType,
			body: map[string]string{
				"error":       `content type "application/x-www-form-urlencoded" is not application/json; set the webhook's content type to JSON`,
				"delivery_id": "gh-1",
			},
		},
		{
			name: "missing signature",
			req: func(t *testing.T) *http.Request {
				req := gitHubRequest("push", "gh-1", testPushBody, testGitHubSecret)
				req.Header.Del("X-Hub-Signature-256")
				return req
			},
			status: http.StatusUnauthorized,
			body:   map[string]string{"error": "missing signature", "delivery_id": "gh-1"},
			log:    "no X-Hub-Signature-256 header",
		},
		{
			name: "wrong secret",
			req: func(t *testing.T) *http.Request {
				return gitHubRequest("push", "gh-1", testPushBody, "guess")
			},
			status: http.StatusUnauthorized,
			body:   map[string]string{"error": "signature mismatch", "delivery_id": "gh-1"},
			log:    "matches none of the 1 secrets",
		},
		{
			name: "wrong GitLab token",
			req: func(t *testing.T) *http.Request {
				return gitLabRequest("gl-1", testGitLabPushBody, "guess")
			},
			status: http.StatusUnauthorized,
			body:   map[string]string{"error": "signature mismatch", "delivery_id": "gl-1"},
			log:    "X-Gitlab-Token matches none of the 1 tokens",
		},
		{
			name: "stale timestamp",
			req: func(t *testing.T) *http.Request {
				return standardRequest(t, "msg_1", testDispatchBody, testStandardSecret, stale)
			},
			status: http.StatusUnauthorized,
			body:   map[string]string{"error": "timestamp outside tolerance", "delivery_id": "msg_1"},
			log:    "webhook-timestamp is 5m1s from now",
		},
		{
			name: "malformed payload",
			req: func(t *testing.T) *http.Request {
				return gitHubRequest("push", "gh-1", `{"ref": "refs/heads/main"`, testGitHubSecret)
			},
			status: http.StatusBadRequest,
			body:   map[string]string{"error": "github push: malformed JSON: unexpected end of JSON input", "delivery_id": "gh-1"},
		},
		{
			name: "unprintable delivery id",
			req: func(t *testing.T) *http.Request {
				return gitHubRequest("push", "gh 1\n", testPushBody, testGitHubSecret)
			},
			status: http.StatusBadRequest,
			body:   map[string]string{"error": "github push: the delivery or hook id is not 1 to 256 printable ASCII characters"},
		},
		{
			name: "payload without a repository",
			req: func(t *testing.T) *http.Request {
				return gitHubRequest("push", "gh-1", `{"ref":"refs/heads/main","after":"2222222222222222222222222222222222222222"}`, testGitHubSecret)
			},
			status: http.StatusBadRequest,
			body:   map[string]string{"error": "github push: no repository owner and name", "delivery_id": "gh-1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupReceiver(t, tc.cfg)
			status, body, _ := serveDelivery(t, b.receiver, tc.req(t))
			require.Equal(t, tc.status, status)
			require.Equal(t, tc.body, body)
			require.Empty(t, b.publisher.published())
			if tc.log != "" {
				require.Contains(t, b.logs.String(), tc.log)
				require.NotContains(t, body["error"], tc.log)
			}
		})
	}
}

func TestReceiverIgnores(t *testing.T) {
	t.Parallel()
	b := setupReceiver(t, nil)
	for _, tc := range []struct {
		event, body, reason string
	}{
		{"ping", `{"zen":"Design for failure.","hook_id":42}`, "a ping only checks that the webhook is reachable"},
		{"push", `{"ref":"refs/heads/old","after":"0000000000000000000000000000000000000000","deleted":true,` +
			`"repository":{"name":"api","owner":{"login":"acme"}}}`, "the branch old was deleted"},
		{"star", `{"action":"created"}`, `GitHub event "star" starts no pipeline`},
	} {
		status, body, _ := serveDelivery(t, b.receiver, gitHubRequest(tc.event, "gh-"+tc.event, tc.body, testGitHubSecret))
		require.Equal(t, http.StatusOK, status, tc.event)
		require.Equal(t, map[string]string{"ignored": tc.reason, "delivery_id": "gh-" + tc.event}, body)
	}
	require.Empty(t, b.publisher.published())
}

func TestReceiverOnlyPOST(t *testing.T) {
	t.Parallel()
	b := setupReceiver(t, nil)
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodHead} {
		req := gitHubRequest("push", "gh-1", testPushBody, testGitHubSecret)
		req.Method = method
		rec := httptest.NewRecorder()
		b.receiver.ServeHTTP(rec, req)
		require.Equal(t, http.StatusMethodNotAllowed, rec.Code, method)
		require.Equal(t, http.MethodPost, rec.Header().Get("Allow"))
	}
	require.Empty(t, b.publisher.published())
}

// When Publish fails the provider is asked to deliver again, and nothing
// counts as accepted.
func TestReceiverPublishFails(t *testing.T) {
	t.Parallel()
	b := setupReceiver(t, func(c *ingest.ReceiverConfig) {
		c.Publisher = &publishRecorder{err: errors.New("kafka: not enough in-sync replicas")}
	})
	status, body, header := serveDelivery(t, b.receiver, gitHubRequest("push", "gh-1", testPushBody, testGitHubSecret))
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, map[string]string{"error": "the event could not be stored; deliver it again later", "delivery_id": "gh-1"}, body)
	require.Equal(t, "30", header.Get("Retry-After"))
	require.Empty(t, b.publisher.published())
	require.Contains(t, b.logs.String(), "not enough in-sync replicas")
}

// heldPublisher holds Publish until released.
type heldPublisher struct {
	entered, release chan struct{}
}

func (p *heldPublisher) Publish(ctx context.Context, ev *ingest.Event) error {
	close(p.entered)
	<-p.release
	return nil
}

// answerWatcher records whether an answer has been started.
type answerWatcher struct {
	*httptest.ResponseRecorder
	answered atomic.Bool
}

func (w *answerWatcher) WriteHeader(status int) {
	w.answered.Store(true)
	w.ResponseRecorder.WriteHeader(status)
}

func (w *answerWatcher) Write(p []byte) (int, error) {
	w.answered.Store(true)
	return w.ResponseRecorder.Write(p)
}

func TestReceiverAnswersAfterPublish(t *testing.T) {
	t.Parallel()
	pub := &heldPublisher{entered: make(chan struct{}), release: make(chan struct{})}
	b := setupReceiver(t, func(c *ingest.ReceiverConfig) { c.Publisher = pub })
	w := &answerWatcher{ResponseRecorder: httptest.NewRecorder()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.receiver.ServeHTTP(w, gitHubRequest("push", "gh-1", testPushBody, testGitHubSecret))
	}()
	select {
	case <-pub.entered:
	case <-done:
		t.Fatalf("answered %d without publishing", w.Code)
	}
	require.False(t, w.answered.Load(), "answered while Publish was running")
	close(pub.release)
	<-done
	require.Equal(t, http.StatusAccepted, w.Code)
}

func TestReceiverBodyCap(t *testing.T) {
	t.Parallel()
	limit := int64(len(testPushBody))
	b := setupReceiver(t, func(c *ingest.ReceiverConfig) { c.MaxBodyBytes = limit })

	status, _, _ := serveDelivery(t, b.receiver, gitHubRequest("push", "gh-at-cap", testPushBody, testGitHubSecret))
	require.Equal(t, http.StatusAccepted, status, "a body of exactly MaxBodyBytes")

	over := testPushBody + " "
	tooLarge := map[string]string{"error": fmt.Sprintf("the body is larger than %d bytes", limit), "delivery_id": "gh-over"}
	status, body, _ := serveDelivery(t, b.receiver, gitHubRequest("push", "gh-over", over, testGitHubSecret))
	require.Equal(t, http.StatusRequestEntityTooLarge, status, "declared by Content-Length")
	require.Equal(t, tooLarge, body)

	// A declared size over the cap is refused before anything is read.
	req := gitHubRequest("push", "gh-over", over, testGitHubSecret)
	unread := &readCounter{r: strings.NewReader(over)}
	req.Body = io.NopCloser(unread)
	status, body, _ = serveDelivery(t, b.receiver, req)
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	require.Zero(t, unread.n, "bytes read of a body declared too large")

	req = gitHubRequest("push", "gh-over", over, testGitHubSecret)
	req.ContentLength = -1 // chunked: the size shows only while reading
	req.Body = io.NopCloser(strings.NewReader(over))
	status, body, _ = serveDelivery(t, b.receiver, req)
	require.Equal(t, http.StatusRequestEntityTooLarge, status, "found while reading")
	require.Equal(t, tooLarge, body)

	require.Len(t, b.publisher.published(), 1)
}

// readCounter counts the bytes read through it.
type readCounter struct {
	r io.Reader
	n int
}

func (c *readCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestReceiverConcurrentDeliveries(t *testing.T) {
	t.Parallel()
	b := setupReceiver(t, nil)
	srv := httptest.NewServer(b.receiver)
	t.Cleanup(srv.Close)

	const n = 50
	var wg sync.WaitGroup
	statuses := make([]int, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			body := strings.Replace(testPushBody, "refs/heads/main", fmt.Sprintf("refs/heads/b%d", i), 1)
			req := gitHubRequest("push", fmt.Sprintf("gh-%d", i), body, testGitHubSecret)
			out, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
			if err != nil {
				errs[i] = err
				return
			}
			out.Header = req.Header
			resp, err := srv.Client().Do(out)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, http.StatusAccepted, statuses[i], "delivery %d", i)
	}
	got := map[string]string{}
	for _, ev := range b.publisher.published() {
		got[ev.DeliveryID] = ev.RefName
	}
	require.Len(t, got, n)
	for i := range n {
		require.Equal(t, fmt.Sprintf("b%d", i), got[fmt.Sprintf("gh-%d", i)])
	}
}

func TestNewReceiverValidates(t *testing.T) {
	t.Parallel()
	pub := &publishRecorder{}
	for _, tc := range []struct {
		name string
		cfg  ingest.ReceiverConfig
		want string
	}{
		{"no publisher", ingest.ReceiverConfig{GitHubSecrets: []string{"s"}},
			"ingest: ReceiverConfig.Publisher is required"},
		{"no secrets", ingest.ReceiverConfig{Publisher: pub},
			"ingest: ReceiverConfig needs secrets for at least one source: GitHubSecrets, GitLabTokens, GitLabSigningTokens or StandardSecrets"},
		{"negative body cap", ingest.ReceiverConfig{Publisher: pub, GitHubSecrets: []string{"s"}, MaxBodyBytes: -1},
			"ingest: ReceiverConfig.MaxBodyBytes must not be negative, got -1"},
		{"negative tolerance", ingest.ReceiverConfig{Publisher: pub, GitHubSecrets: []string{"s"}, Tolerance: -time.Second},
			"ingest: ReceiverConfig.Tolerance must not be negative, got -1s"},
		{"empty GitHub secret", ingest.ReceiverConfig{Publisher: pub, GitHubSecrets: []string{"s", ""}},
			"ingest: GitHub secret 1 is empty"},
		{"empty GitLab token", ingest.ReceiverConfig{Publisher: pub, GitLabTokens: []string{""}},
			"ingest: GitLab token 0 is empty"},
		{"malformed signing secret", ingest.ReceiverConfig{Publisher: pub, StandardSecrets: []string{"whsec_not base64!"}},
			`ingest: Standard Webhooks secret 0: the secret is not "whsec_" and standard base64: illegal base64 data at input byte 3`},
	} {
		_, err := ingest.NewReceiver(tc.cfg)
		require.EqualError(t, err, tc.want, tc.name)
	}
}

// Tests of the normalizers, shared by the providers.

var updateWebhookGolden = flag.Bool("update-webhook-golden", false, "rewrite the .golden files of testdata/webhook from the normalizers' output")

// goldenReceived is when the golden deliveries were received.
var goldenReceived = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// testGolden normalizes every testdata/webhook/<dir>/*.json, a delivery
// whose headers headers gives from the file's base name, and compares the
// result with the .golden file next to it. shaOptional says which
// results may lack a SHA.
func testGolden(t *testing.T, dir string, provider ingest.Provider,
	normalize func(*ingest.Webhook) (ingest.Normalized, error),
	headers func(name string) http.Header, shaOptional func(name string) bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "webhook", dir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			body, err := os.ReadFile(file)
			require.NoError(t, err)
			wh := &ingest.Webhook{Header: headers(name), Body: body, Received: goldenReceived}
			res, err := normalize(wh)
			if err == nil {
				checkNormalized(t, provider, wh, res, shaOptional(name))
			}
			require.Equal(t, strings.Contains(name, "__error_"), err != nil, "files named __error_ fail, the others do not: %v", err)
			got := goldenText(t, res, err)
			golden := strings.TrimSuffix(file, ".json") + ".golden"
			if *updateWebhookGolden {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test -run %s -update-webhook-golden to write it", t.Name())
			require.Equal(t, string(want), got)
		})
	}
}

// goldenText is a normalization result as the golden files hold it: the
// event without its raw body, the ignored reason, or the error.
func goldenText(t *testing.T, res ingest.Normalized, err error) string {
	t.Helper()
	var v any
	switch {
	case err != nil:
		v = map[string]string{"error": err.Error()}
	case res.Ignored != nil:
		v = map[string]any{"ignored": res.Ignored}
	default:
		ev := *res.Event
		ev.Raw = nil
		v = map[string]any{"event": ev}
	}
	out, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	return string(out) + "\n"
}

// checkNormalized asserts what every successful normalization of wh by
// provider holds: exactly one of an event and an ignored reason; an
// ignored delivery names its event and why; an event has the provider, a
// delivery id, a known kind and ref type that agree with each other, a
// non-empty Org, Repo (without a slash) and RefName, a SHA unless
// shaOptional, pull-request fields exactly on pull requests, variables
// only on dispatches, sorted and distinct paths, the body as Raw, a
// non-zero EventTime, a Key made of its parts, and the same Key and
// fields after a JSON round trip.
func checkNormalized(t testing.TB, provider ingest.Provider, wh *ingest.Webhook, res ingest.Normalized, shaOptional bool) {
	t.Helper()
	require.True(t, (res.Event == nil) != (res.Ignored == nil), "exactly one of Event and Ignored: %+v", res)
	if res.Ignored != nil {
		require.NotEmpty(t, res.Ignored.Event)
		require.NotEmpty(t, res.Ignored.Reason)
		return
	}
	ev := res.Event
	require.Equal(t, provider, ev.Provider)
	require.NotEmpty(t, ev.DeliveryID)
	require.Contains(t, []ingest.Kind{ingest.KindPush, ingest.KindTag, ingest.KindPullRequest, ingest.KindDispatch}, ev.Kind)
	require.Contains(t, []ingest.RefType{ingest.RefBranch, ingest.RefTag}, ev.RefType)
	switch ev.Kind {
	case ingest.KindPush, ingest.KindPullRequest:
		require.Equal(t, ingest.RefBranch, ev.RefType, "a %s is of a branch", ev.Kind)
	case ingest.KindTag:
		require.Equal(t, ingest.RefTag, ev.RefType)
	}
	require.NotEmpty(t, ev.Org)
	require.NotEmpty(t, ev.Repo)
	require.NotContains(t, ev.Repo, "/")
	require.NotEmpty(t, ev.RefName)
	if !shaOptional {
		require.NotEmpty(t, ev.SHA)
	}
	if ev.Kind == ingest.KindPullRequest {
		require.Positive(t, ev.PRNumber)
		require.NotEmpty(t, ev.BaseRef)
	} else {
		require.Zero(t, ev.PRNumber)
		require.Empty(t, ev.BaseRef)
		require.Empty(t, ev.MergeSHA)
		require.False(t, ev.Fork)
		require.Empty(t, ev.AuthorAssociation, "an author association only on pull requests")
	}
	if provider != ingest.GitHub {
		require.Empty(t, ev.AuthorAssociation, "only GitHub says how an author is related to the repository")
	}
	require.LessOrEqual(t, len(ev.AuthorAssociation), ingest.MaxAuthorAssociationBytes)
	require.Regexp(t, `^[A-Z_]*$`, ev.AuthorAssociation)
	if ev.Kind != ingest.KindDispatch {
		require.Empty(t, ev.Variables)
	}
	for _, p := range ev.Paths {
		require.NotEmpty(t, p)
	}
	require.True(t, slices.IsSorted(ev.Paths) && len(slices.Compact(slices.Clone(ev.Paths))) == len(ev.Paths), "paths sorted and distinct: %q", ev.Paths)
	require.Equal(t, wh.Body, []byte(ev.Raw))
	require.False(t, ev.EventTime.IsZero())
	require.Equal(t, ev.Org+"/"+ev.Repo+"/"+string(ev.RefType)+"/"+ev.RefName, ev.Key())

	sent := *ev
	sent.Raw = nil
	data, err := json.Marshal(&sent)
	require.NoError(t, err)
	var back ingest.Event
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, sent.Key(), back.Key())
	require.True(t, sent.EventTime.Equal(back.EventTime))
	back.EventTime = sent.EventTime
	require.Equal(t, sent, back)
}

func TestNormalizeDispatchGolden(t *testing.T) {
	t.Parallel()
	headers := func(name string) http.Header {
		h := http.Header{}
		h.Set("webhook-id", "msg_"+name)
		return h
	}
	testGolden(t, "dispatch", ingest.Manual, ingest.NormalizeDispatch, headers, func(string) bool { return true })
}

// TestReceiverRefusesBeforeReading: a delivery whose headers cannot pass
// — no signature, a wrong GitLab token, a Standard Webhooks timestamp out
// of tolerance — is refused 401 before any of its body is read, so an
// unsigned flood costs no body memory.
func TestReceiverRefusesBeforeReading(t *testing.T) {
	t.Parallel()
	b := setupReceiver(t, nil)
	unsigned := gitHubRequest("push", "gh-unsigned", testPushBody, testGitHubSecret)
	unsigned.Header.Del("X-Hub-Signature-256")
	stale := standardRequest(t, "std-stale", testDispatchBody, testStandardSecret, receiverNow.Add(-time.Hour))
	for name, req := range map[string]*http.Request{
		"no signature":       unsigned,
		"wrong gitlab token": gitLabRequest("gl-wrong", testGitLabPushBody, "not-the-token"),
		"stale timestamp":    stale,
	} {
		unread := &readCounter{r: req.Body}
		req.Body = io.NopCloser(unread)
		status, _, _ := serveDelivery(t, b.receiver, req)
		require.Equal(t, http.StatusUnauthorized, status, name)
		require.Zero(t, unread.n, "%s: bytes read of a delivery refused on its headers", name)
	}
	require.Empty(t, b.publisher.published())
}

// TestReceiverVerifiesWhileReading: a wrong signature is found from the
// bytes as they were read, without a second pass; a body changed after
// signing is refused, the signed one passes.
func TestReceiverVerifiesWhileReading(t *testing.T) {
	t.Parallel()
	b := setupReceiver(t, nil)
	req := gitHubRequest("push", "gh-tampered", testPushBody, testGitHubSecret)
	req.Body = io.NopCloser(strings.NewReader(strings.Replace(testPushBody, "alice", "mallo", 1)))
	status, body, _ := serveDelivery(t, b.receiver, req)
	require.Equal(t, http.StatusUnauthorized, status)
	require.Equal(t, "signature mismatch", body["error"])

	// Read in pieces of one byte: the HMAC sees every one.
	req = gitHubRequest("push", "gh-pieces", testPushBody, testGitHubSecret)
	req.Body = io.NopCloser(iotest.OneByteReader(strings.NewReader(testPushBody)))
	status, body, _ = serveDelivery(t, b.receiver, req)
	require.Equal(t, http.StatusAccepted, status, "%v", body)
	require.Len(t, b.publisher.published(), 1)
}

package ingest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/cikit/cikit/internal/httpguard"
)

// DefaultMaxBodyBytes is the largest body a Receiver reads unless
// configured otherwise: 25 MiB, GitHub's cap on webhook payloads.
const DefaultMaxBodyBytes = 25 << 20

// initialBodyBuffer is the most a Receiver allocates for a body before
// its bytes arrive.
const initialBodyBuffer = 1 << 20

// retryAfterSeconds is the Retry-After of an answer to a delivery that
// could not be published; a broker rarely recovers sooner.
const retryAfterSeconds = "30"

// ReceiverConfig configures a Receiver. Secrets for at least one source
// and a Publisher are required; the zero value of everything else is a
// sensible default.
type ReceiverConfig struct {
	// GitHubSecrets verify deliveries with an X-GitHub-Event header;
	// see GitHubVerifier. Without them such deliveries are refused.
	GitHubSecrets []string
	// GitLabTokens and GitLabSigningTokens verify deliveries with an
	// X-Gitlab-Event header; see GitLabVerifier. Without either such
	// deliveries are refused.
	GitLabTokens        []string
	GitLabSigningTokens []string
	// StandardSecrets verify other deliveries signed the Standard
	// Webhooks way (a webhook-id header), which carry a DispatchType
	// payload; see StandardVerifier and NormalizeDispatch. Without them
	// such deliveries are refused.
	StandardSecrets []string

	// Publisher receives every event. Required.
	Publisher Publisher
	// MaxBodyBytes is the largest body read; a larger one is answered
	// 413. Default: DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Tolerance is how far a signed timestamp may be from Now.
	// Default: DefaultTolerance.
	Tolerance time.Duration
	// Now is the clock for signed timestamps and for the EventTime of
	// events whose payload gives no time. Default: time.Now.
	Now func() time.Time
	// Remember is how many published deliveries the Receiver remembers,
	// so that a redelivery of one — the same provider, delivery id, hook
	// and body, verified again — is answered 202 without being published
	// a second time, copies arriving together are published once, and
	// the same provider, delivery id and hook with another body is
	// refused 409. Default: DefaultRemember. Negative: every copy is
	// published, for the consumer to drop.
	Remember int
	// Logger receives a record of every refused or failed delivery
	// (Warn, Error) and of every accepted or ignored one (Debug).
	// Default: slog.Default().
	Logger *slog.Logger
}

// Receiver is the HTTP endpoint webhooks are sent to. It verifies each delivery's signature on the raw body, normalizes it
// into an Event and hands that to the Publisher, and answers only once
// Publish has returned, so that a provider is told a delivery was taken
// only when it is durable. Mount it at any path; it is safe for
// concurrent use.
//
// It tells the provider from the headers: X-GitHub-Event is GitHub,
// X-Gitlab-Event is GitLab, and webhook-id is any other Standard Webhooks
// sender. Its answers, all JSON:
//
//	202 {"delivery_id": …}                    published
//	202 {"delivery_id": …, "duplicate": true} published before (see below)
//	409 {"error": …, "delivery_id": …}        published before with another body (see below)
//	200 {"ignored": reason, "delivery_id": …} verified, but starts no pipeline (a ping, a closed pull request)
//	400 {"error": …, "delivery_id": …}        no known provider, a provider without secrets here, a malformed payload
//	401 {"error": …, "delivery_id": …}        "missing signature", "signature mismatch" or "timestamp outside tolerance"
//	405 {"error": …}                          not a POST
//	408 {"error": …, "delivery_id": …}        a body sent slower than the server's minimum rate (see internal/httpguard)
//	413 {"error": …, "delivery_id": …}        a body larger than MaxBodyBytes, or an event Publish refuses as larger than its log accepts (ErrEventTooLarge)
//	415 {"error": …, "delivery_id": …}        a body that is not JSON (a GitHub webhook set to form encoding)
//	503 {"error": …, "delivery_id": …}        Publish failed, or the server's budget of body bytes in flight is spent; with Retry-After, so that the provider delivers again
//
// delivery_id is left out when the delivery names none a normalized
// event could carry.
// A 401 says no more than which of the three verification failures it
// was; the log says what exactly. The headers are checked before the
// body is read (a delivery without a signature or with a wrong GitLab
// token costs no body), and the signature is computed while the body is
// read, so verification takes no second pass; the body is kept for
// normalization only once it has passed.
//
// A Receiver remembers the deliveries it published (ReceiverConfig.
// Remember) by their delivery key — provider, hook (Event.HookID) and
// delivery id, as the delivery record is keyed — with the SHA-256 of
// each one's body (Event.RawDigest). A verified redelivery of one is
// answered 202 with "duplicate": true and not published again; a
// delivery with a remembered key and another body is not a redelivery
// but a conflict (a forgery, a sender's bug): it is answered 409, not
// published, and logged (Warn) with the delivery id, the source and both
// digests. Copies arriving while the first of their key is being
// published wait for its outcome. The memory is per process and bounded:
// a redelivery it has forgotten, or one sent to another replica, is
// published again with the same DeliveryID, for the Ingester to drop,
// and a conflicting one is then answered 202 — the Ingester logs the
// conflict instead (see Ingester.Ingest).
type Receiver struct {
	sources   map[Provider]*webhookSource
	published *publishedSet
	publisher Publisher
	maxBody   int64
	now       func() time.Time
	log       *slog.Logger
}

// webhookSource is what the receiver does with the deliveries of one
// provider.
type webhookSource struct {
	name string // for people: "GitHub"
	// begin checks a delivery's headers and returns the check its body
	// is fed to as it is read; nil when no secret is configured.
	begin      func(http.Header) (bodyCheck, error)
	normalize  func(*Webhook) (Normalized, error)
	deliveryID func(http.Header) string // before verification, for answers and logs
}

// NewReceiver validates cfg and returns a Receiver.
func NewReceiver(cfg ReceiverConfig) (*Receiver, error) {
	if cfg.Publisher == nil {
		return nil, errors.New("ingest: ReceiverConfig.Publisher is required")
	}
	if len(cfg.GitHubSecrets)+len(cfg.GitLabTokens)+len(cfg.GitLabSigningTokens)+len(cfg.StandardSecrets) == 0 {
		return nil, errors.New("ingest: ReceiverConfig needs secrets for at least one source: GitHubSecrets, GitLabTokens, GitLabSigningTokens or StandardSecrets")
	}
	if cfg.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("ingest: ReceiverConfig.MaxBodyBytes must not be negative, got %d", cfg.MaxBodyBytes)
	}
	if cfg.Tolerance < 0 {
		return nil, fmt.Errorf("ingest: ReceiverConfig.Tolerance must not be negative, got %s", cfg.Tolerance)
	}
	r := &Receiver{
		published: newPublishedSet(cmp.Or(cfg.Remember, DefaultRemember)),
		publisher: cfg.Publisher,
		maxBody:   cmp.Or(cfg.MaxBodyBytes, DefaultMaxBodyBytes),
		now:       cfg.Now,
		log:       cfg.Logger,
		sources: map[Provider]*webhookSource{
			GitHub: {
				name:       "GitHub",
				normalize:  NormalizeGitHub,
				deliveryID: func(h http.Header) string { return h.Get(headerGitHubDelivery) },
			},
			GitLab: {
				name:       "GitLab",
				normalize:  NormalizeGitLab,
				deliveryID: gitLabDeliveryID,
			},
			Manual: {
				name:       "Standard Webhooks",
				normalize:  NormalizeDispatch,
				deliveryID: func(h http.Header) string { return h.Get(headerWebhookID) },
			},
		},
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if len(cfg.GitHubSecrets) > 0 {
		v, err := NewGitHubVerifier(cfg.GitHubSecrets)
		if err != nil {
			return nil, err
		}
		r.sources[GitHub].begin = v.begin
	}
	if len(cfg.GitLabTokens)+len(cfg.GitLabSigningTokens) > 0 {
		v, err := NewGitLabVerifier(GitLabVerifierConfig{
			Tokens:        cfg.GitLabTokens,
			SigningTokens: cfg.GitLabSigningTokens,
			Tolerance:     cfg.Tolerance,
			Now:           r.now,
		})
		if err != nil {
			return nil, err
		}
		r.sources[GitLab].begin = v.begin
	}
	if len(cfg.StandardSecrets) > 0 {
		v, err := NewStandardVerifier(StandardVerifierConfig{
			Secrets:   cfg.StandardSecrets,
			Tolerance: cfg.Tolerance,
			Now:       r.now,
		})
		if err != nil {
			return nil, err
		}
		r.sources[Manual].begin = v.begin
	}
	return r, nil
}

// ServeHTTP receives one delivery; see Receiver for the answers.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, webhookAnswer{Error: "webhooks are POST requests"})
		return
	}
	ctx := req.Context()
	provider, src := r.route(req.Header)
	if src == nil {
		r.refuse(ctx, w, r.log, http.StatusBadRequest, "", "no X-GitHub-Event, X-Gitlab-Event or webhook-id header: not a webhook this receiver knows")
		return
	}
	id := src.deliveryID(req.Header)
	if !validDeliveryID(id) {
		id = "" // not echoed: it would be refused anyway
	}
	log := r.log.With(slog.String("provider", string(provider)), slog.String("delivery_id", id))
	if src.begin == nil {
		r.refuse(ctx, w, log, http.StatusBadRequest, id, "this receiver accepts no "+src.name+" deliveries")
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "" {
		if media, _, err := mime.ParseMediaType(ct); err != nil || media != "application/json" {
			r.refuse(ctx, w, log, http.StatusUnsupportedMediaType, id, fmt.Sprintf("content type %q is not application/json; set the webhook's content type to JSON", ct))
			return
		}
	}
	if req.ContentLength > r.maxBody {
		r.refuse(ctx, w, log, http.StatusRequestEntityTooLarge, id, fmt.Sprintf("the body is larger than %d bytes", r.maxBody))
		return
	}
	// The headers are checked before the body is read, and the body is
	// verified as it arrives: a delivery that cannot pass costs no body.
	check, err := src.begin(req.Header)
	if err != nil {
		r.unverified(ctx, w, log, id, err)
		return
	}
	body, err := r.readBody(w, req, check)
	if err != nil {
		status, msg := http.StatusBadRequest, "reading the body: "+err.Error()
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			status, msg = http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", r.maxBody)
		} else if guarded, retryAfter := httpguard.Status(err); guarded != 0 {
			// Cut by the server's guard: too slow (408), or the budget
			// of bytes in flight is spent (503, transient).
			status = guarded
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
		}
		r.refuse(ctx, w, log, status, id, msg)
		return
	}
	received := r.now()

	if err := check.finish(); err != nil {
		r.unverified(ctx, w, log, id, err)
		return
	}
	// Normalization comes before the memory of what was published: the
	// delivery key (provider, hook, delivery id) is the normalized
	// event's, and a GitLab hook is the payload's object kind. A
	// normalized event always has a delivery id.
	res, err := src.normalize(&Webhook{Header: req.Header, Body: body, Received: received})
	if err != nil {
		r.refuse(ctx, w, log, http.StatusBadRequest, id, err.Error())
		return
	}
	if res.Ignored != nil {
		log.LogAttrs(ctx, slog.LevelDebug, "webhook ignored", slog.String("event", res.Ignored.Event), slog.String("reason", res.Ignored.Reason))
		writeJSON(w, http.StatusOK, webhookAnswer{Ignored: res.Ignored.Reason, DeliveryID: id})
		return
	}
	ev := res.Event
	key, _ := cacheKeys(ev)
	digest := rawDigest(body)
	outcome, seen, err := r.published.publish(ctx, key, digest, func() bool {
		return r.publishEvent(ctx, w, log, ev)
	})
	switch {
	case err != nil:
		log.LogAttrs(ctx, slog.LevelWarn, "webhook not published", slog.String("error", "waiting for its copy in flight: "+err.Error()))
		w.Header().Set("Retry-After", retryAfterSeconds)
		writeJSON(w, http.StatusServiceUnavailable, webhookAnswer{Error: "the event could not be stored; deliver it again later", DeliveryID: id})
	case outcome == duplicate:
		log.LogAttrs(ctx, slog.LevelDebug, "webhook redelivered", slog.String("outcome", "published before"))
		writeJSON(w, http.StatusAccepted, webhookAnswer{DeliveryID: id, Duplicate: true})
	case outcome == conflict:
		// Not a redelivery: a provider does not change a delivery's body.
		// A forgery with a leaked secret, or a sender's bug; either way
		// someone should look.
		log.LogAttrs(ctx, slog.LevelWarn, "webhook refused: conflicting redelivery", slog.Int("status", http.StatusConflict),
			slog.String("source", src.name), slog.String("hook_id", ev.HookID), slog.String("remote_addr", req.RemoteAddr),
			slog.String("digest_published", seen), slog.String("digest", digest))
		writeJSON(w, http.StatusConflict, webhookAnswer{
			Error:      "a delivery with this id was published with another body; a redelivery repeats the body, so this one is refused",
			DeliveryID: id,
		})
	}
}

// readBody reads a delivery's body, at most maxBody bytes, feeding check
// as it goes. The buffer grows with the bytes that arrived, not with the
// length announced: a sender that announces 25 MiB and sends nothing
// costs no 25 MiB.
func (r *Receiver) readBody(w http.ResponseWriter, req *http.Request, check bodyCheck) ([]byte, error) {
	var buf bytes.Buffer
	if req.ContentLength > 0 {
		buf.Grow(int(min(req.ContentLength, initialBodyBuffer)) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(io.TeeReader(http.MaxBytesReader(w, req.Body, r.maxBody), check))
	return buf.Bytes(), err
}

// unverified answers a delivery that failed verification.
func (r *Receiver) unverified(ctx context.Context, w http.ResponseWriter, log *slog.Logger, id string, err error) {
	log.LogAttrs(ctx, slog.LevelWarn, "webhook refused", slog.Int("status", http.StatusUnauthorized), slog.String("error", err.Error()))
	writeJSON(w, http.StatusUnauthorized, webhookAnswer{Error: verifyFailure(err), DeliveryID: id})
}

// publishEvent publishes a verified delivery's event and answers the
// request; it reports whether the event was published.
func (r *Receiver) publishEvent(ctx context.Context, w http.ResponseWriter, log *slog.Logger, ev *Event) bool {
	if err := r.publisher.Publish(ctx, ev); err != nil {
		if errors.Is(err, ErrEventTooLarge) {
			// Permanent: a retry would fail the same way.
			log.LogAttrs(ctx, slog.LevelWarn, "webhook refused", slog.Int("status", http.StatusRequestEntityTooLarge), slog.String("key", ev.Key()), slog.String("error", err.Error()))
			writeJSON(w, http.StatusRequestEntityTooLarge, webhookAnswer{Error: fmt.Sprintf("the event (%d bytes of payload) is larger than this server's event log accepts; it cannot be published", len(ev.Raw)), DeliveryID: ev.DeliveryID})
			return false
		}
		log.LogAttrs(ctx, slog.LevelError, "webhook not published", slog.String("key", ev.Key()), slog.String("error", err.Error()))
		w.Header().Set("Retry-After", retryAfterSeconds)
		writeJSON(w, http.StatusServiceUnavailable, webhookAnswer{Error: "the event could not be stored; deliver it again later", DeliveryID: ev.DeliveryID})
		return false
	}
	log.LogAttrs(ctx, slog.LevelDebug, "webhook published", slog.String("kind", string(ev.Kind)), slog.String("key", ev.Key()), slog.String("sha", ev.SHA))
	writeJSON(w, http.StatusAccepted, webhookAnswer{DeliveryID: ev.DeliveryID})
	return true
}

// route tells the provider of a delivery from its headers; nil when no
// provider's header is there.
func (r *Receiver) route(h http.Header) (Provider, *webhookSource) {
	switch {
	case h.Get(headerGitHubEvent) != "":
		return GitHub, r.sources[GitHub]
	case h.Get(headerGitLabEvent) != "":
		return GitLab, r.sources[GitLab]
	case h.Get(headerWebhookID) != "":
		return Manual, r.sources[Manual]
	}
	return "", nil
}

// verifyFailure is what a sender is told about a failed verification:
// the sentinel's text, and nothing of the detail wrapped around it.
func verifyFailure(err error) string {
	for _, sentinel := range []error{ErrMissingSignature, ErrTimestampOutsideTolerance} {
		if errors.Is(err, sentinel) {
			return sentinel.Error()
		}
	}
	return ErrSignatureMismatch.Error()
}

// webhookAnswer is the JSON body of every answer.
type webhookAnswer struct {
	Error string `json:"error,omitempty"`
	// Field names the input at fault, in a ManualTrigger's errors.
	Field      string `json:"field,omitempty"`
	Ignored    string `json:"ignored,omitempty"`
	DeliveryID string `json:"delivery_id,omitempty"`
	// Duplicate is set on the answer to a redelivery of an event
	// published before.
	Duplicate bool `json:"duplicate,omitempty"`
}

// refuse logs a delivery refused before it was verified, or for a
// malformed payload, and answers it.
func (r *Receiver) refuse(ctx context.Context, w http.ResponseWriter, log *slog.Logger, status int, id, msg string) {
	log.LogAttrs(ctx, slog.LevelWarn, "webhook refused", slog.Int("status", status), slog.String("error", msg))
	writeJSON(w, status, webhookAnswer{Error: msg, DeliveryID: id})
}

// writeJSON answers with status and v as JSON: the Receiver's and the
// ManualTrigger's answers.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	// The status is sent; a failure to write the rest is the sender's
	// connection failing, which the sender sees.
	_ = json.NewEncoder(w).Encode(v)
}

// Webhook is one delivery as a receiver read it: what the normalizers
// turn into an Event.
type Webhook struct {
	Header http.Header
	// Body is the request body exactly as received and verified; it
	// becomes the Event's Raw.
	Body []byte
	// Received is when the receiver read the delivery: the EventTime of
	// events whose payload gives no time of its own.
	Received time.Time
}

// Normalized is what a delivery means for the platform: either an Event
// to publish or, for a delivery that starts no pipeline, why not.
// Exactly one of the fields is set.
type Normalized struct {
	Event   *Event
	Ignored *Ignored
}

// Ignored says why a verified, well-formed delivery starts no pipeline:
// it is a ping, a deletion, a closed pull request, an event of no interest
// to CI. A receiver answers it with success, so the provider does not
// deliver it again.
type Ignored struct {
	// Event is the provider's name for what happened: GitHub's
	// X-GitHub-Event, GitLab's object_kind, a Standard Webhooks type.
	Event string `json:"event"`
	// Reason is a sentence for people.
	Reason string `json:"reason"`
}

// DispatchType is the Standard Webhooks event type of a request to run
// the pipelines of a ref, the payload a program sends a Receiver to
// start them:
//
//	{
//	  "type": "pipeline.dispatch",
//	  "timestamp": "2024-05-01T12:00:00Z",
//	  "data": {
//	    "repository": "acme/platform/api",
//	    "ref": "refs/heads/main",
//	    "sha": "<40 or 64 hex digits, optional>",
//	    "actor": "release-bot",
//	    "variables": {"DEPLOY": "staging"}
//	  }
//	}
//
// repository is split at its last slash into Org and Repo; ref must be a
// full branch or tag ref; timestamp, sha, actor and variables may be
// left out.
const DispatchType = "pipeline.dispatch"

// NormalizeDispatch turns a verified Standard Webhooks delivery into an
// Event of the Manual provider and KindDispatch, from a DispatchType
// payload; other types are ignored. DeliveryID is the webhook-id,
// EventTime the payload's timestamp, else the time the delivery was
// received. Without a sha, the consumer resolves the ref at the provider.
func NormalizeDispatch(wh *Webhook) (Normalized, error) {
	var p struct {
		Type      string `json:"type"`
		Timestamp string `json:"timestamp"`
		Data      *struct {
			Repository string            `json:"repository"`
			Ref        string            `json:"ref"`
			SHA        string            `json:"sha"`
			Actor      string            `json:"actor"`
			Variables  map[string]string `json:"variables"`
		} `json:"data"`
	}
	if err := decodePayload(wh.Body, &p); err != nil {
		return Normalized{}, fmt.Errorf("dispatch: %w", err)
	}
	switch p.Type {
	case DispatchType:
	case "":
		return Normalized{}, errors.New("dispatch: no type")
	default:
		return Normalized{Ignored: &Ignored{Event: p.Type, Reason: fmt.Sprintf("event type %q starts no pipeline; %q does", p.Type, DispatchType)}}, nil
	}
	d := p.Data
	if d == nil {
		return Normalized{}, errors.New("dispatch: no data")
	}
	org, repo, err := splitRepoPath("data.repository", d.Repository)
	if err != nil {
		return Normalized{}, fmt.Errorf("dispatch: %w", err)
	}
	refType, refName, err := splitRef(d.Ref)
	if err != nil {
		return Normalized{}, fmt.Errorf("dispatch: %w", err)
	}
	if refType == "" {
		return Normalized{}, fmt.Errorf("dispatch: ref %q is neither a branch nor a tag", d.Ref)
	}
	ev := &Event{
		Provider:   Manual,
		DeliveryID: wh.Header.Get(headerWebhookID),
		Kind:       KindDispatch,
		Org:        org,
		Repo:       repo,
		RefType:    refType,
		RefName:    refName,
		SHA:        d.SHA,
		Actor:      d.Actor,
		EventTime:  wh.Received,
	}
	if len(d.Variables) > 0 {
		ev.Variables = d.Variables
	}
	if p.Timestamp != "" {
		if ev.EventTime, err = parsePayloadTime("timestamp", p.Timestamp); err != nil {
			return Normalized{}, fmt.Errorf("dispatch: %w", err)
		}
	}
	return finishEvent(ev, wh, "dispatch", true)
}

// Normalization helpers shared by the providers.

// decodePayload unmarshals a JSON body into v. Its errors speak of the JSON, not
// of the Go types it is decoded into.
func decodePayload(body []byte, v any) error {
	err := json.Unmarshal(body, v)
	if typeErr, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		got, _, _ := strings.Cut(typeErr.Value, " ")
		if typeErr.Field == "" {
			return fmt.Errorf("malformed JSON: the body is a JSON %s, not an object", got)
		}
		return fmt.Errorf("malformed JSON: %s is a JSON %s, not %s", typeErr.Field, got, jsonKind(typeErr.Type))
	}
	if err != nil {
		return fmt.Errorf("malformed JSON: %w", err)
	}
	return nil
}

// jsonKind names the JSON values a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}

// finishEvent checks what every event must hold, so that nothing malformed
// reaches the topic, and completes it with the raw body. what names the
// payload in errors ("github push"); shaOptional allows an event without
// a SHA, for payloads that name no commit.
func finishEvent(ev *Event, wh *Webhook, what string, shaOptional bool) (Normalized, error) {
	if err := checkNormalized(ev, shaOptional); err != nil {
		return Normalized{}, fmt.Errorf("%s: %w", what, err)
	}
	ev.Raw = json.RawMessage(wh.Body)
	return Normalized{Event: ev}, nil
}

func checkNormalized(ev *Event, shaOptional bool) error {
	if ev.DeliveryID == "" {
		return errors.New("no delivery id")
	}
	if !validDeliveryID(ev.DeliveryID) || ev.HookID != "" && !validDeliveryID(ev.HookID) {
		return fmt.Errorf("the delivery or hook id is not 1 to %d printable ASCII characters", maxDeliveryIDLen)
	}
	if err := checkRepoPath(ev.Org, ev.Repo); err != nil {
		return err
	}
	if err := checkRefName("ref", ev.RefName); err != nil {
		return err
	}
	if ev.BaseRef != "" {
		if err := checkRefName("base ref", ev.BaseRef); err != nil {
			return err
		}
	}
	if ev.DefaultBranch != "" {
		if err := checkRefName("default branch", ev.DefaultBranch); err != nil {
			return err
		}
	}
	if ev.SHA == "" && !shaOptional {
		return errors.New("no commit SHA")
	}
	for _, sha := range []struct{ field, value string }{
		{"SHA", ev.SHA}, {"merge SHA", ev.MergeSHA}, {"before SHA", ev.Before},
	} {
		if sha.value != "" && !validSHA(sha.value) {
			return fmt.Errorf("%s %q is not 40 or 64 lowercase hex digits", sha.field, sha.value)
		}
	}
	if isZeroSHA(ev.SHA) || isZeroSHA(ev.MergeSHA) {
		return errors.New("the commit SHA is all zeros")
	}
	return nil
}

// maxDeliveryIDLen is the longest delivery or hook id accepted; providers send
// UUIDs and ids of a few dozen characters.
const maxDeliveryIDLen = 256

// validDeliveryID reports whether a delivery or hook id is 1 to maxDeliveryIDLen
// printable ASCII characters: ids are keys of the deduplication record,
// and invalid UTF-8 would not survive the Event's JSON.
func validDeliveryID(id string) bool {
	return id != "" && len(id) <= maxDeliveryIDLen && !strings.ContainsFunc(id, func(r rune) bool { return r < '!' || r > '~' })
}

// splitRef splits a full ref name into a branch or a tag and its short
// name. It returns an empty RefType, and no error, for a ref that is
// neither (refs/notes/…, refs/pull/…).
func splitRef(ref string) (RefType, string, error) {
	if ref == "" {
		return "", "", errors.New("no ref")
	}
	if name, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
		return RefBranch, name, nil
	}
	if name, ok := strings.CutPrefix(ref, "refs/tags/"); ok {
		return RefTag, name, nil
	}
	if !strings.HasPrefix(ref, "refs/") {
		return "", "", fmt.Errorf("ref %q is not a full ref name (refs/heads/… or refs/tags/…)", ref)
	}
	return "", "", nil
}

// checkRefName checks a branch or tag name by the rules of
// git check-ref-format --branch, so that a name is safe to hand to git
// and to use in keys.
func checkRefName(field, name string) error {
	if name == "" {
		return fmt.Errorf("no %s", field)
	}
	why := ""
	switch {
	case name == "@":
		why = `it is "@"`
	case strings.HasPrefix(name, "-"):
		why = "it begins with a dash"
	case strings.HasPrefix(name, "/"), strings.HasSuffix(name, "/"), strings.Contains(name, "//"):
		why = "it has an empty component"
	case strings.HasSuffix(name, "."):
		why = "it ends with a dot"
	case strings.Contains(name, ".."):
		why = `it contains ".."`
	case strings.Contains(name, "@{"):
		why = `it contains "@{"`
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) }):
		why = "it contains a control character, a space or one of ~^:?*[\\"
	}
	for comp := range strings.SplitSeq(name, "/") {
		if why == "" && (strings.HasPrefix(comp, ".") || strings.HasSuffix(comp, ".lock")) {
			why = `a component begins with a dot or ends with ".lock"`
		}
	}
	if why != "" {
		return fmt.Errorf("%s %q is not a valid branch or tag name: %s", field, name, why)
	}
	return nil
}

// splitRepoPath splits a repository path at its last slash into the
// namespace and the name: "acme/platform/api" is "acme/platform" and
// "api".
func splitRepoPath(field, path string) (org, repo string, err error) {
	if path == "" {
		return "", "", fmt.Errorf("no %s", field)
	}
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return "", "", fmt.Errorf("%s %q has no namespace", field, path)
	}
	return path[:i], path[i+1:], nil
}

// checkRepoPath checks that Org and Repo are paths GitHub and GitLab
// allow: slash-separated (only Org, for GitLab subgroups) components of
// letters, digits, '.', '_' and '-', none of them "." or "..". Events
// are keyed by them.
func checkRepoPath(org, repo string) error {
	if strings.Contains(repo, "/") {
		return fmt.Errorf("repository name %q contains a slash", repo)
	}
	for comp := range strings.SplitSeq(org+"/"+repo, "/") {
		if comp == "" || comp == "." || comp == ".." || strings.ContainsFunc(comp, func(r rune) bool {
			return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-')
		}) {
			return fmt.Errorf("repository %q is not a path of letters, digits, '.', '_' and '-'", org+"/"+repo)
		}
	}
	return nil
}

// validSHA reports whether s is a SHA-1 or SHA-256 object name in
// lowercase hex.
func validSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') })
}

// isZeroSHA reports whether s is the all-zeros name git gives a ref that
// does not exist (before its creation, after its deletion).
func isZeroSHA(s string) bool {
	return s != "" && strings.Trim(s, "0") == ""
}

// parsePayloadTime parses a timestamp of a payload: RFC 3339, or GitLab's older
// "2006-01-02 15:04:05 UTC". It returns the time in UTC, which must be
// within the years 0 to 9999 that an Event's JSON can hold: a zone offset
// can push a time written in one of them out.
func parsePayloadTime(field, s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339, "2006-01-02 15:04:05 MST", "2006-01-02 15:04:05 -0700"} {
		t, err := time.Parse(layout, s)
		if err != nil {
			continue
		}
		if t = t.UTC(); t.Year() < 0 || t.Year() > 9999 {
			return time.Time{}, fmt.Errorf("%s %q is before the year 0 or after 9999 in UTC", field, s)
		}
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%s %q is not a time in RFC 3339 or 2006-01-02 15:04:05 UTC form", field, s)
}

// unionPaths returns the non-empty paths of lists, sorted, each once.
func unionPaths(lists [][]string) []string {
	var paths []string
	for _, l := range lists {
		for _, p := range l {
			if p != "" {
				paths = append(paths, p)
			}
		}
	}
	slices.Sort(paths)
	return slices.Compact(paths)
}

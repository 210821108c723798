package ingest

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultTolerance is how far a signed webhook-timestamp may be from the
// verifier's clock, in either direction, unless configured otherwise: the
// window the Standard Webhooks libraries enforce.
const DefaultTolerance = 5 * time.Minute

// Standard Webhooks header names (https://www.standardwebhooks.com).
const (
	headerWebhookID        = "webhook-id"
	headerWebhookTimestamp = "webhook-timestamp"
	headerWebhookSignature = "webhook-signature"
)

// standardSecretPrefix marks a Standard Webhooks signing secret; the rest
// is the key, in standard base64.
const standardSecretPrefix = "whsec_"

// StandardVerifierConfig configures a StandardVerifier.
type StandardVerifierConfig struct {
	// Secrets are the signing secrets, "whsec_" followed by the key in
	// standard base64 (the prefix may be left out). Any one of them
	// passes. Required.
	Secrets []string
	// Tolerance is how far webhook-timestamp may be from Now, in either
	// direction. Default: DefaultTolerance.
	Tolerance time.Duration
	// Now is the clock timestamps are checked against. Default: time.Now.
	Now func() time.Time
}

// StandardVerifier checks deliveries signed the Standard Webhooks way:
// webhook-signature holds space-separated "v1,<base64>" entries, each an
// HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>", and
// webhook-timestamp, in unix seconds, must be within the tolerance of the
// clock. GitLab signs this way when a webhook has a signing token.
//
// A delivery passes when any v1 entry matches any configured secret, so
// both sides can rotate keys without downtime: a sender signs with the old
// and the new key for a while, a receiver accepts both for a while.
// Entries of other versions (v1a, the asymmetric scheme) are skipped.
type StandardVerifier struct {
	keys      [][]byte
	tolerance time.Duration
	now       func() time.Time
}

// NewStandardVerifier validates cfg and returns a verifier.
func NewStandardVerifier(cfg StandardVerifierConfig) (*StandardVerifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, errors.New("ingest: at least one Standard Webhooks secret is required")
	}
	if cfg.Tolerance < 0 {
		return nil, fmt.Errorf("ingest: Tolerance must not be negative, got %s", cfg.Tolerance)
	}
	v := &StandardVerifier{tolerance: cfg.Tolerance, now: cfg.Now}
	if v.tolerance == 0 {
		v.tolerance = DefaultTolerance
	}
	if v.now == nil {
		v.now = time.Now
	}
	for i, secret := range cfg.Secrets {
		key, err := standardKey(secret)
		if err != nil {
			return nil, fmt.Errorf("ingest: Standard Webhooks secret %d: %w", i, err)
		}
		v.keys = append(v.keys, key)
	}
	return v, nil
}

// Verify checks the webhook-id, webhook-timestamp and webhook-signature
// headers of h against body, exactly as received. It never parses body.
func (v *StandardVerifier) Verify(h http.Header, body []byte) error {
	return verifyBody(v.begin, h, body)
}

// begin checks the headers and the timestamp, before any of the body is
// read, and returns the check the body is fed to.
func (v *StandardVerifier) begin(h http.Header) (bodyCheck, error) {
	id, stamp, signatures := h.Get(headerWebhookID), h.Get(headerWebhookTimestamp), h.Get(headerWebhookSignature)
	for _, hv := range []struct{ name, value string }{
		{headerWebhookID, id},
		{headerWebhookTimestamp, stamp},
		{headerWebhookSignature, signatures},
	} {
		if hv.value == "" {
			return nil, fmt.Errorf("%w: no %s header", ErrMissingSignature, hv.name)
		}
	}
	// The signed content joins the id, the timestamp and the body with
	// dots; a dot in either header would let a signature of one split
	// pass for another.
	if strings.Contains(id, ".") {
		return nil, fmt.Errorf("%w: %s contains a dot", ErrSignatureMismatch, headerWebhookID)
	}
	sent, err := parseUnixSeconds(stamp)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrSignatureMismatch, headerWebhookTimestamp, err)
	}
	now := v.now()
	if skew := now.Sub(sent); skew > v.tolerance || skew < -v.tolerance {
		return nil, fmt.Errorf("%w: %s is %s from now, more than %s", ErrTimestampOutsideTolerance, headerWebhookTimestamp, skew.Abs(), v.tolerance)
	}

	var candidates [][]byte
	for entry := range strings.FieldsSeq(signatures) {
		version, encoded, _ := strings.Cut(entry, ",")
		if version != "v1" {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil || len(sig) != sha256.Size {
			continue
		}
		candidates = append(candidates, sig)
	}
	if len(candidates) == 0 {
		return nil, fmt.Errorf("%w: %s holds no v1 signature", ErrSignatureMismatch, headerWebhookSignature)
	}
	return newMACCheck(v.keys, []byte(id+"."+stamp+"."), candidates,
		fmt.Errorf("%w: none of the %d v1 signatures matches any of the %d secrets", ErrSignatureMismatch, len(candidates), len(v.keys))), nil
}

// SignStandard returns a webhook-signature entry, "v1,<base64>", for the
// delivery id sent at sent with body, under secret ("whsec_" and base64):
// for tests, and for programs that send webhooks to a Receiver.
func SignStandard(secret, id string, sent time.Time, body []byte) (string, error) {
	key, err := standardKey(secret)
	if err != nil {
		return "", err
	}
	prefix := []byte(id + "." + strconv.FormatInt(sent.Unix(), 10) + ".")
	return "v1," + base64.StdEncoding.EncodeToString(hmacSHA256(key, prefix, body)), nil
}

// standardKey decodes a "whsec_<base64>" secret into its key.
func standardKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, standardSecretPrefix))
	if err != nil {
		return nil, fmt.Errorf(`the secret is not "whsec_" and standard base64: %w`, err)
	}
	if len(key) == 0 {
		return nil, errors.New("the secret is empty")
	}
	return key, nil
}

// parseUnixSeconds parses a webhook-timestamp: decimal digits, without
// the sign strconv would accept.
func parseUnixSeconds(s string) (time.Time, error) {
	if strings.TrimLeft(s, "0123456789") != "" {
		return time.Time{}, fmt.Errorf("%q is not unix seconds", s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not unix seconds", s)
	}
	return time.Unix(n, 0), nil
}

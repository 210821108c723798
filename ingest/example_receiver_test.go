package ingest_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/cikit/cikit/ingest"
)

// printPublisher stands in for the Kafka producer: it prints what it is
// given.
type printPublisher struct{}

func (printPublisher) Publish(ctx context.Context, ev *ingest.Event) error {
	fmt.Printf("published %s %s %s by %s\n", ev.Kind, ev.Key(), ev.SHA[:7], ev.Actor)
	return nil
}

// A receiver takes a signed GitHub push, publishes its event and answers
// 202; a redelivery of it is answered 202 and not published again; a ping is answered 200 and not published; a forged delivery is
// refused.
func ExampleReceiver() {
	receiver, err := ingest.NewReceiver(ingest.ReceiverConfig{
		GitHubSecrets: []string{"webhook-secret"},
		Publisher:     printPublisher{},
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /hooks", receiver)

	deliver := func(event, body, secret string) {
		req := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", event)
		req.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
		req.Header.Set("X-Hub-Signature-256", ingest.SignGitHub(secret, []byte(body)))
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	push := `{"ref": "refs/heads/main", "after": "9f2c1d3e4b5a69788796a5b4c3d2e1f0a9b8c7d6",
		"repository": {"name": "api", "owner": {"login": "acme"}}, "sender": {"login": "alice"}}`
	deliver("push", push, "webhook-secret")
	deliver("push", push, "webhook-secret") // the provider delivers again
	deliver("ping", `{"zen": "Approachable is better than simple."}`, "webhook-secret")
	deliver("push", push, "a guess")
	// Output:
	// published push acme/api/branch/main 9f2c1d3 by alice
	// 202 {"delivery_id":"72d3162e-cc78-11e3-81ab-4c9367dc0958"}
	// 202 {"delivery_id":"72d3162e-cc78-11e3-81ab-4c9367dc0958","duplicate":true}
	// 200 {"ignored":"a ping only checks that the webhook is reachable","delivery_id":"72d3162e-cc78-11e3-81ab-4c9367dc0958"}
	// 401 {"error":"signature mismatch","delivery_id":"72d3162e-cc78-11e3-81ab-4c9367dc0958"}
}

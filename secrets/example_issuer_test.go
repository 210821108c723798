package secrets_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log"
	"time"

	"github.com/cikit/cikit/secrets"
)

// An issuer signs a job's ID token for a cloud's audience; the cloud (or
// the platform's own secret fetch) verifies it.
func ExampleIssuer() {
	ctx := context.Background()
	kek := make([]byte, secrets.KeyBytes)
	rand.Read(kek)
	keyring, err := secrets.NewKeyring(secrets.Key{ID: "kek-2026", Secret: kek})
	if err != nil {
		log.Fatal(err)
	}
	issuer, err := secrets.NewIssuer(ctx, secrets.IssuerConfig{
		URL:  "https://ci.example.com",
		Keys: secrets.NewMemoryKeyStore(keyring), // NewPostgresKeyStore for several processes
		Now:  func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		log.Fatal(err)
	}
	// Serve issuer.Handler() at https://ci.example.com, and run
	// issuer.Run(ctx) to rotate the keys.

	token, err := issuer.Issue(ctx, secrets.Identity{
		Repository:        "acme/api",
		Ref:               "refs/heads/main",
		Environment:       "prod",
		EventName:         "push",
		RunID:             "1234",
		RunAttempt:        1,
		JobID:             "deploy",
		RunnerEnvironment: "cikit-hosted",
	}, "sts.amazonaws.com")
	if err != nil {
		log.Fatal(err)
	}

	claims, err := issuer.Verifier("sts.amazonaws.com").Verify(ctx, token)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(claims.Subject)
	fmt.Println(claims.Audience, claims.Expiry.Sub(claims.IssuedAt))

	_, err = issuer.Verifier("storage.googleapis.com").Verify(ctx, token)
	fmt.Println(err)
	// Output:
	// repo:acme/api:environment:prod
	// [sts.amazonaws.com] 10m0s
	// secrets: invalid ID token: wrong audience "storage.googleapis.com": the token is for ["sts.amazonaws.com"]
}

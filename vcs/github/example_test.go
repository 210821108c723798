package github_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/github"
	"github.com/cikit/cikit/vcs/github/githubtest"
)

// A GitHub App reads a pipeline at a commit and posts a status on it;
// githubtest stands in for GitHub.
func Example_app() {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	srv := githubtest.NewServer(githubtest.Config{})
	srv.AddApp(1234, &key.PublicKey)
	if err := srv.CreateRepo("acme/api", "main"); err != nil {
		panic(err)
	}
	sha, err := srv.Commit("acme/api", "main", map[string]string{".cikit.yml": "jobs: {build: {}}"})
	if err != nil {
		panic(err)
	}
	if _, err := srv.Install(1234, "acme/api"); err != nil {
		panic(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	p, err := github.New(github.Config{
		BaseURL:    ts.URL, // https://HOST/api/v3/ for GitHub Enterprise Server
		HTTPClient: ts.Client(),
		AppID:      1234,
		PrivateKey: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	data, err := p.ReadFile(ctx, "acme/api", sha, ".cikit.yml")
	if err != nil {
		panic(err)
	}
	fmt.Println(string(data))
	err = p.SetStatus(ctx, "acme/api", sha, &vcs.Status{Context: "cikit/build", State: vcs.StateRunning, Description: "building"})
	if err != nil {
		panic(err)
	}
	statuses, err := srv.Statuses("acme/api", sha)
	if err != nil {
		panic(err)
	}
	fmt.Println(statuses[0].Context, statuses[0].State, statuses[0].Description)
	// Output:
	// jobs: {build: {}}
	// cikit/build pending building
}

// GitHub refusing a call for its rate limit is a *vcs.RateLimitError;
// the caller waits RetryAfter before trying again.
func Example_rateLimit() {
	now := func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }
	srv := githubtest.NewServer(githubtest.Config{Now: now})
	srv.AddToken("ghp_example")
	if err := srv.CreateRepo("acme/api", "main"); err != nil {
		panic(err)
	}
	srv.SetRateLimit(githubtest.RateLimit{Requests: 1, Window: time.Minute})
	ts := httptest.NewServer(srv)
	defer ts.Close()

	p, err := github.New(github.Config{BaseURL: ts.URL, HTTPClient: ts.Client(), Token: "ghp_example", Now: now})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 2 {
		branch, err := p.DefaultBranch(ctx, "acme/api")
		var rl *vcs.RateLimitError
		switch {
		case errors.As(err, &rl):
			fmt.Println("rate limited; retry after", rl.RetryAfter)
		case err != nil:
			panic(err)
		default:
			fmt.Println("default branch", branch)
		}
	}
	// Output:
	// default branch main
	// rate limited; retry after 1m0s
}

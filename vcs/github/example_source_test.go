package github_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"os"
	"time"

	"github.com/cikit/cikit/vcs/github"
	"github.com/cikit/cikit/vcs/github/githubtest"
)

// ExampleProvider_MintSource mints the read-only credential a runner
// fetches one job's commit with: an installation token narrowed to the
// one repository with contents: read, revoked when the job is done.
func ExampleProvider_MintSource() {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "github-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	srv := githubtest.NewServer(githubtest.Config{GitDir: dir}) // serves git at each repository's clone URL
	srv.AddApp(1234, &key.PublicKey)
	for _, repo := range []string{"acme/api", "acme/web"} {
		if err := srv.CreateRepo(repo, "main"); err != nil {
			panic(err)
		}
	}
	if _, err := srv.Install(1234, "acme/api", "acme/web"); err != nil {
		panic(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	p, err := github.New(github.Config{
		BaseURL:    ts.URL,
		HTTPClient: ts.Client(),
		AppID:      1234,
		PrivateKey: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	src, err := p.MintSource(ctx, "acme/api", 30*time.Minute)
	if err != nil {
		panic(err)
	}
	// git fetches src.URL with src.Username and src.Token as HTTP basic
	// credentials; String never shows the token. The token cannot read
	// acme/web, although the installation can.
	fmt.Println(src.URL == ts.URL+"/acme/api.git", src.String() == src.URL, src.Username)
	if err := p.RevokeSource(ctx, src); err != nil {
		panic(err)
	}
	fmt.Println(srv.Stats().TokensRevoked, "revoked")
	// Output:
	// true true x-access-token
	// 1 revoked
}

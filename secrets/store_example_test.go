package secrets_test

import (
	"context"
	"fmt"

	"github.com/cikit/cikit/secrets"
)

// The built-in store: secrets set in scopes, fetched for a job by the
// narrowest scope holding each name, then a key rotation.
func ExampleMemoryStore() {
	ctx := context.Background()
	oldKey, _ := secrets.ParseKey("2025:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=")
	kr, _ := secrets.NewKeyring(oldKey)
	store := secrets.NewMemoryStore(kr)

	_ = store.Set(ctx, secrets.OrgScope("acme"), "NPM_TOKEN", "npm-org-token")
	_ = store.Set(ctx, secrets.OrgScope("acme"), "DEPLOY_KEY", "org-deploy-key")
	_ = store.Set(ctx, secrets.EnvScope("acme/api", "prod"), "DEPLOY_KEY", "prod-deploy-key")

	got, _ := store.Fetch(ctx, secrets.Request{
		Scopes: []secrets.Scope{secrets.EnvScope("acme/api", "prod"), secrets.RepoScope("acme/api"), secrets.OrgScope("acme")},
		Names:  []string{"DEPLOY_KEY", "NPM_TOKEN", "MISSING"},
	})
	for _, s := range got {
		fmt.Println(s.Name, "from", s.Scope)
	}

	// Rotation: the new key first, the old one still there to open what
	// it sealed; Rewrap; then the new key alone.
	newKey, _ := secrets.ParseKey("2026:AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=")
	rotated, _ := secrets.NewKeyring(newKey, oldKey)
	n, _ := store.WithKeyring(rotated).Rewrap(ctx)
	fmt.Println("rewrapped", n)
	only, _ := secrets.NewKeyring(newKey)
	got, err := store.WithKeyring(only).Fetch(ctx, secrets.Request{Scopes: []secrets.Scope{secrets.OrgScope("acme")}, Names: []string{"NPM_TOKEN"}})
	fmt.Println(len(got), err)
	// Output:
	// DEPLOY_KEY from env:acme/api:prod
	// NPM_TOKEN from org:acme
	// rewrapped 3
	// 1 <nil>
}

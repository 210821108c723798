// Package authtest holds the conformance suite of auth.Store: the memory
// and the PostgreSQL store run it, so both keep one contract.
//
// # Stability
//
// Internal to cikit's tests; changes with package auth.
package authtest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/reference/auth"
)

// Factory returns two stores of one fresh, empty database for t, as two
// processes sharing it would have (the memory store: one store twice).
type Factory func(t *testing.T) (a, b auth.Store)

var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func user(login string, service bool) *auth.User {
	return &auth.User{ID: "usr_" + login, Login: login, Name: "The " + login, Email: login + "@example.com", Service: service, Created: t0}
}

func token(id, userID string, secret string) *auth.Token {
	return &auth.Token{ID: id, User: userID, Name: "ci " + id, Digest: auth.DigestOf(secret), Created: t0,
		Expires: t0.Add(24 * time.Hour), MaxRole: auth.RoleTrigger, Org: "acme", Repo: "api"}
}

// Exercise runs the suite against the stores f makes.
func Exercise(t *testing.T, f Factory) {
	ctx := context.Background()
	t.Run("Users", func(t *testing.T) {
		t.Parallel()
		s, _ := f(t)
		_, err := s.UserGet(ctx, "usr_nobody")
		require.ErrorIs(t, err, auth.ErrNotFound)
		require.NoError(t, s.UserCreate(ctx, user("bob", false)))
		require.NoError(t, s.UserCreate(ctx, user("alice", false)))
		require.NoError(t, s.UserCreate(ctx, user("deploy", true)))
		require.ErrorIs(t, s.UserCreate(ctx, &auth.User{ID: "usr_other", Login: "alice", Created: t0}), auth.ErrConflict, "logins are unique")
		require.ErrorIs(t, s.UserCreate(ctx, &auth.User{ID: "usr_alice", Login: "alice2", Created: t0}), auth.ErrConflict, "IDs are unique")
		got, err := s.UserByLogin(ctx, "alice")
		require.NoError(t, err)
		require.Equal(t, user("alice", false), got)
		got, err = s.UserGet(ctx, "usr_deploy")
		require.NoError(t, err)
		require.True(t, got.Service)
		list, err := s.UserList(ctx)
		require.NoError(t, err)
		require.Len(t, list, 3)
		require.Equal(t, []string{"alice", "bob", "deploy"}, []string{list[0].Login, list[1].Login, list[2].Login})
		require.NoError(t, s.UserSetDisabled(ctx, "usr_bob", true))
		got, err = s.UserGet(ctx, "usr_bob")
		require.NoError(t, err)
		require.True(t, got.Disabled)
		require.NoError(t, s.UserSetDisabled(ctx, "usr_bob", false))
		got, err = s.UserGet(ctx, "usr_bob")
		require.NoError(t, err)
		require.False(t, got.Disabled)
		require.ErrorIs(t, s.UserSetDisabled(ctx, "usr_nobody", true), auth.ErrNotFound)
	})

	t.Run("Identities", func(t *testing.T) {
		t.Parallel()
		s, _ := f(t)
		require.NoError(t, s.UserCreate(ctx, user("alice", false)))
		_, err := s.IdentityUser(ctx, "https://gitlab.example", "42")
		require.ErrorIs(t, err, auth.ErrNotFound)
		require.NoError(t, s.IdentityLink(ctx, "https://gitlab.example", "42", "usr_alice"))
		require.ErrorIs(t, s.IdentityLink(ctx, "https://gitlab.example", "42", "usr_alice"), auth.ErrConflict)
		id, err := s.IdentityUser(ctx, "https://gitlab.example", "42")
		require.NoError(t, err)
		require.Equal(t, "usr_alice", id)
		_, err = s.IdentityUser(ctx, "https://other.example", "42")
		require.ErrorIs(t, err, auth.ErrNotFound, "a subject is the issuer's")
	})

	t.Run("Tokens", func(t *testing.T) {
		t.Parallel()
		s, _ := f(t)
		require.NoError(t, s.UserCreate(ctx, user("alice", false)))
		require.NoError(t, s.UserCreate(ctx, user("bob", false)))
		a1, a2, b1 := token("tok_a1", "usr_alice", "s-a1"), token("tok_a2", "usr_alice", "s-a2"), token("tok_b1", "usr_bob", "s-b1")
		a2.Expires, a2.Org, a2.Repo, a2.MaxRole = time.Time{}, "", "", auth.RoleAdmin
		for _, tk := range []*auth.Token{a1, b1, a2} {
			require.NoError(t, s.TokenCreate(ctx, tk))
		}
		require.ErrorIs(t, s.TokenCreate(ctx, token("tok_a1", "usr_alice", "other")), auth.ErrConflict)
		require.ErrorIs(t, s.TokenCreate(ctx, token("tok_x", "usr_alice", "s-a1")), auth.ErrConflict, "digests are unique")
		require.ErrorIs(t, s.TokenCreate(ctx, token("tok_y", "usr_nobody", "s-y")), auth.ErrNotFound, "a token's user exists")

		got, err := s.TokenByDigest(ctx, auth.DigestOf("s-a1"))
		require.NoError(t, err)
		require.Equal(t, a1, got)
		got, err = s.TokenGet(ctx, "tok_a2")
		require.NoError(t, err)
		require.Equal(t, a2, got, "no expiry stays none")
		_, err = s.TokenByDigest(ctx, auth.DigestOf("s-unknown"))
		require.ErrorIs(t, err, auth.ErrNotFound)
		_, err = s.TokenGet(ctx, "tok_nope")
		require.ErrorIs(t, err, auth.ErrNotFound)

		list, err := s.TokenList(ctx, "usr_alice")
		require.NoError(t, err)
		require.Equal(t, []string{"tok_a1", "tok_a2"}, ids(list))
		list, err = s.TokenList(ctx, "")
		require.NoError(t, err)
		require.Equal(t, []string{"tok_a1", "tok_b1", "tok_a2"}, ids(list), "by creation")

		at := t0.Add(time.Hour)
		require.NoError(t, s.TokenTouch(ctx, "tok_a1", at, "192.0.2.7"))
		require.NoError(t, s.TokenRevoke(ctx, "tok_a1", at))
		require.NoError(t, s.TokenRevoke(ctx, "tok_a1", at.Add(time.Hour)), "revoking twice is not an error")
		got, err = s.TokenGet(ctx, "tok_a1")
		require.NoError(t, err)
		require.True(t, got.RevokedAt.Equal(at), "the first revocation stays")
		require.True(t, got.LastUsedAt.Equal(at))
		require.Equal(t, "192.0.2.7", got.LastUsedFrom)
		require.ErrorIs(t, s.TokenRevoke(ctx, "tok_nope", at), auth.ErrNotFound)
		require.ErrorIs(t, s.TokenTouch(ctx, "tok_nope", at, ""), auth.ErrNotFound)
	})

	t.Run("Bindings", func(t *testing.T) {
		t.Parallel()
		s, _ := f(t)
		bs := []auth.Binding{
			{User: "bob", Role: auth.RoleRead, Org: "acme"},
			{User: "alice", Role: auth.RoleTrigger, Org: "acme", Repo: "api"},
			{User: "alice", Role: auth.RoleAdmin},
			{User: "alice", Role: auth.RoleRead, Org: "acme", Repo: "api"},
		}
		for _, b := range bs {
			require.NoError(t, s.BindingGrant(ctx, b))
		}
		require.NoError(t, s.BindingGrant(ctx, bs[0]), "granting twice is not an error")
		got, err := s.BindingList(ctx, "alice")
		require.NoError(t, err)
		require.Equal(t, []auth.Binding{bs[2], bs[3], bs[1]}, got, "by org, repo, role")
		got, err = s.BindingList(ctx, "")
		require.NoError(t, err)
		require.Len(t, got, 4)
		require.NoError(t, s.BindingRevoke(ctx, bs[1]))
		require.ErrorIs(t, s.BindingRevoke(ctx, bs[1]), auth.ErrNotFound)
		got, err = s.BindingList(ctx, "alice")
		require.NoError(t, err)
		require.Equal(t, []auth.Binding{bs[2], bs[3]}, got)
		got, err = s.BindingList(ctx, "carol")
		require.NoError(t, err)
		require.Empty(t, got)
	})

	t.Run("Sessions", func(t *testing.T) {
		t.Parallel()
		s, _ := f(t)
		require.NoError(t, s.UserCreate(ctx, user("alice", false)))
		x := &auth.Session{Digest: auth.DigestOf("sid"), User: "usr_alice", CSRF: "csrf", Created: t0, Expires: t0.Add(12 * time.Hour), LastSeen: t0}
		require.NoError(t, s.SessionCreate(ctx, x))
		require.ErrorIs(t, s.SessionCreate(ctx, x), auth.ErrConflict)
		require.ErrorIs(t, s.SessionCreate(ctx, &auth.Session{Digest: auth.DigestOf("other"), User: "usr_nobody", Created: t0, Expires: t0, LastSeen: t0}), auth.ErrNotFound)
		got, err := s.SessionGet(ctx, x.Digest)
		require.NoError(t, err)
		require.Equal(t, x, got)
		require.NoError(t, s.SessionTouch(ctx, x.Digest, t0.Add(time.Minute)))
		got, err = s.SessionGet(ctx, x.Digest)
		require.NoError(t, err)
		require.True(t, got.LastSeen.Equal(t0.Add(time.Minute)))
		require.NoError(t, s.SessionDelete(ctx, x.Digest))
		require.NoError(t, s.SessionDelete(ctx, x.Digest), "deleting none is not an error")
		_, err = s.SessionGet(ctx, x.Digest)
		require.ErrorIs(t, err, auth.ErrNotFound)
		require.ErrorIs(t, s.SessionTouch(ctx, x.Digest, t0), auth.ErrNotFound)
	})

	t.Run("Audit", func(t *testing.T) {
		t.Parallel()
		s, _ := f(t)
		for i := range 7 {
			e := &auth.Entry{Time: t0.Add(time.Duration(i) * time.Second), Actor: []string{"alice", "bob"}[i%2],
				Action: []string{"run.cancel", "secret.set", "token.create"}[i%3], Target: fmt.Sprintf("run/R%d", i), Remote: "192.0.2.1", Outcome: "ok"}
			require.NoError(t, s.AuditAppend(ctx, e))
			require.NotEmpty(t, e.ID)
		}
		all, err := s.AuditList(ctx, auth.AuditQuery{})
		require.NoError(t, err)
		require.Len(t, all, 7)
		require.Equal(t, "run/R6", all[0].Target, "newest first")
		require.True(t, all[0].Time.Equal(t0.Add(6*time.Second)))
		page, err := s.AuditList(ctx, auth.AuditQuery{Limit: 3})
		require.NoError(t, err)
		require.Equal(t, []string{"run/R6", "run/R5", "run/R4"}, targets(page))
		page, err = s.AuditList(ctx, auth.AuditQuery{Limit: 3, Before: page[2].ID})
		require.NoError(t, err)
		require.Equal(t, []string{"run/R3", "run/R2", "run/R1"}, targets(page))
		page, err = s.AuditList(ctx, auth.AuditQuery{Actor: "alice", Action: "run.cancel"})
		require.NoError(t, err)
		require.Equal(t, []string{"run/R6", "run/R0"}, targets(page))
		page, err = s.AuditList(ctx, auth.AuditQuery{TargetPrefix: "run/R5"})
		require.NoError(t, err)
		require.Equal(t, []string{"run/R5"}, targets(page))
		page, err = s.AuditList(ctx, auth.AuditQuery{TargetPrefix: "secret/"})
		require.NoError(t, err)
		require.Empty(t, page)
		require.NotNil(t, page)
		for _, bad := range []auth.AuditQuery{{Limit: -1}, {Limit: auth.MaxAuditLimit + 1}, {Before: "x"}, {Before: "0"}} {
			_, err = s.AuditList(ctx, bad)
			require.ErrorIs(t, err, auth.ErrInvalid, "%+v", bad)
		}
	})

	t.Run("AdminBootstrapOnce", func(t *testing.T) {
		t.Parallel()
		a, b := f(t)
		var wg sync.WaitGroup
		created := make([]bool, 8)
		errs := make([]error, 8)
		for i := range 8 {
			wg.Go(func() {
				s := a
				if i%2 == 1 {
					s = b
				}
				p := &auth.BootstrapParams{User: auth.User{ID: "usr_admin" + strconv.Itoa(i), Login: "admin", Service: true, Created: t0},
					Token: auth.Token{ID: "tok_boot" + strconv.Itoa(i), Name: "bootstrap", Digest: auth.DigestOf("boot" + strconv.Itoa(i)), Created: t0, MaxRole: auth.RoleAdmin}}
				created[i], errs[i] = s.AdminBootstrap(ctx, p)
			})
		}
		wg.Wait()
		n := 0
		for i := range 8 {
			require.NoError(t, errs[i])
			if created[i] {
				n++
			}
		}
		require.Equal(t, 1, n, "exactly one bootstrap creates")
		users, err := a.UserList(ctx)
		require.NoError(t, err)
		require.Len(t, users, 1)
		tokens, err := b.TokenList(ctx, users[0].ID)
		require.NoError(t, err)
		require.Len(t, tokens, 1)
		bs, err := a.BindingList(ctx, "admin")
		require.NoError(t, err)
		require.Equal(t, []auth.Binding{{User: "admin", Role: auth.RoleAdmin}}, bs)
	})

	t.Run("AdminBootstrapKeepsAnExistingUser", func(t *testing.T) {
		t.Parallel()
		s, _ := f(t)
		// A user "admin" exists without the binding (a crash, a revoked
		// binding): bootstrap grants it rather than failing.
		require.NoError(t, s.UserCreate(ctx, user("admin", true)))
		ok, err := s.AdminBootstrap(ctx, &auth.BootstrapParams{User: auth.User{ID: "usr_new", Login: "admin", Created: t0},
			Token: auth.Token{ID: "tok_boot", Name: "bootstrap", Digest: auth.DigestOf("boot"), Created: t0, MaxRole: auth.RoleAdmin}})
		require.NoError(t, err)
		require.True(t, ok)
		tk, err := s.TokenGet(ctx, "tok_boot")
		require.NoError(t, err)
		require.Equal(t, "usr_admin", tk.User)
	})
}

func ids(ts []*auth.Token) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func targets(es []auth.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Target
	}
	return out
}

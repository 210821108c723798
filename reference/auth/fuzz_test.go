package auth_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cikit/cikit/reference/auth"
)

// FuzzAuthenticate: whatever a client sends as its Authorization header
// and session cookie, Authenticate neither panics nor lets anyone in but
// with the one real token: it answers nobody, or an error of
// authentication.
func FuzzAuthenticate(f *testing.F) {
	svc, err := auth.New(auth.Config{Store: auth.NewMemoryStore(), FailureBurst: 1 << 30, FailureEvery: time.Nanosecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	secret, _, err := svc.Bootstrap(context.Background())
	if err != nil {
		f.Fatal(err)
	}
	f.Add("Bearer "+secret, "")
	f.Add("Bearer "+secret[:len(secret)-1]+"x", "")
	f.Add("Bearer cikit_pat_", "")
	f.Add("bearer "+strings.ToUpper(secret), "")
	f.Add("Basic YWxpY2U6c2VjcmV0", "")
	f.Add("", "s3ss10n")
	f.Add("Bearer  "+secret, "x")
	f.Add("Bearer "+strings.Repeat("a", 10000), "")
	f.Fuzz(func(t *testing.T, header, cookie string) {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/me", nil)
		r.Header.Set("Authorization", header)
		if cookie != "" {
			r.Header.Set("Cookie", "__Host-cikit_session="+cookie+"; cikit_session="+cookie)
		}
		p, err := svc.Authenticate(r)
		switch {
		case err != nil:
			if p != nil {
				t.Fatalf("a principal with an error: %+v, %v", p, err)
			}
			if !errors.Is(err, auth.ErrUnauthenticated) && !errors.Is(err, auth.ErrRateLimited) && !errors.Is(err, auth.ErrCSRF) {
				t.Fatalf("an error of no kind: %v", err)
			}
		case p != nil:
			if strings.TrimSpace(strings.TrimPrefix(header, "Bearer ")) != secret {
				t.Fatalf("let in with header %q and cookie %q as %+v", header, cookie, p)
			}
		}
	})
}

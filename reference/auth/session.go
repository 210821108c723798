package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// The session cookie's names: with the __Host- prefix when it is Secure
// (the browser then takes it only from this host, over https, for Path
// /), without it on plain http.
const (
	SessionCookie       = "__Host-cikit_session"
	PlainSessionCookie  = "cikit_session"
	csrfHeader          = "X-CSRF-Token"
	sessionSecretLen    = 43 // 32 bytes, base64url without padding
	maxSessionCookieLen = 64
)

// CSRFHeader is the header a session request that changes something
// carries its CSRF token in.
const CSRFHeader = csrfHeader

func randomText() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *Service) sessionCookieName() string {
	if s.cfg.PlainHTTP {
		return PlainSessionCookie
	}
	return SessionCookie
}

// cookie returns a cookie of the Service's attributes: HttpOnly,
// SameSite=Lax, Path /, Secure unless the platform is plain http.
func (s *Service) cookie(name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true,
		Secure: !s.cfg.PlainHTTP, SameSite: http.SameSiteLaxMode}
}

// sessionCookie returns the session cookie's value, "" for none.
func (s *Service) sessionCookie(r *http.Request) string {
	c, err := r.Cookie(s.sessionCookieName())
	if err != nil {
		return ""
	}
	if c.Value == "" {
		return ""
	}
	if len(c.Value) > maxSessionCookieLen {
		return c.Value[:maxSessionCookieLen+1]
	}
	return c.Value
}

// SessionStart starts a web session for the user of userID and returns
// its cookie and CSRF token. The OIDC callback calls it; so may an
// embedder that signs users in its own way.
func (s *Service) SessionStart(ctx context.Context, userID string) (*http.Cookie, string, error) {
	u, err := s.store.UserGet(ctx, userID)
	if err != nil {
		return nil, "", err
	}
	if u.Disabled || u.Service {
		return nil, "", fmt.Errorf("%w: %s cannot sign in (disabled or a service account)", ErrForbidden, u.Login)
	}
	id, csrf, now := randomText(), randomText(), s.now().UTC()
	x := &Session{Digest: DigestOf(id), User: userID, CSRF: csrf, Created: now, Expires: now.Add(s.cfg.SessionTTL), LastSeen: now}
	if err := s.store.SessionCreate(ctx, x); err != nil {
		return nil, "", err
	}
	return s.cookie(s.sessionCookieName(), id, int(s.cfg.SessionTTL/time.Second)), csrf, nil
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

func (s *Service) session(r *http.Request, id string, now time.Time) (*Principal, error) {
	if len(id) != sessionSecretLen {
		return nil, fmt.Errorf("%w: the session cookie is malformed; sign in again", ErrUnauthenticated)
	}
	ctx, d := r.Context(), DigestOf(id)
	x, err := s.store.SessionGet(ctx, d)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: the session is unknown or ended; sign in again", ErrUnauthenticated)
	}
	if err != nil {
		return nil, err
	}
	ended := ""
	switch {
	case !now.Before(x.Expires):
		ended = "expired"
	case now.Sub(x.LastSeen) >= s.cfg.SessionIdle:
		ended = "was idle too long"
	}
	if ended != "" {
		if err := s.store.SessionDelete(ctx, d); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: the session %s; sign in again", ErrUnauthenticated, ended)
	}
	u, err := s.activeUser(ctx, x.User)
	if err != nil {
		return nil, err
	}
	if !safeMethod(r.Method) {
		got := r.Header.Get(csrfHeader)
		if subtle.ConstantTimeCompare([]byte(got), []byte(x.CSRF)) != 1 {
			return nil, fmt.Errorf("%w: send the session's CSRF token (GET /api/v1/me, csrf_token) as %s", ErrCSRF, csrfHeader)
		}
	}
	if now.Sub(x.LastSeen) >= touchEvery {
		if err := s.store.SessionTouch(ctx, d, now); err != nil {
			return nil, err
		}
	}
	return &Principal{Kind: KindSession, User: u.ID, Login: u.Login, CSRF: x.CSRF}, nil
}

// SessionEnd deletes r's session, if it has one, and returns the cookie
// that clears it in the browser.
func (s *Service) SessionEnd(r *http.Request) (*http.Cookie, error) {
	if id := s.sessionCookie(r); id != "" {
		if err := s.store.SessionDelete(r.Context(), DigestOf(id)); err != nil {
			return nil, err
		}
	}
	return s.cookie(s.sessionCookieName(), "", -1), nil
}

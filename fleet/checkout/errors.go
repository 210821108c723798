package checkout

import (
	"errors"
	"strings"

	"github.com/cikit/cikit"
)

// What went wrong with a checkout, for errors.Is. Every error Checkout
// returns is an *Error wrapping one of them (or the context's error when
// the caller's context ended).
var (
	// ErrCommitNotFound: the commit or ref does not exist in the
	// repository. A configuration error: every attempt would fail.
	ErrCommitNotFound = errors.New("commit or ref not found")
	// ErrRepositoryNotFound: the remote has no such repository (HTTP
	// 404). A configuration error.
	ErrRepositoryNotFound = errors.New("repository not found")
	// ErrAccessDenied: the remote refused the credential (HTTP 401 or
	// 403). An infrastructure failure for the run's own repository,
	// whose credential the platform minted; a configuration error for
	// another repository (Options.Repository) the job may not read.
	ErrAccessDenied = errors.New("access denied")
	// ErrUnreachable: the remote could not be reached or failed (DNS,
	// refused connection, TLS, 5xx, a transfer cut or stalled, the
	// checkout's timeout). An infrastructure failure, worth retrying.
	ErrUnreachable = errors.New("remote unreachable")
	// ErrInvalidRequest: the Request cannot be checked out as given (a
	// bad SHA, ref, path, strategy or submodule mode), or the repository
	// asks for what the runner refuses or cannot do (a submodule over
	// file:// or ssh, or without a URL). A configuration error.
	ErrInvalidRequest = errors.New("invalid checkout request")
	// ErrWorkspace: the runner could not write the cache or the
	// workspace (disk full, permissions). An infrastructure failure.
	ErrWorkspace = errors.New("workspace or cache failure")
)

// Error is a failed checkout: what failed (Err, one of the sentinels
// above), the failure class the executor reports the job with, and what
// git said, when git said something.
type Error struct {
	// Class is cikit.FailureConfig (not retried: the pipeline asks for
	// something that does not exist) or cikit.FailureInfrastructure
	// (retried by the job's policy).
	Class cikit.FailureClass
	// Op says what was being done ("fetch acme/api 1a2b3c…").
	Op string
	// Err is the sentinel, possibly joined with the context's error.
	Err error
	// Detail is the end of git's standard error, without credentials.
	Detail string
}

func (e *Error) Error() string {
	msg := "checkout: " + e.Op + ": " + e.Err.Error()
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// Class returns the failure class of a checkout error: the Error's
// Class, or cikit.FailureInfrastructure for any other non-nil error, ""
// for nil.
func Class(err error) cikit.FailureClass {
	if err == nil {
		return ""
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Class
	}
	return cikit.FailureInfrastructure
}

// classify maps what git wrote on standard error when talking to a
// remote to a sentinel. Git runs with LC_ALL=C, so the messages are
// English.
func classify(stderr string) error {
	s := strings.ToLower(stderr)
	has := func(subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(s, sub) {
				return true
			}
		}
		return false
	}
	switch {
	case has("transport '") && has("' not allowed"), has("no url found for submodule"):
		return ErrInvalidRequest
	case has("not our ref", "couldn't find remote ref", "unadvertised object", "no such remote ref",
		"is not a commit", "reference is not a tree", "not a valid object name"):
		return ErrCommitNotFound
	case has("returned error: 404", "' not found", "repository not found"):
		return ErrRepositoryNotFound
	case has("returned error: 401", "returned error: 403", "authentication failed", "could not read username",
		"could not read password", "terminal prompts disabled", "access denied"):
		return ErrAccessDenied
	}
	return ErrUnreachable
}

// classOf is the failure class of sentinel err for a checkout of the
// run's own repository (own) or another one.
func classOf(err error, own bool) cikit.FailureClass {
	switch {
	case errors.Is(err, ErrCommitNotFound), errors.Is(err, ErrRepositoryNotFound), errors.Is(err, ErrInvalidRequest):
		return cikit.FailureConfig
	case errors.Is(err, ErrAccessDenied) && !own:
		return cikit.FailureConfig
	}
	return cikit.FailureInfrastructure
}

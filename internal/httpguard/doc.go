// Package httpguard protects an HTTP server from clients that hold its
// memory or its connections: it bounds the request-body bytes in flight
// across all requests, cuts bodies that arrive too slowly, and limits the
// requests of each source.
//
// # Bodies
//
// Bodies wraps a handler. Every request with a body reserves its bytes
// from one budget shared by all requests (MaxBytesInFlight): the whole
// Content-Length before the handler runs, or the bytes as they are read
// for a body of unknown length. A request the budget cannot take is
// answered 503 with Retry-After before its handler runs (a body of
// unknown length fails its read with ErrBudget, which Status turns into
// the same answer); the reservation is released when the handler
// returns, since a handler keeps what it read until then.
//
// A body must keep arriving: reading starts a window of Timeout, and
// each window must bring MinRate × Timeout bytes (or the rest of the
// body), else the connection's read deadline passes and the read fails
// with ErrTooSlow (Status: 408). A body trickled a byte every few seconds
// is cut Timeout after it fell under the rate, whatever it sent before.
// The deadline is set through http.ResponseController on the
// connection, so it is lifted as soon as the body has been read: a long
// poll or a stream that follows a small body is not cut.
//
// # Sources
//
// Limiter gives each source (a client address) a token bucket and
// answers 429 with Retry-After when it is empty. It remembers at most
// MaxSources sources, the least recently seen going first. A source is
// the connection's remote address, an IPv6 address counted by its /64;
// X-Forwarded-For is believed only from the configured TrustedProxies.
//
// # Stability
//
// Internal to cikit; the reference platform wires it around every route.
package httpguard

// Package httpguardtest sends the requests a guarded server must cut:
// bodies that arrive fast and then trickle, over a raw connection, so
// that a test controls every byte.
//
// # Stability
//
// Internal to cikit; changes with its callers.
package httpguardtest

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// SlowRequest is a request whose body is sent Fast first, then a byte
// every Interval until Length bytes are sent.
type SlowRequest struct {
	Addr   string // host:port
	Method string // default POST
	Path   string
	Header http.Header
	// Length is the Content-Length announced.
	Length int
	// Fast is sent at once after the headers; at most Length bytes.
	Fast     []byte
	Interval time.Duration
}

// Outcome is how a SlowRequest ended.
type Outcome struct {
	// Status and RetryAfter are the answer's; Status is 0 when the
	// server closed the connection without one.
	Status     int
	RetryAfter string
	// Err is ctx's error when ctx ended first: the server neither
	// answered nor closed the connection in time.
	Err error
}

// Send sends r and returns when the server answered or closed the
// connection, or when ctx ends.
func Send(ctx context.Context, r SlowRequest) Outcome {
	conn, err := net.Dial("tcp", r.Addr)
	if err != nil {
		return Outcome{Err: err}
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	answered := make(chan Outcome, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			answered <- Outcome{}
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answered <- Outcome{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
	}()
	finish := func(o Outcome) Outcome {
		if ctx.Err() != nil {
			o.Err = ctx.Err()
		}
		return o
	}

	var head strings.Builder
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", cmp.Or(r.Method, http.MethodPost), r.Path, r.Addr, r.Length)
	_ = r.Header.Write(&head)
	head.WriteString("\r\n")
	if _, err := io.WriteString(conn, head.String()); err != nil {
		return finish(<-answered)
	}
	const chunk = 64 << 10
	for sent := 0; sent < len(r.Fast); sent += chunk {
		if _, err := conn.Write(r.Fast[sent:min(sent+chunk, len(r.Fast))]); err != nil {
			return finish(<-answered)
		}
		select {
		case o := <-answered:
			return finish(o)
		default:
		}
	}
	tick := time.NewTicker(r.Interval)
	defer tick.Stop()
	for range r.Length - len(r.Fast) {
		if _, err := conn.Write([]byte{' '}); err != nil {
			break
		}
		select {
		case o := <-answered:
			return finish(o)
		case <-tick.C:
		}
	}
	return finish(<-answered)
}

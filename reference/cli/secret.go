package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cikit/cikit/reference/api"
	"github.com/cikit/cikit/secrets"
)

// Environment of cikit secret.
const (
	// ServerEnv names the server cikit secret talks to when -server is
	// not given.
	ServerEnv = "CIKIT_SERVER"
	// TokenEnv holds the admin token of cikit secret when -token is not
	// given; prefer it to -token, which other users of the machine can
	// see in the process list.
	TokenEnv = "CIKIT_TOKEN"
	// DefaultServer is the server of cikit secret without -server and
	// CIKIT_SERVER: cikit serve's default listen address.
	DefaultServer = "http://127.0.0.1:8080"
)

// maxListBody bounds the answer of the list route that is read.
const maxListBody = 16 << 20

const secretUsage = `Usage: cikit secret <set|list|delete> [flags]

  cikit secret set -scope SCOPE [-value-file FILE] NAME
        set NAME to the value read from standard input (or FILE)
  cikit secret list -scope SCOPE
        list the secrets of SCOPE, without their values
  cikit secret delete -scope SCOPE NAME
        delete NAME of SCOPE

SCOPE is org:NAME, repo:OWNER/NAME or env:OWNER/NAME:ENVIRONMENT.
The server is -server, else $CIKIT_SERVER, else ` + DefaultServer + `;
the admin token is -token, else $CIKIT_TOKEN.
Run 'cikit secret <command> -h' for a command's flags.
`

func secretCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, secretUsage)
		if len(args) == 0 {
			return ExitInvalid
		}
		return ExitOK
	}
	switch args[0] {
	case "set":
		return secretSet(ctx, args[1:], stdin, stderr)
	case "list":
		return secretList(ctx, args[1:], stdout, stderr)
	case "delete":
		return secretDelete(ctx, args[1:], stderr)
	}
	fmt.Fprintf(stderr, "cikit secret: unknown command %q: use set, list or delete\n\n%s", args[0], secretUsage)
	return ExitInvalid
}

// secretClient is what the secret commands share: the server, the token
// and the scope.
type secretClient struct {
	server  *url.URL
	token   string
	scope   secrets.Scope
	timeout time.Duration
	what    string // "cikit secret set", for messages
}

type secretFlags struct {
	server, token, scope *string
	timeout              *time.Duration
}

func addSecretFlags(fs *flag.FlagSet) secretFlags {
	return secretFlags{
		server:  fs.String("server", "", "the cikit server's base URL (default $"+ServerEnv+", else "+DefaultServer+")"),
		token:   fs.String("token", "", "an admin token of the server (default $"+TokenEnv+", which other users cannot see)"),
		scope:   fs.String("scope", "", "the secrets' scope: org:NAME, repo:OWNER/NAME or env:OWNER/NAME:ENVIRONMENT (required)"),
		timeout: fs.Duration("timeout", 30*time.Second, "how long to wait for the server"),
	}
}

// client checks the flags and the names given after them (want of
// them), and returns the client and the names; or the exit code to
// return now.
func (f secretFlags) client(what string, fs *flag.FlagSet, want int, stderr io.Writer) (*secretClient, []string, int) {
	rest := fs.Args()
	for _, a := range rest {
		if strings.HasPrefix(a, "-") {
			fmt.Fprintf(stderr, "%s: flags go before the secret's name: %q\n", what, a)
			return nil, nil, ExitInvalid
		}
	}
	if len(rest) != want {
		switch want {
		case 0:
			fmt.Fprintf(stderr, "%s takes no argument, got %q\n", what, rest)
		default:
			fmt.Fprintf(stderr, "%s takes one secret NAME, got %d arguments", what, len(rest))
			if what == "cikit secret set" {
				fmt.Fprint(stderr, "; the value is read from standard input or -value-file, never from the command line")
			}
			fmt.Fprintln(stderr)
		}
		return nil, nil, ExitInvalid
	}
	for _, n := range rest {
		if err := secrets.ValidName(n); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", what, err)
			return nil, nil, ExitInvalid
		}
	}
	if *f.scope == "" {
		fmt.Fprintf(stderr, "%s: -scope is required: org:NAME, repo:OWNER/NAME or env:OWNER/NAME:ENVIRONMENT\n", what)
		return nil, nil, ExitInvalid
	}
	scope, err := secrets.ParseScope(*f.scope)
	if err != nil {
		fmt.Fprintf(stderr, "%s: -scope: %v\n", what, err)
		return nil, nil, ExitInvalid
	}
	raw := cmp.Or(*f.server, os.Getenv(ServerEnv), DefaultServer)
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		fmt.Fprintf(stderr, "%s: the server %q is not a base URL such as %s\n", what, raw, DefaultServer)
		return nil, nil, ExitInvalid
	}
	token := cmp.Or(*f.token, os.Getenv(TokenEnv))
	if token == "" {
		fmt.Fprintf(stderr, "%s: an admin token is required: set $%s (or -token)\n", what, TokenEnv)
		return nil, nil, ExitInvalid
	}
	if *f.timeout <= 0 {
		fmt.Fprintf(stderr, "%s: -timeout must be positive\n", what)
		return nil, nil, ExitInvalid
	}
	return &secretClient{server: u, token: token, scope: scope, timeout: *f.timeout, what: what}, rest, -1
}

// do sends a request to the secrets route path and returns the answer's
// body when its status is want.
func (c *secretClient) do(ctx context.Context, method, name string, body []byte, want int, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	u := c.server.JoinPath(api.Prefix, "secrets")
	if name != "" {
		u = u.JoinPath(name)
	}
	u.RawQuery = url.Values{"scope": {c.scope.String()}}.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		// The URL error names the server; it holds no token or value.
		return nil, fmt.Errorf("the server did not answer: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading the server's answer: %w", err)
	}
	if resp.StatusCode == want {
		if int64(len(b)) > limit {
			return nil, fmt.Errorf("the server's answer is over %d bytes", limit)
		}
		return b, nil
	}
	var e struct {
		Error string `json:"error"`
	}
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	if len(msg) > 1000 {
		msg = msg[:1000] + "…"
	}
	err = fmt.Errorf("the server answered %s: %s", resp.Status, msg)
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		err = fmt.Errorf("%w (is $%s an admin token of %s?)", err, TokenEnv, c.server.Redacted())
	}
	return nil, err
}

func (c *secretClient) fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "%s: %v\n", c.what, err)
	return ExitFailed
}

func secretSet(ctx context.Context, args []string, stdin io.Reader, stderr io.Writer) int {
	const what = "cikit secret set"
	fs := newFlags("secret set", "secret set -scope SCOPE [-value-file FILE] NAME", stderr)
	f := addSecretFlags(fs)
	valueFile := fs.String("value-file", "", "read the value from this file instead of standard input")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	c, names, code := f.client(what, fs, 1, stderr)
	if code >= 0 {
		return code
	}
	in, from := stdin, "standard input"
	if *valueFile != "" {
		file, err := os.Open(*valueFile)
		if err != nil {
			fmt.Fprintf(stderr, "%s: -value-file: %v\n", what, err)
			return ExitInvalid
		}
		defer file.Close()
		in, from = file, *valueFile
	} else if file, ok := stdin.(*os.File); ok {
		// A terminal, not any character device (/dev/null is one).
		if _, err := unix.IoctlGetTermios(int(file.Fd()), unix.TCGETS); err == nil {
			fmt.Fprintf(stderr, "Type the value of %s, then Enter and Ctrl-D (it is shown as you type; pipe it in to avoid that):\n", names[0])
		}
	}
	value, err := readValue(in)
	if err != nil {
		fmt.Fprintf(stderr, "%s: the value from %s: %v\n", what, from, err)
		return ExitInvalid
	}
	body, err := json.Marshal(api.SecretValue{Value: value})
	if err != nil {
		return c.fail(stderr, err)
	}
	if _, err := c.do(ctx, http.MethodPut, names[0], body, http.StatusNoContent, 4<<10); err != nil {
		return c.fail(stderr, err)
	}
	fmt.Fprintf(stderr, "set %s in %s\n", names[0], c.scope)
	return ExitOK
}

// readValue reads a secret's value, without one trailing newline (the
// one echo and editors add), and checks it as the server will.
func readValue(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, secrets.MaxValueBytes+3))
	if err != nil {
		return "", err
	}
	v := string(b)
	if s, ok := strings.CutSuffix(v, "\n"); ok {
		v = strings.TrimSuffix(s, "\r")
	}
	if len(v) > secrets.MaxValueBytes {
		return "", fmt.Errorf("the value is over %d bytes, the limit", secrets.MaxValueBytes)
	}
	if err := secrets.ValidValue(v); err != nil {
		return "", err
	}
	return v, nil
}

func secretList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const what = "cikit secret list"
	fs := newFlags("secret list", "secret list -scope SCOPE", stderr)
	f := addSecretFlags(fs)
	if code := parse(fs, args); code >= 0 {
		return code
	}
	c, _, code := f.client(what, fs, 0, stderr)
	if code >= 0 {
		return code
	}
	b, err := c.do(ctx, http.MethodGet, "", nil, http.StatusOK, maxListBody)
	if err != nil {
		return c.fail(stderr, err)
	}
	var list api.SecretList
	if err := json.Unmarshal(b, &list); err != nil {
		return c.fail(stderr, fmt.Errorf("the server's answer is not a list of secrets: %w", err))
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSCOPE\tUPDATED")
	for _, s := range list.Secrets {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, s.Scope, s.UpdatedAt.UTC().Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil {
		return c.fail(stderr, err)
	}
	if len(list.Secrets) == 0 {
		fmt.Fprintf(stderr, "no secrets in %s\n", c.scope)
	}
	return ExitOK
}

func secretDelete(ctx context.Context, args []string, stderr io.Writer) int {
	const what = "cikit secret delete"
	fs := newFlags("secret delete", "secret delete -scope SCOPE NAME", stderr)
	f := addSecretFlags(fs)
	if code := parse(fs, args); code >= 0 {
		return code
	}
	c, names, code := f.client(what, fs, 1, stderr)
	if code >= 0 {
		return code
	}
	if _, err := c.do(ctx, http.MethodDelete, names[0], nil, http.StatusNoContent, 4<<10); err != nil {
		return c.fail(stderr, err)
	}
	fmt.Fprintf(stderr, "deleted %s of %s\n", names[0], c.scope)
	return ExitOK
}

package auth

import (
	"crypto/rand"
	"fmt"
	"hash/crc32"
	"math/big"
	"strings"
)

// TokenKind is the kind of an API token, the part of its text after
// "cikit_".
type TokenKind string

// The kinds of token.
const (
	// KindPersonal: a person's token ("cikit_pat_…").
	KindPersonal TokenKind = "pat"
	// KindService: a service account's token ("cikit_svc_…").
	KindService TokenKind = "svc"
)

// A token's text: "cikit_", its kind and "_", then tokenBodyLen base62
// characters of 32 random bytes and tokenSumLen of a CRC-32 of all
// before them, so that a mistyped or altered token is refused without a
// store lookup.
const (
	tokenPrefix  = "cikit_"
	tokenBodyLen = 43 // 62^43 > 2^256
	tokenSumLen  = 6  // 62^6 > 2^32
	// TokenLen is the length of every token's text.
	TokenLen = len(tokenPrefix) + 4 + tokenBodyLen + tokenSumLen
)

// base62 pads the base-62 text of n to width.
func base62(n *big.Int, width int) string {
	s := n.Text(62)
	return strings.Repeat("0", width-len(s)) + s
}

func tokenSum(s string) string {
	return base62(new(big.Int).SetUint64(uint64(crc32.ChecksumIEEE([]byte(s)))), tokenSumLen)
}

// newTokenText returns a fresh token of kind.
func newTokenText(kind TokenKind) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	s := tokenPrefix + string(kind) + "_" + base62(new(big.Int).SetBytes(b), tokenBodyLen)
	return s + tokenSum(s)
}

// checkTokenText says why s cannot be a token this package made, or
// returns nil.
func checkTokenText(s string) error {
	if len(s) != TokenLen || !strings.HasPrefix(s, tokenPrefix) {
		return fmt.Errorf("%w: the bearer token is not a cikit token (cikit_pat_… or cikit_svc_…, %d characters)", ErrUnauthenticated, TokenLen)
	}
	kind := TokenKind(s[len(tokenPrefix) : len(tokenPrefix)+3])
	if (kind != KindPersonal && kind != KindService) || s[len(tokenPrefix)+3] != '_' {
		return fmt.Errorf("%w: the bearer token has an unknown kind %q", ErrUnauthenticated, kind)
	}
	for _, c := range s[len(tokenPrefix)+4:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return fmt.Errorf("%w: the bearer token has a character a cikit token does not", ErrUnauthenticated)
		}
	}
	body := s[:len(s)-tokenSumLen]
	if tokenSum(body) != s[len(s)-tokenSumLen:] {
		return fmt.Errorf("%w: the bearer token's checksum does not match: it was mistyped or altered", ErrUnauthenticated)
	}
	return nil
}

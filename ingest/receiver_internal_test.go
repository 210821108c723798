package ingest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCheckRefName(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"main", "feature/login", "release/1.2", "v1.2.0", "fix_#12", "ünïcode", "a.b/c-d", "x@y", "HEAD2",
	} {
		require.NoError(t, checkRefName("ref", name), name)
	}
	for _, name := range []string{
		"", "@", "-x", "/x", "x/", "x//y", "x.", "x..y", "x@{1}", ".x", "x/.y", "x.lock", "x/y.lock/z",
		"x y", "x~1", "x^", "x:y", "x?", "x*", "x[1]", `x\y`, "x\ty", "x\x00", "x\x7f",
	} {
		require.Error(t, checkRefName("ref", name), "%q", name)
	}
	require.EqualError(t, checkRefName("base ref", "a..b"), `base ref "a..b" is not a valid branch or tag name: it contains ".."`)
}

func TestCheckRepoPath(t *testing.T) {
	t.Parallel()
	for _, p := range [][2]string{
		{"acme", "api"}, {"acme/platform", "api"}, {"a-b_c.d", "e.f-g_h"}, {"Octocoders", "Hello-World"},
	} {
		require.NoError(t, checkRepoPath(p[0], p[1]), "%q", p)
	}
	for _, p := range [][2]string{
		{"", "api"}, {"acme", ""}, {"acme", "a/b"}, {"acme//x", "api"}, {"/acme", "api"}, {"acme", ".."},
		{"..", "api"}, {"acme/.", "api"}, {"acme", "a b"}, {"acme", "api\n"}, {"ac%me", "api"}, {"acme", "äpi"},
	} {
		require.Error(t, checkRepoPath(p[0], p[1]), "%q", p)
	}
}

func TestValidSHA(t *testing.T) {
	t.Parallel()
	require.True(t, validSHA("6113728f27ae82c7b1a177c8d03f9e96e0adf246"))
	require.True(t, validSHA("6113728f27ae82c7b1a177c8d03f9e96e0adf2466113728f27ae82c7b1a177c8"))
	for _, s := range []string{
		"", "6113728", "6113728F27AE82C7B1A177C8D03F9E96E0ADF246", "6113728f27ae82c7b1a177c8d03f9e96e0adf24g",
		"6113728f27ae82c7b1a177c8d03f9e96e0adf2460", "--upload-pack=xxxxxxxxxxxxxxxxxxxxxxxxx",
	} {
		require.False(t, validSHA(s), s)
	}
	require.True(t, isZeroSHA("0000000000000000000000000000000000000000"))
	require.False(t, isZeroSHA(""))
	require.False(t, isZeroSHA("0000000000000000000000000000000000000001"))
}

func TestSplitRef(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ref     string
		refType RefType
		name    string
		err     bool
	}{
		{"refs/heads/main", RefBranch, "main", false},
		{"refs/heads/feature/x", RefBranch, "feature/x", false},
		{"refs/tags/v1", RefTag, "v1", false},
		{"refs/notes/commits", "", "", false},
		{"refs/pull/1/head", "", "", false},
		{"main", "", "", true},
		{"", "", "", true},
	} {
		refType, name, err := splitRef(tc.ref)
		require.Equal(t, tc.err, err != nil, tc.ref)
		require.Equal(t, tc.refType, refType, tc.ref)
		require.Equal(t, tc.name, name, tc.ref)
	}
}

func TestParseTime(t *testing.T) {
	t.Parallel()
	want := time.Date(2017, 9, 15, 16, 50, 55, 0, time.UTC)
	for _, s := range []string{"2017-09-15T16:50:55Z", "2017-09-15T18:50:55+02:00", "2017-09-15 16:50:55 UTC", "2017-09-15 18:50:55 +0200"} {
		got, err := parsePayloadTime("updated_at", s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
		require.Equal(t, time.UTC, got.Location(), s)
	}
	_, err := parsePayloadTime("updated_at", "15/09/2017")
	require.EqualError(t, err, `updated_at "15/09/2017" is not a time in RFC 3339 or 2006-01-02 15:04:05 UTC form`)
	// Times an Event's JSON cannot hold.
	_, err = parsePayloadTime("updated_at", "0000-01-01T00:00:00+01:00")
	require.EqualError(t, err, `updated_at "0000-01-01T00:00:00+01:00" is before the year 0 or after 9999 in UTC`)
	_, err = parsePayloadTime("updated_at", "9999-12-31 23:30:00 -0100")
	require.Error(t, err)
	got, err := parsePayloadTime("updated_at", "0000-01-01T00:00:00Z")
	require.NoError(t, err)
	require.Zero(t, got.Year())
}

func TestValidID(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"72d3162e-cc78-11e3-81ab-4c9367dc0958", "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", "1", strings.Repeat("a", maxDeliveryIDLen)} {
		require.True(t, validDeliveryID(id), id)
	}
	for _, id := range []string{"", "a b", "a\nb", "\x80", "é", strings.Repeat("a", maxDeliveryIDLen+1)} {
		require.False(t, validDeliveryID(id), "%q", id)
	}
}

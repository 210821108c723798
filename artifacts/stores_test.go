package artifacts

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// keyText draws short strings from runes that sit at the edges of byte
// order and of LIKE's syntax.
func keyText(minRunes, maxRunes int) *rapid.Generator[string] {
	r := rapid.SampledFrom([]rune{'a', 'b', '-', '%', '_', '\\', 0x7F, 'é', 0xD7FF, 0xE000, 0x10FFFE, 0x10FFFF})
	return rapid.Custom(func(t *rapid.T) string {
		return string(rapid.SliceOfN(r, minRunes, maxRunes).Draw(t, "runes"))
	})
}

// TestPrefixEnd checks SAFETY of the key ranges restore keys become: a
// key is in [p, prefixEnd(p)) exactly when it begins with p.
func TestPrefixEnd(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		p := keyText(0, 4).Draw(t, "prefix")
		key := keyText(0, 6).Draw(t, "key")
		if rapid.Bool().Draw(t, "extend") {
			key = p + key
		}
		end := prefixEnd(p)
		if in, has := key >= p && key < end, strings.HasPrefix(key, p); in != has {
			t.Fatalf("key %q, prefix %q, end %q: in the range %v, has the prefix %v", key, p, end, in, has)
		}
	})
	for _, p := range []string{"", "\U0010FFFF", "\U0010FFFF\U0010FFFF"} {
		longest := p + strings.Repeat("\U0010FFFF", (MaxNameLen-len(p))/4)
		if end := prefixEnd(p); longest >= end {
			t.Errorf("prefix %q: the longest key of U+10FFFF %q is not below the end", p, longest)
		}
	}
}

// FuzzPrefixEnd checks, for restore keys and cache keys anyone may
// choose, the invariant TestPrefixEnd checks: a key of at most MaxNameLen
// bytes of UTF-8 is in [p, prefixEnd(p)) exactly when it begins with p.
func FuzzPrefixEnd(f *testing.F) {
	for _, seed := range [][2]string{{"linux-", "linux-go"}, {"a%", "axb"}, {`a\`, `a\_`}, {"\U0010FFFF", "\U0010FFFF\U0010FFFFz"}, {"", "k"}, {"\uD7FF", "\uE000"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, p, key string) {
		if checkText("p", p, MaxNameLen) != nil || checkText("key", key, MaxNameLen) != nil {
			return
		}
		end := prefixEnd(p)
		if in, has := key >= p && key < end, strings.HasPrefix(key, p); in != has {
			t.Fatalf("key %q, prefix %q, end %q: in the range %v, has the prefix %v", key, p, end, in, has)
		}
	})
}

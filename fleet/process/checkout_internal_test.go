package process

import (
	"slices"
	"testing"
)

// FuzzCheckoutInputs maps arbitrary actions/checkout inputs: it never
// panics, and what it accepts is a valid checkout (a depth of -1 or more,
// a known submodule mode, a path only where the input said) or an error.
func FuzzCheckoutInputs(f *testing.F) {
	f.Add("fetch-depth", "0", "submodules", "recursive")
	f.Add("fetch-depth", "-3", "clean", "maybe")
	f.Add("path", "../x", "lfs", "true")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		opts, ignored, err := checkoutInputs(map[string]string{k1: v1, k2: v2}, "acme/app")
		if err != nil {
			return
		}
		if opts.Depth < -1 || !slices.Contains([]string{"", "normal", "recursive"}, opts.Submodules) || opts.Strategy != "fetch" {
			t.Fatalf("%+v from %q=%q %q=%q", opts, k1, v1, k2, v2)
		}
		if opts.Path != "" && k1 != "path" && k2 != "path" {
			t.Fatalf("a path from nowhere: %+v", opts)
		}
		for _, k := range ignored {
			if k != k1 && k != k2 {
				t.Fatalf("ignored %q, which was not given", k)
			}
		}
	})
}

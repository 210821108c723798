package autoscale_test

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

// TestMain raises rapid's default from 100 to 1,000 generated cases per
// property, unless -rapid.checks is given or the run is -short.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set && !testing.Short() {
		if err := flag.Set("rapid.checks", "1000"); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(m)
}

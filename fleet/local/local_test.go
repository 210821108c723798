package local_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/fleettest"
	"github.com/cikit/cikit/fleet/local"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The runners' shared HTTP client keeps idle connections to the
		// suite's servers until they close.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
}

func newBackend(t *testing.T) fleet.Backend {
	b, err := local.New(local.Config{Labels: []string{"linux", "local", "x64"}, MaxRunners: 8, Wait: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

func TestConformance(t *testing.T) {
	fleettest.Exercise(t, fleettest.Config{New: newBackend, Labels: []string{"linux", "local"}})
}

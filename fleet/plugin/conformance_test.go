package plugin_test

import (
	"testing"

	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/fleettest"
	"github.com/cikit/cikit/fleet/plugin"
)

// TestConformance runs examples/backend-plugin, a plugin process per
// subtest, through the Backend conformance suite: what a backend
// guarantees holds across the plugin boundary.
func TestConformance(t *testing.T) {
	t.Parallel()
	bin := build(t, "github.com/cikit/cikit/examples/backend-plugin")
	fleettest.Exercise(t, fleettest.Config{
		New: func(t *testing.T) fleet.Backend {
			h, _ := open(t, plugin.Config{Path: bin, Args: []string{"-labels", "linux,x64,example", "-max-runners", "8", "-wait", "500ms"}})
			return h
		},
		Labels: []string{"linux", "example"},
	})
}

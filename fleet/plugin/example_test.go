package plugin_test

import (
	"context"
	"log/slog"

	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/plugin"
)

// The platform's side: start the plugin and use it as a fleet.Backend.
func ExampleOpen() {
	ctx := context.Background()
	log := slog.Default()
	b, err := plugin.Open(ctx, plugin.Config{
		Path: "/usr/local/libexec/cikit/backend-plugin",
		Args: []string{"-labels", "linux,x64"},
		OnRestart: func(lost, adopted []*fleet.Instance) {
			log.Warn("the runner plugin restarted", "lost", len(lost), "adopted", len(adopted))
		},
		Logger: log,
	})
	if err != nil {
		log.Error("starting the runner plugin", "error", err)
		return
	}
	defer b.Close()
	runner, err := b.Provision(ctx, &fleet.ProvisionRequest{ID: "linux-1", Pool: "linux", Labels: []string{"linux"},
		Server: "https://ci.example.com", RegistrationToken: "…"})
	if err != nil {
		log.Error("provisioning", "error", err)
		return
	}
	log.Info("provisioned", "runner", runner.ID, "state", runner.State)
}

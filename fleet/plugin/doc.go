// Package plugin runs custom runner backends (fleet.Backend) as separate
// programs: hashicorp/go-plugin processes that the platform starts and
// talks to over gRPC. A platform team writes its backend — VMs in its
// cloud, pods, machines in a lab — in its own binary, with its own
// dependencies, and the fleet uses it like a built-in one.
//
// # Writing a plugin
//
// The plugin's main builds its fleet.Backend and calls Serve:
//
//	func main() {
//		plugin.Serve(&myBackend{log: plugin.NewLogger()})
//	}
//
// examples/backend-plugin is a complete one to copy. The backend must pass
// fleet/fleettest.Exercise like any other; test it in process, then
// through a Host.
//
// # Running a plugin
//
// Open starts the binary and returns a Host, a fleet.Backend:
//
//	b, err := plugin.Open(ctx, plugin.Config{Path: "/usr/libexec/cikit/backend-vm", Logger: log})
//	...
//	defer b.Close()
//
// # Guarantees
//
//   - Context: every call carries its context's deadline and cancellation
//     to the plugin (gRPC sends them); when it ends, the call returns at
//     once with an error matching context.Canceled or
//     context.DeadlineExceeded, and the plugin's backend sees its context
//     end too.
//   - Errors keep their meaning: an error of the plugin's backend that
//     matches cikit.ErrNotFound, fleet.ErrLabelsUnsupported,
//     fleet.ErrCapacity, context.Canceled or context.DeadlineExceeded
//     matches it on the host's side too (errors.Is), with the plugin's
//     message as its text (*RemoteError). The wire carries a gRPC status
//     code and an ErrorInfo reason.
//   - Logs: what the plugin logs through NewLogger reaches the host's
//     Config.Logger with its level and attributes; what it prints lands
//     there too, a record a line.
//   - Restarts: when the plugin process exits (it crashed, or was
//     killed), the Host starts it again after a delay that doubles with
//     each failure (Config.MinRestartDelay to MaxRestartDelay). Calls
//     made meanwhile wait for the restart, up to their context; calls
//     in flight when it exited fail with ErrUnavailable; while starts
//     fail, calls fail at once with ErrUnavailable and the start's error.
//   - Reconciliation: after a restart the Host lists the new plugin's
//     runners before it answers any call. Runners the host knew of that
//     had not ended and that the plugin no longer holds are lost: the
//     Host reports them as InstanceFailed with LostMessage, from Instance
//     and Instances, until they are destroyed — so that the fleet
//     replaces them. The runners the plugin holds are adopted: the Host
//     reports them as the plugin does. Config.OnRestart hears of both.
//   - Close stops the plugin and every goroutine of the Host. A plugin
//     whose host was killed, and so could not stop it, notices within a
//     second, closes its backend and exits.
//
// # The protocol
//
// go-plugin's handshake — the host puts
// CIKIT_BACKEND_PLUGIN=8d1f3c2e-cikit-fleet-backend in the plugin's
// environment and accepts protocol version ProtocolVersion — then gRPC
// over a Unix socket with mutual TLS, serving the service of
// internal/pb/backend.proto. A plugin in another language implements that
// service and go-plugin's handshake.
//
// # Stability
//
// The protocol is versioned: fields may be added to its messages, and
// an incompatible change gets a new ProtocolVersion. The Go API may still
// change.
package plugin

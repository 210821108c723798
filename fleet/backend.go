package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Backend provisions runners: the machines, VMs, sandboxes or processes
// that run a runner agent (package fleet/agent) registering with the
// platform. The fleet's Manager asks a Backend for runners for a pool's
// labels, watches their state, and destroys them when the pool shrinks or,
// for single-use runners, after their job.
//
// Every method takes a context and must return soon after it ends.
// Implementations must be safe for concurrent use. The conformance suite
// fleet/fleettest.Exercise checks the contract; built-in backends and
// plugins (package fleet/plugin) pass it.
type Backend interface {
	// Info describes the backend: the labels it can give runners, its
	// capacity and its cost and start-up hints.
	Info(ctx context.Context) (*BackendInfo, error)
	// Provision starts a runner for req and returns it, possibly still
	// InstanceProvisioning. The runner's agent registers with
	// req.Server using req.RegistrationToken, named req.ID, with
	// req.Labels; when req.Ephemeral it takes one job and exits.
	// Provision is idempotent by req.ID: asking again for an ID that
	// exists returns that instance. A label the backend cannot give is
	// refused with an error wrapping ErrLabelsUnsupported; a backend at
	// its capacity refuses with ErrCapacity.
	Provision(ctx context.Context, req *ProvisionRequest) (*Instance, error)
	// Instance reports the state of one runner; an ID the backend does
	// not know (or no longer knows: destroyed runners may be forgotten)
	// is an error wrapping cikit.ErrNotFound.
	Instance(ctx context.Context, id string) (*Instance, error)
	// Instances lists every runner the backend holds, in any state,
	// ordered by ID. The Manager reconciles its view with it.
	Instances(ctx context.Context) ([]*Instance, error)
	// Destroy stops a runner, killing any job it runs, and releases
	// everything it held. Destroying a runner that is already gone, or
	// that the backend does not know, is not an error.
	Destroy(ctx context.Context, id string) error
}

// BackendInfo describes a Backend.
type BackendInfo struct {
	// Name names the backend in logs and answers, such as "local".
	Name string
	// Labels are the labels the backend can give runners; nil means any.
	Labels []string
	// MaxRunners is how many runners the backend can hold at once; 0
	// means no known limit.
	MaxRunners int
	// StartupHint is the typical time from Provision to a runner waiting
	// for work: the autoscaler's estimate of a scale-up's delay.
	StartupHint time.Duration
	// CostPerHour is the cost of one runner for an hour, in a unit of
	// the operator's choice (only ratios between pools matter).
	CostPerHour float64
	// Isolation says what separates one job from others and the host,
	// such as "bubblewrap", "process" or "vm".
	Isolation string
}

// ProvisionRequest asks a Backend for a runner.
type ProvisionRequest struct {
	// ID names the runner: unique, chosen by the caller, at most 128
	// printable ASCII characters. The agent registers under this name.
	ID string
	// Pool is the runner pool the runner belongs to.
	Pool string
	// Labels are the labels the runner registers with.
	Labels []string
	// Server is the platform's base URL the agent registers with.
	Server string
	// RegistrationToken registers the agent.
	RegistrationToken string
	// Ephemeral runners take one job and exit.
	Ephemeral bool
}

// Validate reports what is wrong with r, if anything.
func (r *ProvisionRequest) Validate() error {
	if err := validInstanceID(r.ID); err != nil {
		return err
	}
	if r.Server == "" || r.RegistrationToken == "" {
		return errors.New("fleet: a ProvisionRequest needs a Server and a RegistrationToken")
	}
	return validLabels(r.Labels)
}

func validInstanceID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("fleet: runner ID %q must have 1 to 128 characters", id)
	}
	for _, c := range []byte(id) {
		if c <= ' ' || c >= 0x7f {
			return fmt.Errorf("fleet: runner ID %q holds a character other than printable ASCII", id)
		}
	}
	return nil
}

func validLabels(labels []string) error {
	if len(labels) > maxLabels {
		return fmt.Errorf("fleet: %d labels, at most %d are allowed", len(labels), maxLabels)
	}
	for _, l := range labels {
		if l == "" || len(l) > maxLabelLength || strings.ContainsAny(l, ", \t\r\n") {
			return fmt.Errorf("fleet: label %q must have 1 to %d characters and no commas or white space", l, maxLabelLength)
		}
	}
	return nil
}

// InstanceState is where a runner is in its life.
type InstanceState string

// The states of an Instance. A runner goes from provisioning to running
// and ends stopped (it exited by itself, as an ephemeral runner does after
// its job, or was destroyed) or failed (it could not start, or died).
const (
	InstanceProvisioning InstanceState = "provisioning"
	InstanceRunning      InstanceState = "running"
	InstanceStopped      InstanceState = "stopped"
	InstanceFailed       InstanceState = "failed"
)

// Ended reports whether st is final.
func (st InstanceState) Ended() bool { return st == InstanceStopped || st == InstanceFailed }

// Instance is a runner a Backend holds.
type Instance struct {
	ID        string
	Pool      string
	Labels    []string
	Ephemeral bool
	State     InstanceState
	// Created is when Provision accepted the runner.
	Created time.Time
	// Message says why a runner failed or stopped, when it did.
	Message string
}

// Errors of Backends.
var (
	// ErrLabelsUnsupported: the backend cannot give a runner the labels
	// asked for.
	ErrLabelsUnsupported = errors.New("fleet: the backend cannot provide these labels")
	// ErrCapacity: the backend holds as many runners as it can.
	ErrCapacity = errors.New("fleet: the backend is at capacity")
)

// CanProvide reports whether a backend described by info can give a
// runner labels, and if not, the labels it lacks.
func (info *BackendInfo) CanProvide(labels []string) (bool, []string) {
	if info.Labels == nil {
		return true, nil
	}
	var missing []string
	for _, l := range labels {
		if !slices.Contains(info.Labels, l) {
			missing = append(missing, l)
		}
	}
	return len(missing) == 0, missing
}

// Command testplugin is a backend plugin for the tests of package
// fleet/plugin: runners are records in memory (and, with -state, in a
// file that a restarted plugin reads back), and some runner IDs make it
// misbehave on purpose.
//
//   - Provision of an ID starting with "block" waits for its context to
//     end, then records the runner as failed with a message saying how the
//     context ended and whether it had a deadline.
//   - Info's Name is "testplugin-<pid>", for tests that kill the process.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet"
	"github.com/cikit/cikit/fleet/plugin"
)

func main() {
	labels := flag.String("labels", "", "comma-separated labels the backend can give; empty: any")
	maxRunners := flag.Int("max", 0, "how many runners the backend holds at most; 0: no limit")
	state := flag.String("state", "", "file the runners are kept in across restarts")
	failIf := flag.String("fail-if", "", "exit at once if this file exists")
	closed := flag.String("closed", "", "file to create when the backend is closed")
	flag.Parse()
	if *failIf != "" {
		if _, err := os.Stat(*failIf); err == nil {
			fmt.Fprintln(os.Stderr, "testplugin: told to fail")
			os.Exit(1)
		}
	}
	b := &backend{log: plugin.NewLogger(), maxRunners: *maxRunners, state: *state, closed: *closed, runners: map[string]*fleet.Instance{}}
	if *labels != "" {
		b.labels = strings.Split(*labels, ",")
	}
	if err := b.load(); err != nil {
		fmt.Fprintln(os.Stderr, "testplugin:", err)
		os.Exit(1)
	}
	plugin.Serve(b)
}

type backend struct {
	log        *slog.Logger
	labels     []string
	maxRunners int
	state      string
	closed     string

	mu      sync.Mutex
	runners map[string]*fleet.Instance
}

func (b *backend) load() error {
	if b.state == "" {
		return nil
	}
	data, err := os.ReadFile(b.state)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var list []*fleet.Instance
	if err := json.Unmarshal(data, &list); err != nil {
		return err
	}
	for _, inst := range list {
		b.runners[inst.ID] = inst
	}
	return nil
}

// save writes the runners to the state file. b.mu is held.
func (b *backend) save() error {
	if b.state == "" {
		return nil
	}
	data, err := json.Marshal(b.list())
	if err != nil {
		return err
	}
	return os.WriteFile(b.state, data, 0o600)
}

// list returns copies of the runners ordered by ID. b.mu is held.
func (b *backend) list() []*fleet.Instance {
	list := make([]*fleet.Instance, 0, len(b.runners))
	for _, inst := range b.runners {
		c := *inst
		list = append(list, &c)
	}
	slices.SortFunc(list, func(x, y *fleet.Instance) int { return strings.Compare(x.ID, y.ID) })
	return list
}

func (b *backend) Info(ctx context.Context) (*fleet.BackendInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &fleet.BackendInfo{Name: fmt.Sprintf("testplugin-%d", os.Getpid()), Labels: b.labels, MaxRunners: b.maxRunners,
		StartupHint: 1500 * time.Millisecond, CostPerHour: 0.25, Isolation: "none"}, nil
}

func (b *backend) Provision(ctx context.Context, req *fleet.ProvisionRequest) (*fleet.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if b.labels != nil {
		for _, l := range req.Labels {
			if !slices.Contains(b.labels, l) {
				return nil, fmt.Errorf("testplugin: label %q: %w", l, fleet.ErrLabelsUnsupported)
			}
		}
	}
	fmt.Println("provisioning", req.ID)
	if strings.HasPrefix(req.ID, "block") {
		<-ctx.Done()
		_, hasDeadline := ctx.Deadline()
		b.mu.Lock()
		defer b.mu.Unlock()
		b.runners[req.ID] = &fleet.Instance{ID: req.ID, Pool: req.Pool, State: fleet.InstanceFailed,
			Message: fmt.Sprintf("provision ended: %v; deadline set: %t", ctx.Err(), hasDeadline)}
		return nil, errors.Join(b.save(), ctx.Err())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if inst, ok := b.runners[req.ID]; ok {
		c := *inst
		return &c, nil
	}
	if b.maxRunners > 0 && len(b.runners) >= b.maxRunners {
		return nil, fmt.Errorf("testplugin: %d runners: %w", len(b.runners), fleet.ErrCapacity)
	}
	inst := &fleet.Instance{ID: req.ID, Pool: req.Pool, Labels: req.Labels, Ephemeral: req.Ephemeral,
		State: fleet.InstanceRunning, Created: time.Now()}
	b.runners[req.ID] = inst
	b.log.Info("testplugin: provisioned", "runner", req.ID, "labels", req.Labels)
	c := *inst
	return &c, b.save()
}

func (b *backend) Instance(ctx context.Context, id string) (*fleet.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	inst, ok := b.runners[id]
	if !ok {
		return nil, fmt.Errorf("testplugin: runner %q: %w", id, cikit.ErrNotFound)
	}
	c := *inst
	return &c, nil
}

func (b *backend) Instances(ctx context.Context) ([]*fleet.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.list(), nil
}

func (b *backend) Destroy(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.runners, id)
	return b.save()
}

// Close marks the -closed file: Serve closes the backend when the host
// stops the plugin.
func (b *backend) Close() error {
	if b.closed == "" {
		return nil
	}
	return os.WriteFile(b.closed, []byte("closed\n"), 0o600)
}

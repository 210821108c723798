package platform

import (
	"context"
	"fmt"
	"time"

	"github.com/cikit/cikit/secrets/policy"
)

// DefaultPolicyWatch is how often the policy file is checked for changes
// when policy.watch says nothing.
const DefaultPolicyWatch = 10 * time.Second

// buildPolicy loads the policy: the configured file, checked now so that
// a broken one stops the start with its error positions, or the default.
func (p *Platform) buildPolicy(context.Context) error {
	e, err := policy.New(policy.Config{Path: p.cfg.Policy.File, Logger: p.log.With("component", "policy")})
	if err != nil {
		return fmt.Errorf("platform: policy.file: %w", err)
	}
	p.policy = e
	p.admit = newAdmitter(e, p.cfg.Policy, p.log.With("component", "policy"))
	p.admit.observe = p.metrics.policyObserved
	p.admit.defaultBranch = p.provider.DefaultBranch
	p.log.Info("platform: policy loaded", "policy", e.Name())
	return nil
}

// ReloadPolicy reads the policy file again. A broken file is refused with
// its error positions, and the policy in force stays. Without a policy
// file there is nothing to reload.
func (p *Platform) ReloadPolicy() error {
	if p.cfg.Policy.File == "" {
		return fmt.Errorf("platform: no policy.file is configured: the default policy is built in")
	}
	if err := p.policy.Reload(); err != nil {
		p.log.Error("platform: the policy file is refused; the policy in force stays", "policy", p.policy.Name(), "err", err)
		return err
	}
	p.log.Info("platform: policy reloaded", "policy", p.policy.Name())
	return nil
}

// PolicyName names the policy in force: "default", or its file's name
// and digest.
func (p *Platform) PolicyName() string { return p.policy.Name() }

// policyTasks watch the policy file, when there is one.
func (p *Platform) policyTasks() map[string]func(context.Context) error {
	every := p.cfg.Policy.Watch
	if p.cfg.Policy.File == "" || every < 0 {
		return nil
	}
	if every == 0 {
		every = DefaultPolicyWatch
	}
	return map[string]func(context.Context) error{"policy watch": func(ctx context.Context) error {
		p.policy.Watch(ctx, every)
		return nil
	}}
}

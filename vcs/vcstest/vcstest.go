// Package vcstest is the conformance suite of vcs.Provider: the behaviour
// every provider shares, so that the platform reads pipelines, compares
// commits, finds pull requests and posts statuses the same way on
// GitHub, GitLab, local git repositories and the in-memory provider.
//
// A provider's test gives the suite a way to make a fresh provider and the
// forge behind it, seeded through a Fixture:
//
//	func TestConformance(t *testing.T) {
//		vcstest.Exercise(t, vcstest.Config{New: func(t *testing.T) (vcs.Provider, vcstest.Fixture) {
//			forge := newFakeForge(t)
//			return newProvider(forge.URL), forge
//		}})
//	}
//
// Every check runs as a parallel subtest on its own provider. The suite
// asserts semantics only: errors with errors.Is, sorted and unique
// listings, the latest status per context.
package vcstest

import (
	"context"
	"testing"

	"github.com/cikit/cikit/vcs"
)

// Fixture seeds the forge behind a provider under test.
type Fixture interface {
	// CreateRepo creates an empty repository repo ("org/name") whose default branch will be defaultBranch.
	CreateRepo(t *testing.T, repo, defaultBranch string)
	// Commit commits on branch of repo, on top of the branch's head (the first commit creates the branch), writing files and deleting the paths in deleted; it returns the new commit's full 40-hex SHA.
	Commit(t *testing.T, repo, branch string, files map[string]string, deleted ...string) string
	// Branch creates branch of repo at commit sha.
	Branch(t *testing.T, repo, branch, sha string)
	// Tag creates a lightweight tag of repo at commit sha.
	Tag(t *testing.T, repo, tag, sha string)
	// OpenPullRequest opens a pull request of repo from headRepo's headBranch (headRepo != repo: a fork, which the fixture creates as needed) into baseBranch, and returns its number.
	OpenPullRequest(t *testing.T, repo, headRepo, headBranch, baseBranch string) int
	// ClosePullRequest closes pull request number of repo.
	ClosePullRequest(t *testing.T, repo string, number int)
	// Statuses returns the latest status per context on commit sha of repo, as the forge shows them, mapped back to vcs.Status (states the forge cannot tell apart may come back as one of them: the suite checks exact states only for success and failure).
	Statuses(t *testing.T, repo, sha string) []vcs.Status
}

// Config says how the suite makes what it tests.
type Config struct {
	// New returns a provider and the fixture of the forge behind it, fresh for one subtest (cleanups via t.Cleanup).
	New func(t *testing.T) (vcs.Provider, Fixture)
}

// Exercise runs the conformance suite against the providers cfg makes.
//
// The repositories it creates are "acme/api" (default branch "main"),
// "acme/trunk" (default branch "trunk") and, for a pull request from a
// fork, "fork/api": the suite calls CreateRepo and Commit for the fork
// before Fixture.OpenPullRequest, which then only has to relate the two
// where the forge needs it.
func Exercise(t *testing.T, cfg Config) {
	t.Helper()
	exerciseRead(t, cfg)
	exerciseListFiles(t, cfg)
	exerciseRefs(t, cfg)
	exerciseChangedFiles(t, cfg)
	exercisePullRequests(t, cfg)
	exerciseStatuses(t, cfg)
	exerciseCancelled(t, cfg)
}

const (
	repo     = "acme/api"
	forkRepo = "fork/api"
	// missingSHA is well formed and names no commit.
	missingSHA = "0123456789abcdef0123456789abcdef01234567"
)

type bundle struct {
	p   vcs.Provider
	fix Fixture
	ctx context.Context
}

// setup makes a fresh provider with "acme/api" created, default branch
// "main", and no commits.
func setup(t *testing.T, cfg Config) *bundle {
	t.Helper()
	p, fix := cfg.New(t)
	fix.CreateRepo(t, repo, "main")
	return &bundle{p: p, fix: fix, ctx: context.Background()}
}

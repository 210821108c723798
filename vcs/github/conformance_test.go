package github_test

import (
	"testing"

	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/vcstest"
)

func TestConformanceToken(t *testing.T) {
	t.Parallel()
	vcstest.Exercise(t, vcstest.Config{New: func(t *testing.T) (vcs.Provider, vcstest.Fixture) {
		b := setup(t)
		return b.pat(t), fixture{srv: b.srv}
	}})
}

func TestConformanceApp(t *testing.T) {
	t.Parallel()
	vcstest.Exercise(t, vcstest.Config{New: func(t *testing.T) (vcs.Provider, vcstest.Fixture) {
		b := setup(t)
		return b.app(t), fixture{srv: b.srv, app: true}
	}})
}

func TestConformanceCheckRuns(t *testing.T) {
	t.Parallel()
	vcstest.Exercise(t, vcstest.Config{New: func(t *testing.T) (vcs.Provider, vcstest.Fixture) {
		b := setup(t)
		return b.checks(t), fixture{srv: b.srv, app: true, checks: true}
	}})
}

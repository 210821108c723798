package ingest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/ingest/ingesttest"
	"github.com/cikit/cikit/vcs"
)

// existsPipeline runs docs only when the commit has Markdown files below
// docs/, at any depth, and lint only when it has a file of an empty
// pattern, which names none.
const existsPipeline = `docs:
  script: [make docs]
  rules:
    - exists: ["docs/**/*.md"]
lint:
  script: [make lint]
  rules:
    - exists: [""]
build:
  script: [make]
`

// providerOnly hides every method of a Provider but vcs.Provider's: a
// forge that cannot list a commit's files.
type providerOnly struct{ vcs.Provider }

// TestIngestDecidesExistsGlobs: the ingester's files of a commit list
// their directories (compiler.FileLister), so GitLab's rules:exists globs
// are decided on the server: a commit with docs/guide/intro.md runs docs,
// one without does not, and an empty pattern matches nothing. With a
// provider that cannot list, the glob stays undecided and the job it
// guards is kept, as it was before the ingester's files could be listed.
func TestIngestDecidesExistsGlobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := &vcs.Memory{}
	mem.AddCommit("acme/api", "c1", map[string]string{".gitlab-ci.yml": existsPipeline, "docs/guide/intro.md": "# intro"})
	mem.AddCommit("acme/api", "c2", map[string]string{".gitlab-ci.yml": existsPipeline, "docs/README.txt": "not Markdown"})
	jobsOf := func(p vcs.Provider, delivery, sha string) []string {
		t.Helper()
		store := dag.NewMemoryStore(dag.MemoryConfig{})
		in, err := ingest.NewIngester(ingest.IngesterConfig{Runs: ingest.NewMemoryRunStore(store, nil), VCS: p})
		require.NoError(t, err)
		d, _, err := in.Ingest(ctx, ingesttest.Push(delivery, "main", "c0", sha, 0))
		require.NoError(t, err)
		require.Len(t, d.RunIDs, 1)
		jobs, err := store.JobList(ctx, d.RunIDs[0])
		require.NoError(t, err)
		var ids []string
		for _, j := range jobs {
			ids = append(ids, j.ID())
		}
		return ids
	}
	require.ElementsMatch(t, []string{"docs", "build"}, jobsOf(mem, "d1", "c1"), "docs/guide/intro.md matches docs/**/*.md")
	require.ElementsMatch(t, []string{"build"}, jobsOf(mem, "d2", "c2"), "no Markdown below docs/")
	require.ElementsMatch(t, []string{"docs", "build"}, jobsOf(providerOnly{mem}, "d3", "c2"),
		"a provider that cannot list leaves the glob undecided and its job kept; an empty pattern is false all the same")
}

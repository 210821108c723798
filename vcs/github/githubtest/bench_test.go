package githubtest_test

import (
	"fmt"
	"testing"

	"github.com/cikit/cikit/vcs/github/githubtest"
)

// BenchmarkCommit is the cost of one commit changing one file of a
// repository of 2,000 files in 100 directories: its trees are git's,
// and with a git directory its new objects are written too.
func BenchmarkCommit(b *testing.B) {
	for _, withGit := range []bool{false, true} {
		b.Run(fmt.Sprintf("git=%v", withGit), func(b *testing.B) {
			cfg := githubtest.Config{}
			if withGit {
				cfg.GitDir = b.TempDir()
			}
			srv := githubtest.NewServer(cfg)
			if err := srv.CreateRepo("acme/big", "main"); err != nil {
				b.Fatal(err)
			}
			files := map[string]string{}
			for i := range 2000 {
				files[fmt.Sprintf("dir%02d/file%04d.go", i%100, i)] = fmt.Sprintf("package dir%02d // %d\n", i%100, i)
			}
			if _, err := srv.Commit("acme/big", "main", files); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				if _, err := srv.Commit("acme/big", "main", map[string]string{"dir00/file0000.go": fmt.Sprint(i)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

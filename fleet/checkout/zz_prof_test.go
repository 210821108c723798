package checkout_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/checkout"
)

func TestZZProf(t *testing.T) {
	if os.Getenv("ZZPROF") == "" {
		t.Skip()
	}
	b := setup(t)
	files := map[string]string{}
	for i := range 24 {
		files[fmt.Sprintf("pkg%d/f%d.go", i%7, i)] = strings.Repeat("x", 300)
	}
	b.repos.Commit(t, repo, "main", files)
	dis := os.Getenv("ZZDIS") != ""
	var total time.Duration
	for i := range 20 {
		sha := b.repos.Commit(t, repo, "main", map[string]string{"pushed.txt": fmt.Sprint(i)})
		req := b.request(t, sha)
		req.Dissociate = dis
		req.Options = cikit.Checkout{Clean: true}
		var log strings.Builder
		req.Log = &log
		if i == 19 {
			os.WriteFile("/tmp/zz-marker", []byte("x"), 0o644)
		}
		start := time.Now()
		if _, err := b.c.Checkout(b.ctx, req); err != nil {
			t.Fatal(err)
		}
		if i >= 5 {
			total += time.Since(start)
		}
		if i == 19 {
			t.Log(log.String())
		}
	}
	t.Logf("mean %v", total/15)
	_ = checkout.DefaultGit
}

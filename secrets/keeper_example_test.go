package secrets_test

import (
	"context"
	"fmt"
	"time"

	"github.com/cikit/cikit/internal/clocktest"
	"github.com/cikit/cikit/secrets"
)

// Example_keeper follows the leases of one job attempt: held when the job
// gets its secrets, renewed on its heartbeats, revoked when it ends; and
// those of an attempt whose runner was killed, revoked by the sweeper
// once they expire.
func Example_keeper() {
	ctx := context.Background()
	clock := clocktest.New(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	provider := newFakeDynamic("fake", clock.Now) // a Dynamic: PostgresRoles in production
	keeper, err := secrets.NewKeeper(secrets.KeeperConfig{
		Leases:    secrets.NewMemoryLeaseStore(), // NewPostgresLeaseStore in production
		Providers: []secrets.Dynamic{provider},
		TTL:       10 * time.Minute,
		Now:       clock.Now,
	})
	if err != nil {
		panic(err)
	}
	// The platform hands two jobs their secrets.
	ok, _ := provider.Fetch(ctx, secrets.Request{Names: []string{"DB"}})
	killed, _ := provider.Fetch(ctx, secrets.Request{Names: []string{"DB"}})
	_ = keeper.Hold(ctx, "run1/test/1", []secrets.Lease{*ok[0].Lease})
	_ = keeper.Hold(ctx, "run1/deploy/1", []secrets.Lease{*killed[0].Lease})

	// Heartbeats of the first job renew its lease; the second's runner
	// was killed and sends none.
	for range 3 {
		clock.Advance(5 * time.Minute)
		_ = keeper.Renew(ctx, "run1/test/1")
	}
	n, _ := keeper.Sweep(ctx)
	fmt.Println("swept:", n, "killed job's lease revoked:", provider.revoked(killed[0].Lease.ID))

	_ = keeper.End(ctx, "run1/test/1")
	fmt.Println("ended job's lease revoked:", provider.revoked(ok[0].Lease.ID))
	// Output:
	// swept: 1 killed job's lease revoked: true
	// ended job's lease revoked: true
}

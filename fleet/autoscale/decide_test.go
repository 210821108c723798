package autoscale_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/fleet/autoscale"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) time.Time { return now.Add(-d) }

// decideOne decides p alone at now.
func decideOne(t *testing.T, p autoscale.Pool) autoscale.Decision {
	t.Helper()
	if p.Name == "" {
		p.Name = "linux"
	}
	ds := autoscale.Decide(autoscale.Snapshot{Now: now, Pools: []autoscale.Pool{p}})
	require.Len(t, ds, 1)
	require.Equal(t, p.Name, ds[0].Pool)
	require.Equal(t, p.Size(), ds[0].Size)
	return ds[0]
}

// starting returns n provisioning times, each age old.
func starting(n int, age time.Duration) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = ago(age)
	}
	return out
}

func TestDecide(t *testing.T) {
	t.Parallel()
	long := 2 * time.Hour // long enough ago that no cooldown holds
	for _, tc := range []struct {
		name      string
		pool      autoscale.Pool
		warm      int
		desired   int
		provision int
		destroy   int
		reason    string
		wait      autoscale.WaitKind
	}{
		{
			name:    "scales up for busy, queued and warm at once",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 10, Warm: 2}, Busy: 3, Queued: 4, StartupHint: 20 * time.Second},
			warm:    2,
			desired: 9, provision: 6,
			reason: "need 9 (busy 3 + queued 4 + lag 0 + warm 2); have 3: provision 6",
			wait:   autoscale.WaitScalingUp,
		},
		{
			name:    "counts provisioning runners",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 10, Warm: 2}, Busy: 3, Queued: 4, Provisioning: starting(6, 5*time.Second), LastScaleUp: ago(5 * time.Second)},
			warm:    2,
			desired: 9,
			reason:  "need 9 (busy 3 + queued 4 + lag 0 + warm 2); have 9",
			wait:    autoscale.WaitScalingUp,
		},
		{
			name:    "provisions for lag",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 10}, Lag: 5},
			desired: 5, provision: 5,
			reason: "need 5 (busy 0 + queued 0 + lag 5 + warm 0); have 0: provision 5",
			wait:   autoscale.WaitScalingUp,
		},
		{
			name:    "caps at Max",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 10, Warm: 2}, Busy: 8, Queued: 10},
			warm:    2,
			desired: 10, provision: 2,
			reason: "need 20 (busy 8 + queued 10 + lag 0 + warm 2), capped at max 10; have 8: provision 2",
			wait:   autoscale.WaitAtMax,
		},
		{
			name:    "raises to Min",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Min: 3, Max: 10}},
			desired: 3, provision: 3,
			reason: "need 0 (busy 0 + queued 0 + lag 0 + warm 0), raised to min 3; have 0: provision 3",
			wait:   autoscale.WaitScalingUp,
		},
		{
			name:    "scale-up cooldown",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 10}, Queued: 5, LastScaleUp: ago(4 * time.Second)},
			desired: 5,
			reason:  "need 5 (busy 0 + queued 5 + lag 0 + warm 0); have 0: scale-up by 5 held by cooldown for 6s",
			wait:    autoscale.WaitWarmPoolEmpty,
		},
		{
			name:    "ephemeral pools do not wait for the scale-up cooldown",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 10, Ephemeral: true}, Queued: 5, LastScaleUp: ago(4 * time.Second)},
			desired: 5, provision: 5,
			reason: "need 5 (busy 0 + queued 5 + lag 0 + warm 0); have 0: provision 5",
			wait:   autoscale.WaitScalingUp,
		},
		{
			name:    "a scale-up in the future holds the whole cooldown",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 10}, Queued: 1, LastScaleUp: now.Add(time.Minute)},
			desired: 1,
			reason:  "need 1 (busy 0 + queued 1 + lag 0 + warm 0); have 0: scale-up by 1 held by cooldown for 10s",
			wait:    autoscale.WaitWarmPoolEmpty,
		},
		{
			name:    "scale-down waits for the cooldown after a scale-up",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 20}, Idle: 10, LastScaleUp: ago(time.Minute)},
			desired: 0,
			reason:  "need 0 (busy 0 + queued 0 + lag 0 + warm 0); have 10, 10 spare idle, at most 5 a step: scale-down by 5 held by cooldown for 4m0s",
			wait:    autoscale.WaitAvailable,
		},
		{
			name:    "scale-down waits for the cooldown after a scale-down",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 20}, Idle: 10, LastScaleUp: ago(long), LastScaleDown: ago(2 * time.Minute)},
			desired: 0,
			reason:  "need 0 (busy 0 + queued 0 + lag 0 + warm 0); have 10, 10 spare idle, at most 5 a step: scale-down by 5 held by cooldown for 3m0s",
			wait:    autoscale.WaitAvailable,
		},
		{
			name:    "scale-down steps by half the pool",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 20}, Idle: 9, LastScaleUp: ago(long), LastScaleDown: ago(long)},
			desired: 0, destroy: 5,
			reason: "need 0 (busy 0 + queued 0 + lag 0 + warm 0); have 9, 9 spare idle, at most 5 a step: destroy 5 idle",
			wait:   autoscale.WaitAvailable,
		},
		{
			name:    "ScaleDownMax caps a step too",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 20, ScaleDownMax: 2}, Idle: 9},
			desired: 0, destroy: 2,
			reason: "need 0 (busy 0 + queued 0 + lag 0 + warm 0); have 9, 9 spare idle, at most 2 a step: destroy 2 idle",
			wait:   autoscale.WaitAvailable,
		},
		{
			name:    "ScaleDownFraction 1 takes all spare runners",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 20, Warm: 1, ScaleDownFraction: 1}, Idle: 9},
			warm:    1,
			desired: 1, destroy: 8,
			reason: "need 1 (busy 0 + queued 0 + lag 0 + warm 1); have 9: destroy 8 idle",
			wait:   autoscale.WaitAvailable,
		},
		{
			name: "keeps the last cooldown's peak demand",
			pool: autoscale.Pool{Policy: autoscale.Policy{Max: 20, Warm: 1}, Idle: 10,
				Demand: []autoscale.Sample{{At: ago(6 * time.Minute), Demand: 10}, {At: ago(2 * time.Minute), Demand: 7}, {At: ago(time.Minute)}}},
			warm:    1,
			desired: 1, destroy: 2,
			reason: "need 1 (busy 0 + queued 0 + lag 0 + warm 1); have 10, keeping 8 for the last 5m0s's peak demand of 7: destroy 2 idle",
			wait:   autoscale.WaitAvailable,
		},
		{
			name: "keeps all for the last cooldown's peak demand",
			pool: autoscale.Pool{Policy: autoscale.Policy{Max: 20, Warm: 1}, Idle: 10,
				Demand: []autoscale.Sample{{At: ago(4 * time.Minute), Demand: 9}, {At: ago(time.Minute)}}},
			warm:    1,
			desired: 1,
			reason:  "need 1 (busy 0 + queued 0 + lag 0 + warm 1); have 10: keeping them for the last 5m0s's peak demand of 9",
			wait:    autoscale.WaitAvailable,
		},
		{
			name:    "destroys only idle runners nothing needs",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 20, Warm: 2}, Idle: 3, Provisioning: starting(5, time.Second)},
			warm:    2,
			desired: 2, destroy: 1,
			reason: "need 2 (busy 0 + queued 0 + lag 0 + warm 2); have 8: destroy 1 idle",
			wait:   autoscale.WaitAvailable,
		},
		{
			name:    "queued jobs' idle runners are not spare",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 20}, Idle: 2, Queued: 2, Provisioning: starting(6, time.Second)},
			desired: 2,
			reason:  "need 2 (busy 0 + queued 2 + lag 0 + warm 0); have 8: 6 more than needed, none of them spare idle",
			wait:    autoscale.WaitAvailable,
		},
		{
			name:    "sheds runners beyond a lowered Max",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 10, Warm: 10}, Idle: 22, Busy: 2},
			warm:    10,
			desired: 10, destroy: 12,
			reason: "need 12 (busy 2 + queued 0 + lag 0 + warm 10), capped at max 10; have 24: destroy 12 idle",
			wait:   autoscale.WaitAvailable,
		},
		{
			name:    "goes to zero after IdleToZero",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 20, Warm: 6}, Idle: 6, IdleSince: ago(31 * time.Minute)},
			desired: 0, destroy: 6,
			reason: "need 0 (busy 0 + queued 0 + lag 0 + warm 0), idle for 31m0s; have 6: destroy 6 idle",
			wait:   autoscale.WaitWarmPoolEmpty,
		},
		{
			name:    "not before IdleToZero",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 20, Warm: 6}, Idle: 6, IdleSince: ago(29 * time.Minute)},
			warm:    6,
			desired: 6,
			reason:  "need 6 (busy 0 + queued 0 + lag 0 + warm 6); have 6",
			wait:    autoscale.WaitAvailable,
		},
		{
			name:    "not with Min above 0",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Min: 1, Max: 20, Warm: 6}, Idle: 6, IdleSince: ago(31 * time.Minute)},
			warm:    6,
			desired: 6,
			reason:  "need 6 (busy 0 + queued 0 + lag 0 + warm 6); have 6",
			wait:    autoscale.WaitAvailable,
		},
		{
			name:    "not with IdleToZero off",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 20, Warm: 6, IdleToZero: -1}, Idle: 6, IdleSince: ago(24 * time.Hour)},
			warm:    6,
			desired: 6,
			reason:  "need 6 (busy 0 + queued 0 + lag 0 + warm 6); have 6",
			wait:    autoscale.WaitAvailable,
		},
		{
			name:    "not with lag",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 20, Warm: 6}, Idle: 6, Lag: 1, IdleSince: ago(31 * time.Minute)},
			warm:    6,
			desired: 7, provision: 1,
			reason: "need 7 (busy 0 + queued 0 + lag 1 + warm 6); have 6: provision 1",
			wait:   autoscale.WaitAvailable,
		},
		{
			name: "auto warm target: a tenth of the window's peak, exactly",
			pool: autoscale.Pool{Policy: autoscale.Policy{Max: 50, AutoWarm: true}, Busy: 2,
				Demand: []autoscale.Sample{{At: ago(20 * time.Minute), Demand: 90}, {At: ago(10 * time.Minute), Demand: 30}, {At: now.Add(time.Minute), Demand: 80}}},
			warm:    3,
			desired: 5, provision: 3,
			reason: "need 5 (busy 2 + queued 0 + lag 0 + warm 3); have 2: provision 3",
			wait:   autoscale.WaitScalingUp,
		},
		{
			name:    "auto warm target: the fraction is taken to a millionth",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 300, AutoWarm: true, WarmFraction: 0.035}, Busy: 200},
			warm:    7,
			desired: 207, provision: 7,
			reason: "need 207 (busy 200 + queued 0 + lag 0 + warm 7); have 200: provision 7",
			wait:   autoscale.WaitScalingUp,
		},
		{
			name: "auto warm target rounds up",
			pool: autoscale.Pool{Policy: autoscale.Policy{Max: 50, AutoWarm: true}, Busy: 2,
				Demand: []autoscale.Sample{{At: ago(10 * time.Minute), Demand: 31}}},
			warm:    4,
			desired: 6, provision: 4,
			reason: "need 6 (busy 2 + queued 0 + lag 0 + warm 4); have 2: provision 4",
			wait:   autoscale.WaitScalingUp,
		},
		{
			name:    "auto warm target counts the demand now",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 50, AutoWarm: true, WarmFraction: 0.25}, Busy: 2, Queued: 10},
			warm:    3,
			desired: 15, provision: 13,
			reason: "need 15 (busy 2 + queued 10 + lag 0 + warm 3); have 2: provision 13",
			wait:   autoscale.WaitScalingUp,
		},
		{
			name:    "auto warm target is at least MinWarm",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 50, AutoWarm: true, MinWarm: 2}, Idle: 2},
			warm:    2,
			desired: 2,
			reason:  "need 2 (busy 0 + queued 0 + lag 0 + warm 2); have 2",
			wait:    autoscale.WaitAvailable,
		},
		{
			name:    "invalid policy: nothing changes",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Min: 2}, Queued: 3, Idle: 1},
			desired: 1,
			reason:  "cannot decide: autoscale: Max must be at least 1, not 0\nautoscale: Min (2) must not exceed Max (0)",
			wait:    autoscale.WaitAtMax,
		},
		{
			name:    "negative counts: nothing changes",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 3}, Queued: -1, Idle: 1},
			desired: 1,
			reason:  "cannot decide: autoscale: negative count (idle 1, busy 0, queued -1, lag 0)",
			wait:    autoscale.WaitAvailable,
		},
		{
			name:    "negative start-up hint: nothing changes",
			pool:    autoscale.Pool{Policy: autoscale.Policy{Max: 3}, StartupHint: -time.Second},
			desired: 0,
			reason:  "cannot decide: autoscale: negative StartupHint",
			wait:    autoscale.WaitWarmPoolEmpty,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := decideOne(t, tc.pool)
			require.Equal(t, tc.reason, d.Reason)
			require.Equal(t, tc.warm, d.Warm, "warm")
			require.Equal(t, tc.desired, d.Desired, "desired")
			require.Equal(t, tc.provision, d.Provision, "provision")
			require.Equal(t, tc.destroy, d.Destroy, "destroy")
			require.Equal(t, tc.wait, d.Wait.Kind, "wait")
		})
	}
}

func TestDecideManyPools(t *testing.T) {
	t.Parallel()
	pools := []autoscale.Pool{
		{Name: "b", Policy: autoscale.Policy{Max: 4}, Queued: 9},
		{Name: "a", Policy: autoscale.Policy{Max: 4, Warm: 1}},
		{Name: "c"},
	}
	ds := autoscale.Decide(autoscale.Snapshot{Now: now, Pools: pools})
	require.Len(t, ds, 3)
	require.Equal(t, []string{"b", "a", "c"}, []string{ds[0].Pool, ds[1].Pool, ds[2].Pool}, "the snapshot's order")
	require.Equal(t, 4, ds[0].Provision)
	require.Equal(t, 1, ds[1].Provision)
	require.Contains(t, ds[2].Reason, "cannot decide")
	require.Empty(t, autoscale.Decide(autoscale.Snapshot{Now: now}))
}

func TestWait(t *testing.T) {
	t.Parallel()
	hint := 20 * time.Second
	for _, tc := range []struct {
		name string
		pool autoscale.Pool
		want autoscale.Wait
		msg  string
	}{
		{
			name: "idle runners",
			pool: autoscale.Pool{Policy: autoscale.Policy{Max: 10, Warm: 3}, Idle: 5, Queued: 2},
			want: autoscale.Wait{Kind: autoscale.WaitAvailable, Idle: 5, Queued: 2, Max: 10},
			msg:  "pool linux has 5 runners idle",
		},
		{
			name: "one idle runner, nothing queued",
			pool: autoscale.Pool{Policy: autoscale.Policy{Max: 10, Warm: 1}, Idle: 1},
			want: autoscale.Wait{Kind: autoscale.WaitAvailable, Idle: 1, Max: 10},
			msg:  "pool linux has 1 runner idle",
		},
		{
			name: "warm pool empty, runners starting",
			pool: autoscale.Pool{Policy: autoscale.Policy{Max: 10}, Queued: 3, StartupHint: hint},
			want: autoscale.Wait{Kind: autoscale.WaitScalingUp, Starting: 3, Queued: 3, Max: 10, ETA: hint, ETAKnown: true},
			msg:  "warm pool empty; 3 runners starting, ready in about 20s",
		},
		{
			name: "the ETA is the starting runner's the last queued job gets",
			pool: autoscale.Pool{Policy: autoscale.Policy{Max: 10}, Idle: 1, Queued: 4, StartupHint: hint, LastScaleUp: ago(5 * time.Second),
				Provisioning: []time.Time{ago(5 * time.Second), ago(25 * time.Second), ago(10 * time.Second), ago(12 * time.Second)}},
			want: autoscale.Wait{Kind: autoscale.WaitScalingUp, Idle: 1, Starting: 4, Queued: 4, Max: 10, ETA: 10 * time.Second, ETAKnown: true},
			msg:  "1 runner idle for 4 queued jobs; 4 runners starting, ready in about 10s",
		},
		{
			name: "starting runners overdue",
			pool: autoscale.Pool{Policy: autoscale.Policy{Max: 10}, Queued: 1, StartupHint: hint, Provisioning: starting(1, time.Minute), LastScaleUp: ago(time.Minute)},
			want: autoscale.Wait{Kind: autoscale.WaitScalingUp, Starting: 1, Queued: 1, Max: 10, ETAKnown: true},
			msg:  "warm pool empty; 1 runner starting, ready any moment",
		},
		{
			name: "no start-up hint, no estimate",
			pool: autoscale.Pool{Policy: autoscale.Policy{Max: 10}, Queued: 2},
			want: autoscale.Wait{Kind: autoscale.WaitScalingUp, Starting: 2, Queued: 2, Max: 10},
			msg:  "warm pool empty; 2 runners starting",
		},
		{
			name: "at max",
			pool: autoscale.Pool{Policy: autoscale.Policy{Max: 10}, Busy: 8, Provisioning: starting(2, time.Second), Queued: 42, LastScaleUp: ago(time.Second)},
			want: autoscale.Wait{Kind: autoscale.WaitAtMax, Starting: 2, Queued: 42, Max: 10, Beyond: 40},
			msg:  "pool linux is at its maximum of 10 runners; 40 queued jobs wait for runners to finish",
		},
		{
			name: "at max, one job beyond",
			pool: autoscale.Pool{Policy: autoscale.Policy{Max: 1}, Busy: 1, Queued: 1},
			want: autoscale.Wait{Kind: autoscale.WaitAtMax, Queued: 1, Max: 1, Beyond: 1},
			msg:  "pool linux is at its maximum of 1 runner; 1 queued job waits for a runner to finish",
		},
		{
			name: "at max, all busy, nothing queued",
			pool: autoscale.Pool{Policy: autoscale.Policy{Max: 10}, Busy: 10},
			want: autoscale.Wait{Kind: autoscale.WaitAtMax, Max: 10},
			msg:  "pool linux is at its maximum of 10 runners",
		},
		{
			name: "scale-up cooldown",
			pool: autoscale.Pool{Policy: autoscale.Policy{Max: 10}, Busy: 2, Queued: 1, StartupHint: hint, LastScaleUp: ago(4 * time.Second)},
			want: autoscale.Wait{Kind: autoscale.WaitWarmPoolEmpty, Queued: 1, Max: 10, Cooldown: 6 * time.Second, ETA: 26 * time.Second, ETAKnown: true},
			msg:  "warm pool empty; pool linux scales up in 6s, a runner ready in about 26s",
		},
		{
			name: "scaled to zero",
			pool: autoscale.Pool{Policy: autoscale.Policy{Max: 10, Warm: 1}, StartupHint: hint, IdleSince: ago(time.Hour)},
			want: autoscale.Wait{Kind: autoscale.WaitWarmPoolEmpty, Max: 10, ETA: hint, ETAKnown: true},
			msg:  "warm pool empty; pool linux scales up now, a runner ready in about 20s",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := decideOne(t, tc.pool)
			require.Equal(t, tc.want, d.Wait, d.Reason)
			require.Equal(t, tc.msg, d.Wait.Message("linux"))
		})
	}
	require.Equal(t, `pool x: unknown wait ""`, autoscale.Wait{}.Message("x"))
}

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, autoscale.Policy{Max: 1}.Validate())
	require.NoError(t, autoscale.Policy{Min: 2, Max: 5, AutoWarm: true, MinWarm: 1, WarmFraction: 1, ScaleUpCooldown: -1, ScaleDownCooldown: -1, IdleToZero: -1}.Validate())
	for _, tc := range []struct {
		p    autoscale.Policy
		want string
	}{
		{autoscale.Policy{}, "autoscale: Max must be at least 1, not 0"},
		{autoscale.Policy{Min: -1, Max: 1}, "autoscale: Min must not be negative (-1)"},
		{autoscale.Policy{Min: 3, Max: 2}, "autoscale: Min (3) must not exceed Max (2)"},
		{autoscale.Policy{Max: 1, Warm: -1}, "autoscale: Warm (-1) and MinWarm (0) must not be negative"},
		{autoscale.Policy{Max: 1, Warm: 2, AutoWarm: true}, "autoscale: Warm (2) is a fixed warm target, AutoWarm sizes it from demand: set one of them (MinWarm is the automatic target's floor)"},
		{autoscale.Policy{Max: 1, MinWarm: 2}, "autoscale: MinWarm (2) is the floor of the automatic warm target and needs AutoWarm; a fixed target is Warm"},
		{autoscale.Policy{Max: 1, AutoWarm: true, WarmFraction: 1.5}, "autoscale: WarmFraction must be more than 0 and at most 1, not 1.5"},
		{autoscale.Policy{Max: 1, AutoWarm: true, WarmFraction: -0.1}, "autoscale: WarmFraction must be more than 0 and at most 1, not -0.1"},
		{autoscale.Policy{Max: 1, DemandWindow: -time.Second}, "autoscale: DemandWindow must not be negative (-1s)"},
		{autoscale.Policy{Max: 1, ScaleDownFraction: -1}, "autoscale: ScaleDownFraction must not be negative (-1)"},
		{autoscale.Policy{Max: 1, ScaleDownMax: -1}, "autoscale: ScaleDownMax must not be negative (-1)"},
	} {
		require.EqualError(t, tc.p.Validate(), tc.want)
	}
}

func TestPolicyDefaults(t *testing.T) {
	t.Parallel()
	p := autoscale.Policy{Max: 3, ScaleUpCooldown: -1}.WithDefaults()
	require.Equal(t, autoscale.Policy{
		Max:               3,
		WarmFraction:      autoscale.DefaultWarmFraction,
		DemandWindow:      autoscale.DefaultDemandWindow,
		ScaleUpCooldown:   -1,
		ScaleDownCooldown: autoscale.DefaultScaleDownCooldown,
		ScaleDownFraction: autoscale.DefaultScaleDownFraction,
		IdleToZero:        autoscale.DefaultIdleToZero,
	}, p)
	require.Equal(t, p, p.WithDefaults(), "idempotent")
	require.Equal(t, autoscale.DefaultDemandWindow, autoscale.Policy{}.HistoryWindow())
	require.Equal(t, time.Hour, autoscale.Policy{ScaleDownCooldown: time.Hour}.HistoryWindow())
	require.Equal(t, 5*time.Minute, autoscale.Policy{DemandWindow: time.Minute}.HistoryWindow())
}

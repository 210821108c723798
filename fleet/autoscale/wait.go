package autoscale

import (
	"fmt"
	"time"
)

// WaitKind is what a job queued for a pool waits for.
type WaitKind string

// The kinds of Wait. They are judged for the last job in the pool's queue
// (or, with none queued, for the next job to come), once the plan is
// carried out.
const (
	// WaitAvailable: an idle runner takes the job now.
	WaitAvailable WaitKind = "available"
	// WaitScalingUp: no idle runner is left for the job, but one is
	// starting; ETA says when it should be ready.
	WaitScalingUp WaitKind = "scaling_up"
	// WaitWarmPoolEmpty: no runner is idle or starting for the job, and
	// the pool may grow: it does so when the scale-up cooldown ends
	// (Cooldown), and the runner is ready ETA from now.
	WaitWarmPoolEmpty WaitKind = "warm_pool_empty"
	// WaitAtMax: no runner is idle or starting for the job and the pool
	// is at its Max; the job waits for a busy runner to finish.
	WaitAtMax WaitKind = "at_max"
)

// Wait says why a job queued for a pool waits, for answers to "why am I
// waiting?". Message turns it into a sentence.
type Wait struct {
	Kind WaitKind
	// Idle and Starting are the pool's idle and provisioning runners
	// once the plan is carried out; Queued is the jobs queued for it.
	Idle, Starting, Queued int
	// Max is the pool's Max.
	Max int
	// Beyond, for WaitAtMax, is how many queued jobs no idle or starting
	// runner will take.
	Beyond int
	// Cooldown, for WaitWarmPoolEmpty, is how long the scale-up cooldown
	// still holds.
	Cooldown time.Duration
	// ETA, when ETAKnown, is how long until the runner the job waits for
	// should be ready: for WaitScalingUp, the starting runner that will
	// take the last queued job (0: due now); for WaitWarmPoolEmpty, the
	// cooldown plus the backend's start-up hint. It is unknown when the
	// backend gave no start-up hint.
	ETA      time.Duration
	ETAKnown bool
}

// Message says w in a sentence about the pool named pool, such as "pool
// linux-large is at its maximum of 10 runners" or "warm pool empty; 3
// runners starting, ready in about 20s".
func (w Wait) Message(pool string) string {
	switch w.Kind {
	case WaitAvailable:
		return fmt.Sprintf("pool %s has %s idle", pool, runners(w.Idle))
	case WaitScalingUp:
		prefix := "warm pool empty"
		if w.Idle > 0 {
			prefix = fmt.Sprintf("%s idle for %d queued jobs", runners(w.Idle), w.Queued)
		}
		msg := fmt.Sprintf("%s; %s starting", prefix, runners(w.Starting))
		switch {
		case !w.ETAKnown:
		case w.ETA < time.Second:
			msg += ", ready any moment"
		default:
			msg += ", ready in about " + about(w.ETA)
		}
		return msg
	case WaitWarmPoolEmpty:
		msg := "warm pool empty; pool " + pool + " scales up"
		if w.Cooldown > 0 {
			msg += " in " + about(w.Cooldown)
		} else {
			msg += " now"
		}
		if w.ETAKnown {
			msg += ", a runner ready in about " + about(w.ETA)
		}
		return msg
	case WaitAtMax:
		msg := fmt.Sprintf("pool %s is at its maximum of %s", pool, runners(w.Max))
		switch w.Beyond {
		case 0:
		case 1:
			msg += "; 1 queued job waits for a runner to finish"
		default:
			msg += fmt.Sprintf("; %d queued jobs wait for runners to finish", w.Beyond)
		}
		return msg
	}
	return fmt.Sprintf("pool %s: unknown wait %q", pool, w.Kind)
}

func runners(n int) string {
	if n == 1 {
		return "1 runner"
	}
	return fmt.Sprintf("%d runners", n)
}

func about(d time.Duration) string { return d.Round(time.Second).String() }

package policy_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// testEvalTimeout bounds an evaluation in every test but
// TestEvalTimeout: long enough that a busy machine never stops one.
const testEvalTimeout = time.Minute

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

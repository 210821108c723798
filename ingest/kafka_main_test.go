package ingest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the package's tests, which start Kafka clients and
// consumers, leave no goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

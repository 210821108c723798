package plugin_test

import (
	"io"
	"testing"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// go-plugin's in-process test connection logs its debug lines to
	// hclog's default output.
	hclog.DefaultOutput = io.Discard
	goleak.VerifyTestMain(m)
}

package testenv

import (
	"fmt"
	"os"
	"testing"
)

// Services the harnesses know, as passed to [ServiceUnavailable].
const (
	PostgreSQL = "PostgreSQL"
	Redis      = "Redis"
)

// Environment variables that point tests at a service instance other
// than the default on 127.0.0.1.
const (
	DatabaseURLVar = "CIKIT_TEST_DATABASE_URL" // PostgreSQL connection URL
	RedisURLVar    = "CIKIT_TEST_REDIS_URL"    // Redis URL, redis://host:port/db
)

// envVars maps a service to the variable that points tests at it, so the
// messages of ServiceUnavailable can say what to set.
var envVars = map[string]string{
	PostgreSQL: DatabaseURLVar,
	Redis:      RedisURLVar,
}

// InCI reports whether the tests run in CI, where the CI environment
// variable is "true" or "1" (GitHub Actions, GitLab CI and most others set
// it to "true").
func InCI() bool {
	switch os.Getenv("CI") {
	case "true", "1":
		return true
	}
	return false
}

// ServiceUnavailable ends the test because service (for example
// [PostgreSQL]) could not be reached; err says why. In CI it fails the
// test, elsewhere it skips it. Either way it does not return.
func ServiceUnavailable(t testing.TB, service string, err error) {
	t.Helper()
	ci := InCI()
	msg := unavailableMessage(service, err, ci)
	if ci {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

func unavailableMessage(service string, err error, ci bool) string {
	envVar, ok := envVars[service]
	if !ok {
		envVar = "the environment variable that points tests at it"
	}
	if ci {
		return fmt.Sprintf("%s is required in CI but is unreachable: %v\n"+
			"Provide it: run the tests with ./test.sh, which installs and starts it, or set %s to a reachable instance.",
			service, err, envVar)
	}
	return fmt.Sprintf("skipping: %s is unreachable: %v\n"+
		"Set %s to a reachable instance, or run ./test.sh, which starts it.",
		service, err, envVar)
}

package config_test

import (
	"flag"
	"fmt"

	"github.com/cikit/cikit/reference/config"
)

// A Loader reads flags over CIKIT_* variables over a config file (here
// none) over the defaults. In `cikit serve` the environment is
// os.Environ().
func ExampleLoader() {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	loader := config.NewLoader(fs)
	if err := fs.Parse([]string{"-listen", ":9090", "-log.format", "json"}); err != nil {
		fmt.Println(err)
		return
	}
	cfg, warnings, err := loader.Load([]string{
		"CIKIT_LOG_LEVEL=debug",
		"CIKIT_LOG_FORMAT=text", // the flag wins
		"CIKIT_KAFKA_BROKERS=kafka-0:9092,kafka-1:9092",
		"CIKIT_LISTEN_ADDR=:1", // a typo
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Listen, cfg.Log.Level, cfg.Log.Format, cfg.Kafka.Brokers)
	fmt.Println("embedded:", cfg.Embedded(), "local runners:", cfg.LocalRunners())
	for _, w := range warnings {
		fmt.Println("warning:", w)
	}
	// Output:
	// :9090 debug json [kafka-0:9092 kafka-1:9092]
	// embedded: true local runners: 2
	// warning: $CIKIT_LISTEN_ADDR names no setting; ignored
}

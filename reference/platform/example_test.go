package platform_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/cikit/cikit/reference/config"
	"github.com/cikit/cikit/reference/platform"
)

// Example runs the embedded platform, as `cikit serve` does with no flags,
// until the process is interrupted. Setting cfg.Postgres.URL,
// cfg.Kafka.Brokers, cfg.Redis.URL and cfg.S3.Bucket moves it to real
// services.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg := config.Default()
	cfg.DataDir = "/var/lib/cikit"
	p, err := platform.New(ctx, cfg, platform.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(p.Banner())
	if err := p.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

package artifacts_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
)

// An S3Store against a local S3 server, here an in-process one (gofakes3).
// Against AWS, set Bucket and Region and leave the rest empty: credentials
// then come from the environment.
func ExampleS3Store() {
	backend := s3mem.New()
	if err := backend.CreateBucket("ci"); err != nil {
		panic(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	defer srv.Close()

	ctx := context.Background()
	store, err := artifacts.NewS3Store(ctx, artifacts.S3Config{
		Bucket:          "ci",
		Prefix:          "blobs",
		Endpoint:        srv.URL,
		AccessKeyID:     "example",
		SecretAccessKey: "example-secret",
		HTTPClient:      srv.Client(),
	})
	if err != nil {
		panic(err)
	}

	report := "PASS: 42 tests\n"
	if err := store.Put(ctx, "run-1/test/report.txt", strings.NewReader(report), int64(len(report))); err != nil {
		panic(err)
	}
	info, err := store.Stat(ctx, "run-1/test/report.txt")
	if err != nil {
		panic(err)
	}
	fmt.Println("stored", info.Size, "bytes")

	rc, err := store.Get(ctx, "run-1/test/report.txt")
	if err != nil {
		panic(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		panic(err)
	}
	fmt.Print(string(b))

	err = store.Put(ctx, "run-1/test/short.txt", strings.NewReader("abc"), 10)
	fmt.Println("wrong size:", errors.Is(err, artifacts.ErrWrongSize))
	_, err = store.Get(ctx, "run-1/test/short.txt")
	fmt.Println("nothing stored:", errors.Is(err, cikit.ErrNotFound))
	// Output:
	// stored 15 bytes
	// PASS: 42 tests
	// wrong size: true
	// nothing stored: true
}

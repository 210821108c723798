// Command imagejob runs one job in an image with a sandboxed executor
// and prints its output: built without cgo, it shows that a static
// executor's program runs as the supervisor of a job in an image as it
// is. Usage: imagejob ROOTFS WORKROOT SCRIPT.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/process"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: imagejob ROOTFS WORKROOT SCRIPT")
		os.Exit(2)
	}
	src, err := os.MkdirTemp("", "imagejob-src-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(src)
	e, err := process.New(process.Config{Source: src, WorkRoot: os.Args[2], Env: []string{"PATH=" + os.Getenv("PATH")},
		Sandbox: &process.Sandbox{}, Output: func(*cikit.JobSpec) io.Writer { return os.Stdout }})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	res := e.RunJob(context.Background(), process.Job{Image: &process.Image{Rootfs: os.Args[1], Env: []string{"PATH=/bin"}},
		Spec: &cikit.JobSpec{ID: "static", Steps: []cikit.Step{{Name: "script", Run: os.Args[3]}}}})
	if res.State != cikit.JobSucceeded {
		fmt.Fprintln(os.Stderr, res.Reason)
		os.Exit(1)
	}
}

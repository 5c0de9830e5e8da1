package docstest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/augloader/augloader/internal/testkit/testutil"
)

// testBlocks returns the ```sh test blocks of a markdown file, in order.
func testBlocks(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)```sh test\n(.*?)```")
	var out []string
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

// TestDeployGuide runs the single-host commands of docs/deploy.md, in
// order, in one shell, with freshly built binaries on PATH: conversion,
// a per-node daemon read by a rank, a two-daemon Flight pool read together
// and checked against one daemon.
func TestDeployGuide(t *testing.T) {
	root := testutil.Root(t)
	blocks := testBlocks(t, filepath.Join(root, "docs", "deploy.md"))
	if len(blocks) < 3 {
		t.Fatalf("docs/deploy.md has %d test blocks, want the shards, node and pool ones", len(blocks))
	}
	bin := binaries(t)
	for _, tool := range []string{"curl", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("docs/deploy.md uses %s, which this machine lacks", tool)
		}
	}
	dir := t.TempDir()
	// set -x: a failure shows which command it was. The script and the
	// daemons it starts share a process group, killed whole on timeout and
	// at the end, so no daemon outlives the test holding the guide's ports.
	script := "set -euxo pipefail\n" + strings.Join(blocks, "\n")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if ctx.Err() != nil || err != nil {
		// The daemons' own logs say why one of them stopped (a port taken,
		// a flag refused), which the script's trace cannot.
		logs := ""
		for _, f := range []string{"node.log", "pool-28815.log", "pool-28816.log"} {
			if b, e := os.ReadFile(filepath.Join(dir, f)); e == nil {
				logs += "\n--- " + f + "\n" + string(b)
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("the guide's commands did not finish in 3 minutes:\n%s%s", out, logs)
		}
		t.Fatalf("docs/deploy.md's commands failed: %v\n%s%s", err, out, logs)
	}
	for _, f := range []string{"rank1.json", "one.json", "two.json"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Fatalf("%s not written: %v", f, err)
		}
	}
}

package docstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/augloader/augloader/internal/testutil"
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
	bin := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", bin+"/", "github.com/augloader/augloader/cmd/...").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, tool := range []string{"curl", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("docs/deploy.md uses %s, which this machine lacks", tool)
		}
	}
	dir := t.TempDir()
	script := "set -euo pipefail\n" + strings.Join(blocks, "\n")
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the guide's commands did not finish in 3 minutes:\n%s", out)
	}
	if err != nil {
		logs := ""
		for _, f := range []string{"node.log", "pool-38815.log", "pool-38816.log"} {
			if b, e := os.ReadFile(filepath.Join(dir, f)); e == nil {
				logs += "\n--- " + f + "\n" + string(b)
			}
		}
		t.Fatalf("docs/deploy.md's commands failed: %v\n%s%s", err, out, logs)
	}
	for _, f := range []string{"rank1.json", "one.json", "two.json"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Fatalf("%s not written: %v", f, err)
		}
	}
}

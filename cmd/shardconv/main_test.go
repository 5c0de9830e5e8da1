package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augloader/augloader/internal/testutil"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shardconv-test-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "shardconv")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func TestCLI(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "tiny.shards")
	if _, e, code := run(t, "convert", "--input", testutil.Testdata(t, "tu", "TINY.zip"), "--out", out); code != 0 {
		t.Fatalf("convert exit %d: %s", code, e)
	}
	so, _, code := run(t, "stats", "--json", out)
	if code != 0 {
		t.Fatalf("stats exit %d", code)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(so), &st); err != nil {
		t.Fatalf("stats output is not JSON: %v\n%s", err, so)
	}
	for _, k := range []string{"graphs", "nodes", "edges", "classes", "feature_kind", "feature_dim", "self_loops_dropped", "duplicate_edges_dropped"} {
		if _, ok := st[k]; !ok {
			t.Errorf("stats --json lacks %q", k)
		}
	}
	if st["graphs"] != 3.0 || st["edges"] != 6.0 || st["self_loops_dropped"] != 1.0 {
		t.Errorf("stats %v", st)
	}
	if so, _, code := run(t, "verify", out); code != 0 || !strings.Contains(so, "ok") {
		t.Fatalf("verify exit %d: %s", code, so)
	}
	// Refuses to overwrite without --force.
	if _, e, code := run(t, "convert", "-i", testutil.Testdata(t, "tu", "TINY"), "-o", out); code != 1 || !strings.Contains(e, "--force") {
		t.Fatalf("overwrite: exit %d: %s", code, e)
	}
	// A flipped byte: verify exits 1 naming the shard.
	p := filepath.Join(out, "shard-00000.arrow")
	b, _ := os.ReadFile(p)
	b[100] ^= 1
	os.WriteFile(p, b, 0o644)
	if _, e, code := run(t, "verify", out); code != 1 || !strings.Contains(e, "shard-00000.arrow: checksum") {
		t.Fatalf("verify corrupt: exit %d: %s", code, e)
	}
	// Bad input names the file and line, exit 1, no output left.
	bad := filepath.Join(dir, "bad.shards")
	_, e, code := run(t, "convert", "-i", testutil.Testdata(t, "tu", "bad", "node_out_of_range"), "-o", bad, "--name", "TINY")
	if code != 1 || !strings.Contains(e, "TINY_A.txt:5") {
		t.Fatalf("bad input: exit %d: %s", code, e)
	}
	if _, err := os.Stat(bad); err == nil {
		t.Fatal("bad input left an output folder")
	}
	if so, _, code := run(t, "convert", "--help"); code != 0 || !strings.Contains(so, "--shard-size") {
		t.Fatalf("help: %d %s", code, so)
	}
}

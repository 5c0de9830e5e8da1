package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/augloader/augloader/internal/cliutil"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/urfave/cli/v2"
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

// Flags are accepted after positionals (urfave/cli v2 alone stops at the
// first one: `stats DIR --json` failed), and a value out of range is an
// error naming the flag.
func TestFlagsAnywhere(t *testing.T) {
	out := filepath.Join(t.TempDir(), "tiny.shards")
	if _, e, code := run(t, "convert", "-o", out, "--quiet", "-i", testutil.Testdata(t, "tu", "TINY.zip")); code != 0 {
		t.Fatalf("convert: %s", e)
	}
	so, e, code := run(t, "stats", out, "--json")
	var st map[string]any
	if code != 0 || json.Unmarshal([]byte(so), &st) != nil {
		t.Fatalf("stats DIR --json: exit %d, %q %s", code, so, e)
	}
	if _, e, code := run(t, "verify", out); code != 0 {
		t.Fatalf("verify: %s", e)
	}
	for _, c := range [][]string{
		{"convert", "-i", out, "-o", out + "2", "--shard-size", "0", "--shard-size 0: want 65536..17179869184"},
		{"convert", "-i", out, "-o", out + "2", "--features", "colour", `--features "colour": want one of auto, labels, attributes, degree`},
		{"convert", "-i", out, "-o", out + "2", "--compression", "brotli", `--compression "brotli"`},
		{"synth", "--like", "COLLAB", "--out", out + "3", "--graphs", "-2", "--graphs -2: want an integer ≥ 1"},
	} {
		_, e, code := run(t, c[:len(c)-1]...)
		if code == 0 || !strings.Contains(e, c[len(c)-1]) {
			t.Errorf("%v: exit %d, %q", c[:len(c)-1], code, e)
		}
	}
}

// kill -9 in the middle of a conversion leaves its temporary folder; the
// next conversion to the same output removes it (its lock is free) and
// leaves nothing but the output.
func TestKilledConvertLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "collab-tu")
	if _, e, code := run(t, "synth", "--like", "COLLAB", "--graphs", "1500", "--seed", "1", "--out", in); code != 0 {
		t.Fatal(e)
	}
	parent := filepath.Join(dir, "out")
	out := filepath.Join(parent, "collab.shards")
	temps := func() []string {
		m, _ := filepath.Glob(filepath.Join(parent, ".collab.shards.tmp-*"))
		return m
	}
	for try := 0; ; try++ {
		cmd := exec.Command(bin, "convert", "-q", "-i", in, "-o", out)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); len(temps()) == 0 && time.Now().Before(deadline); {
			time.Sleep(2 * time.Millisecond)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if _, err := os.Stat(out); err == nil {
			if try == 5 {
				t.Skip("the conversion finished before it could be killed, five times")
			}
			os.RemoveAll(out)
			continue
		}
		break
	}
	if len(temps()) == 0 {
		t.Fatal("the killed conversion left no temporary folder to clean (the test did not kill it mid-way)")
	}
	if _, e, code := run(t, "convert", "-q", "-i", in, "-o", out); code != 0 {
		t.Fatalf("rerun: %s", e)
	}
	if left := temps(); len(left) != 0 {
		t.Fatalf("the rerun left %v", left)
	}
	ents, _ := os.ReadDir(parent)
	if len(ents) != 1 || ents[0].Name() != "collab.shards" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("%s holds %v, want only the output", parent, names)
	}
}

// Every flag of every command is moved ahead of a positional argument
// that precedes it, with its value.
func TestEveryFlagAfterPositionals(t *testing.T) {
	a := app()
	for _, cmd := range a.Commands {
		for _, f := range cmd.Flags {
			name := f.Names()[0]
			_, isBool := f.(*cli.BoolFlag)
			args := []string{a.Name, cmd.Name, "POS", "--" + name}
			want := []string{a.Name, cmd.Name, "--" + name}
			if !isBool {
				args = append(args, "VALUE")
				want = append(want, "VALUE")
			}
			want = append(want, "POS")
			if got := cliutil.Permute(a, args); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("%s %s: %v, want %v", cmd.Name, name, got, want)
			}
		}
	}
}

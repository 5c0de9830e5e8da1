package main

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/augloader/augloader/internal/cliutil"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/shard"
	"github.com/urfave/cli/v2"
)

var bin string

// TestMain runs the tests against the checkout's binary: make test's,
// built once (AUGLOADER_BIN), or one built for this package
// (testutil.Binaries).
func TestMain(m *testing.M) {
	dir, err := testutil.Binaries()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	bin = filepath.Join(dir, "shardconv")
	fixture.Main(m)
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

// A URL where a local path goes is refused, and nothing is written
// (`-o s3://my-bucket/x` made ./s3:/my-bucket/x and exited 0); an OGB name
// given to download is refused before anything is fetched (issue #45).
func TestURLsAndOGBNamesRefused(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"convert", "-i", "s3://my-bucket/in", "-o", filepath.Join(dir, "x.shards")},
		{"download", "--cache", filepath.Join(dir, "cache"), "--base-url", "http://127.0.0.1:1/", "ogbg-molhiv"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		want := "convert reads datasets from local disk only"
		if args[0] == "download" {
			want = "ogbg-molhiv is an OGB dataset, not a TU one"
		}
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("%v: %v, %s; want an error saying %q", args, err, out, want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a refused command wrote %v", ents)
	}
	// -o s3:// without any AWS configuration: the error says what to
	// set, at once (no retries of what cannot change), before converting.
	cmd := exec.Command(bin, "convert", "-i", testutil.Testdata(t, "tu", "TINY.zip"), "-o", "s3://my-bucket/x")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "AWS_EC2_METADATA_DISABLED=true"}
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "AWS_ACCESS_KEY_ID") || strings.Contains(string(out), "graphs") || time.Since(t0) > 10*time.Second {
		t.Errorf("-o s3:// with no AWS configuration: %v after %v:\n%s", err, time.Since(t0), out)
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
	// Byte flags take units, as augloader's do.
	if _, e, code := run(t, "convert", "-q", "-i", testutil.Testdata(t, "tu", "TINY.zip"), "-o", out+"4", "--shard-size", "2MiB", "--max-pickle", "1GiB"); code != 0 {
		t.Fatalf("--shard-size 2MiB: %s", e)
	}
	for _, c := range [][]string{
		{"convert", "-i", out, "-o", out + "2", "--shard-size", "0", "--shard-size 0: want 64KiB..16GiB"},
		{"convert", "-i", out, "-o", out + "2", "--shard-size", "2 parsecs", `--shard-size "2 parsecs": want a size such as 512MiB`},
		{"convert", "-i", out, "-o", out + "2", "--max-graph-nodes", "0", "--max-graph-nodes 0: want 1..1073741824"},
		{"convert", "-i", out, "-o", out + "2", "--max-pickle", "1B", "--max-pickle 1B: want 1KiB..16GiB"},
		{"synth", "--like", "COLLAB", "--out", out + "3", "--graphs", "1000000000000", "--graphs 1000000000000: want 1..100000000"},
		{"convert", "-i", out, "-o", out + "2", "--features", "colour", `--features "colour": want one of auto, labels, attributes, degree`},
		{"convert", "-i", out, "-o", out + "2", "--compression", "brotli", `--compression "brotli"`},
		{"synth", "--like", "COLLAB", "--out", out + "3", "--graphs", "-2", "--graphs -2: want 1..100000000"},
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

// bigOneGraph writes an OGB csv.gz folder of one graph of m edges (a
// path): the converter reads it for seconds without reaching a second
// graph, where cancellation used to be checked.
func bigOneGraph(t *testing.T, m int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "one-big")
	raw := filepath.Join(dir, "raw")
	os.MkdirAll(raw, 0o755)
	write := func(name string, fill func(w *bufio.Writer)) {
		f, err := os.Create(filepath.Join(raw, name))
		if err != nil {
			t.Fatal(err)
		}
		zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
		bw := bufio.NewWriterSize(zw, 1<<20)
		fill(bw)
		bw.Flush()
		zw.Close()
		f.Close()
	}
	write("edge.csv.gz", func(w *bufio.Writer) {
		for i := range m {
			w.WriteString(strconv.Itoa(i))
			w.WriteByte(',')
			w.WriteString(strconv.Itoa(i + 1))
			w.WriteByte('\n')
		}
	})
	write("num-node-list.csv.gz", func(w *bufio.Writer) { fmt.Fprintf(w, "%d\n", m+1) })
	write("num-edge-list.csv.gz", func(w *bufio.Writer) { fmt.Fprintf(w, "%d\n", m) })
	write("graph-label.csv.gz", func(w *bufio.Writer) { w.WriteString("1\n") })
	return dir
}

// SIGTERM during a conversion stops it: no output committed, exit
// non-zero, no temporary folder left (it ran on, committed its output and
// exited 0: cancellation was checked only between graphs, and this input
// has one).
func TestSIGTERMDuringConvert(t *testing.T) {
	in := bigOneGraph(t, 3_000_000)
	parent := t.TempDir()
	out := filepath.Join(parent, "big.shards")
	cmd := exec.Command(bin, "convert", "-q", "-i", in, "-o", out)
	var e strings.Builder
	cmd.Stderr = &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Signalled once the conversion is under way (its temporary folder,
	// or its reading, begun).
	time.Sleep(300 * time.Millisecond)
	t0 := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	took := time.Since(t0)
	if err == nil {
		t.Fatalf("exit 0 after SIGTERM (took %v):\n%s", took, e.String())
	}
	if _, serr := os.Stat(out); serr == nil {
		t.Fatalf("the output was committed after SIGTERM")
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
	if took > 2*time.Second {
		t.Fatalf("stopped %v after SIGTERM", took)
	}
	t.Logf("stopped %v after SIGTERM: %s", took.Round(time.Millisecond), strings.TrimSpace(e.String()))
}

// SIGTERM or SIGINT while `convert --force --order random:SEED` writes
// its shards (every graph is held, then written in the seeded order at
// the end) stops it at once and leaves the existing output as it was
// (b497eeb ignored the signal until it had committed: 13 of 16 late
// signals exited 0 with the old output replaced; issue #45).
func TestSignalDuringRandomOrderWrite(t *testing.T) {
	parent := t.TempDir()
	tu := filepath.Join(parent, "tu")
	if _, e, code := run(t, "synth", "--like", "COLLAB", "--graphs", "6000", "--seed", "3", "--out", tu); code != 0 {
		t.Fatal(e)
	}
	out := filepath.Join(parent, "out.shards")
	if _, e, code := run(t, "convert", "-q", "-i", tu, "-o", out); code != 0 {
		t.Fatal(e)
	}
	before, err := os.ReadFile(filepath.Join(out, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.Command(bin, "convert", "-q", "--force", "--order", "random:1", "-i", tu, "-o", out)
		var e strings.Builder
		cmd.Stderr = &e
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The write phase: a shard file of the new output, growing in its
		// temporary folder beside the old one.
		deadline := time.Now().Add(60 * time.Second)
		for !writing(parent, out) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("%v: the write phase never began:\n%s", sig, e.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		t0 := time.Now()
		cmd.Process.Signal(sig)
		err := cmd.Wait()
		took := time.Since(t0)
		if err == nil {
			t.Fatalf("%v during the write: exit 0 (%v after the signal), the output replaced", sig, took)
		}
		after, rerr := os.ReadFile(filepath.Join(out, "manifest.json"))
		if rerr != nil || string(after) != string(before) {
			t.Fatalf("%v during the write: the existing output changed (%v)", sig, rerr)
		}
		if ents, _ := os.ReadDir(parent); len(ents) != 2 {
			t.Fatalf("%v: left behind: %v", sig, ents)
		}
		if took > 2*time.Second {
			t.Fatalf("%v: stopped %v after the signal", sig, took)
		}
		t.Logf("%v: stopped %v after the signal; the old output intact", sig, took.Round(time.Millisecond))
	}
}

// writing reports whether a convert into out is writing shards: a folder
// beside out (its temporary one) holding a shard file with bytes in it.
func writing(parent, out string) bool {
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		p := filepath.Join(parent, e.Name())
		if !e.IsDir() || p == out {
			continue
		}
		shards, _ := filepath.Glob(filepath.Join(p, "shard-*.arrow"))
		for _, f := range shards {
			if st, err := os.Stat(f); err == nil && st.Size() > 0 {
				return true
			}
		}
	}
	return false
}

// verify and stats refuse a FIFO where the shard folder has a file, at
// once and naming it (verify blocked on graph-sizes.bin past SIGTERM).
func TestVerifyRefusesFIFO(t *testing.T) {
	out := filepath.Join(t.TempDir(), "tiny.shards")
	if _, e, code := run(t, "convert", "-q", "-i", testutil.Testdata(t, "tu", "TINY.zip"), "-o", out); code != 0 {
		t.Fatal(e)
	}
	for _, name := range []string{"graph-sizes.bin", "manifest.json", "shard-00000.arrow"} {
		p := filepath.Join(out, name)
		body, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(p)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{"verify", "stats"} {
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, e, code := run(t, cmd, out)
				if cmd == "stats" && name != "manifest.json" {
					return // stats reads the manifest alone
				}
				if code == 0 || !strings.Contains(e, name) || !strings.Contains(e, "not a regular file") {
					t.Errorf("%s with a FIFO %s: exit %d, %q", cmd, name, code, e)
				}
			}()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("%s hung on a FIFO %s", cmd, name)
			}
		}
		os.Remove(p)
		os.WriteFile(p, body, 0o644)
	}
}

// A molecule set describes itself: its task, its node and edge columns
// with their vocabularies, and no false asymmetry count (stats printed
// "classes 0 []" and "features columns, dim 0", and --json counted every
// bond asymmetric: OGB lists each bond once, by convention).
func TestStatsDescribesMolecules(t *testing.T) {
	dir := testutil.Testdata(t, "golden", "tinymol.shards")
	out, e, code := run(t, "stats", dir)
	if code != 0 {
		t.Fatal(e)
	}
	for _, want := range []string{"task         regression targets ×2 (33% missing)",
		"node columns 2 categorical (1-byte codes; name and vocabulary): node_feat_0 10, node_feat_1 2",
		"edge columns 2 categorical (2-byte codes; name and vocabulary): edge_feat_0 301, edge_feat_1 2",
		"5 listed one way, their reverse added"} {
		if !strings.Contains(out, want) {
			t.Errorf("stats lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "classes      0") {
		t.Errorf("stats of a regression set prints classes:\n%s", out)
	}
	js, _, _ := run(t, "stats", "--json", dir)
	var st map[string]any
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		t.Fatal(err)
	}
	if _, ok := st["asymmetric_edges"]; ok || st["edges_listed_one_way"] != 5.0 || st["task"] == nil || st["node_features"] == nil {
		t.Fatalf("stats --json: %s", js)
	}
}

// shardconv's usage errors lead with the error and the nearest name,
// exit status 2.
func TestUsageErrorsLead(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"convert", "--inptu", "x"}, "shardconv convert: unknown flag --inptu (did you mean --input?)"},
		{[]string{"conver", "-i", "x"}, `shardconv: no command "conver" (did you mean "convert"?)`},
	} {
		stdout, stderr, code := run(t, tc.args...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 2 || !strings.HasPrefix(lines[0], tc.want) || len(lines) != 2 || stdout != "" {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q\nwant exit 2 and %q first", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

// Every example value convert's flags give in their help is one convert
// takes (download's are the same flags, and download needs the TU site).
func TestHelpExamplesRun(t *testing.T) {
	dir := t.TempDir()
	tu := filepath.Join(dir, "tu")
	if _, stderr, code := run(t, "synth", "--like", "COLLAB", "--graphs", "40", "--seed", "1", "--out", tu); code != 0 {
		t.Fatal(stderr)
	}
	eg := regexp.MustCompile(`e\.g\. ('[^']+'|.+?)(?:; |, | \(|\)|$)`)
	ran := 0
	for _, f := range app().Command("convert").Flags {
		u, ok := f.(interface{ GetUsage() string })
		if !ok {
			continue
		}
		for _, m := range eg.FindAllStringSubmatch(u.GetUsage(), -1) {
			for _, alt := range regexp.MustCompile(` \| | or `).Split(strings.Trim(strings.TrimSpace(m[1]), "'"), -1) {
				ran++
				out := filepath.Join(dir, fmt.Sprintf("out-%d", ran))
				if _, stderr, code := run(t, "convert", "-q", "-i", tu, "-o", out, "--"+f.Names()[0], alt); code != 0 {
					t.Errorf("convert --%s %s (its help's example): exit %d\n%s", f.Names()[0], alt, code, stderr)
				}
			}
		}
	}
	if ran == 0 {
		t.Fatal("no example found in convert's help")
	}
}

// shardconv pagemap maps a folder converted before page maps (its
// manifest without them), reseals it so that verify passes, says so, and
// leaves a mapped folder as it is; a folder that is not one exits 1
// naming it.
func TestPagemapCommand(t *testing.T) {
	dir := t.TempDir()
	tu, out := filepath.Join(dir, "tu"), filepath.Join(dir, "shards")
	if _, stderr, code := run(t, "synth", "--like", "COLLAB", "--graphs", "60", "--seed", "2", "--out", tu); code != 0 {
		t.Fatal(stderr)
	}
	if _, stderr, code := run(t, "convert", "-q", "-i", tu, "-o", out, "--shard-size", "64KiB"); code != 0 {
		t.Fatal(stderr)
	}
	fixture.WithoutPageMap(t, out)
	man, err := shard.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, "pagemap", out)
	if code != 0 || !strings.Contains(stdout, fmt.Sprintf("mapped %d of %d shards", len(man.Shards), len(man.Shards))) {
		t.Fatalf("pagemap: exit %d\n%s%s", code, stdout, stderr)
	}
	if stdout, stderr, code := run(t, "verify", out); code != 0 {
		t.Fatalf("verify after pagemap: exit %d\n%s%s", code, stdout, stderr)
	}
	if stdout, _, code := run(t, "pagemap", out); code != 0 || !strings.Contains(stdout, "already mapped") {
		t.Fatalf("pagemap of a mapped folder: exit %d, %s", code, stdout)
	}
	missing := filepath.Join(dir, "nowhere")
	if _, stderr, code := run(t, "pagemap", missing); code != 1 || !strings.Contains(stderr, missing) {
		t.Fatalf("pagemap of no folder: exit %d, %s", code, stderr)
	}
}

package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/shard"
)

// npyInt64 is an int64 array as numpy.save writes it.
func npyInt64(shape []int, vals ...int64) []byte {
	return testutil.Npy("<i8", shape, false, testutil.Int64s(vals...))
}

func writeNpz(t *testing.T, p string, arrays map[string][]byte) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for name, body := range arrays {
		w, _ := zw.Create(name + ".npy")
		w.Write(body)
	}
	zw.Close()
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// hugeGraphShards converts a 1 KB OGB npz of three graphs: graph 0
// declares 2^27 nodes and holds one edge, graphs 1 and 2 are triangles
// (its node count past the converter's default limit, raised as a user
// would).
func hugeGraphShards(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "huge")
	writeNpz(t, filepath.Join(dir, "raw", "data.npz"), map[string][]byte{
		"num_nodes_list": npyInt64([]int{3}, 1<<27, 3, 3),
		"num_edges_list": npyInt64([]int{3}, 1, 3, 3),
		"edge_index":     npyInt64([]int{2, 7}, 0, 0, 1, 0, 0, 1, 2 /**/, 1, 1, 2, 2, 1, 2, 0),
	})
	writeNpz(t, filepath.Join(dir, "raw", "graph-label.npz"), map[string][]byte{"graph_label": npyInt64([]int{3, 1}, 1, 0, 1)})
	out := filepath.Join(t.TempDir(), "huge.shards")
	if _, err := convert.Run(context.Background(), convert.Options{Input: dir, Out: out, Limits: ingest.Limits{MaxNodes: 1 << 28}}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A 1 KB input whose graph declares 2^27 nodes does not kill the daemon
// (it grew to 4-5 GiB under these flags on its first NodeSam or SubMix
// fetch and died of Go's fatal out-of-memory): a request whose batches
// hold a graph that could never be augmented within --memory-budget is
// refused before anything is sent, naming the graph; the daemon says so
// at start, serves it unaugmented (policy none) and everything else, and
// stays within --cache-limit + --memory-budget + --ppr-cache + 128 MiB.
func TestHugeGraphWithinBound(t *testing.T) {
	shards := hugeGraphShards(t)
	d := startDaemon(t, "", "--shards", shards, "--cache-limit", "64MiB", "--memory-budget", "64MiB", "--ppr-cache", "16MiB",
		"--view", "ns=all:nodesam", "--view", "sm=all:submix", "--view", "plain=all:none", "--workers", "2")
	for _, c := range []struct{ view, want string }{
		{"ns", "graph 0 (134217728 nodes, 1 edges) needs about"},
		// Any SubMix target may draw graph 0 as its partner.
		{"sm", "partner may be the served set's largest graph (134217728 nodes"},
		{"ns", "graph 0 (134217728 nodes, 1 edges) needs about"},
	} {
		_, stderr, code := runBin(t, "fetch", "--addr", d.sock, "--view", c.view)
		if code == 0 || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "--memory-budget") {
			t.Fatalf("view %s: exit %d, %s", c.view, code, stderr)
		}
	}
	out, stderr, code := runBin(t, "fetch", "--addr", d.sock, "--view", "plain")
	if code != 0 || !strings.Contains(out, "3 graphs") {
		t.Fatalf("view plain: exit %d\n%s%s", code, out, stderr)
	}
	peak := peakRSSKiB(t, d.cmd.Process.Pid)
	const bound = (64 + 64 + 16 + 128) << 10
	t.Logf("peak RSS %d MiB (bound %d MiB)", peak>>10, bound>>10)
	if peak > bound {
		t.Fatalf("peak RSS %d KiB over the documented bound of %d KiB", peak, bound)
	}
	d.stop(t)
	if !strings.Contains(d.logs.String(), "view ns: graph 0 (134217728 nodes, 1 edges) needs about") {
		t.Fatalf("the start-up log does not name the graph:\n%s", d.logs)
	}
}

// The start-up note names a graph too large to augment under a twin set's
// schedule as well as under the main one (it named only the main
// schedule's: a daemon serving none with NodeSam twins said nothing).
func TestOversizeNamesTwinSchedules(t *testing.T) {
	shards := hugeGraphShards(t)
	d := startDaemon(t, "", "--shards", shards, "--cache-limit", "64MiB", "--memory-budget", "64MiB",
		"--policy", "none", "--twins", "none / nodesam", "--workers", "1")
	d.stop(t)
	if !strings.Contains(d.logs.String(), "graph 0 (134217728 nodes, 1 edges) needs about") || !strings.Contains(d.logs.String(), "with nodesam") {
		t.Fatalf("the start-up log does not name the twin schedule's oversize graph:\n%s", d.logs)
	}
}

// A FIFO (or another non-regular file) where the shard folder has a file
// is refused at once, naming it: opening a FIFO for reading blocks until a
// writer comes, and serve, materialize and verify hung there, past the
// first SIGTERM.
func TestNonRegularFilesRefused(t *testing.T) {
	src := fixture.SynthShards(t, "COLLAB", 40, 1)
	for _, name := range []string{shard.GraphSizesName, shard.ManifestName, "shard-00000.arrow"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "s")
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(dir, name))
			if err := syscall.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{
				{"serve", "--shards", dir, "--socket", filepath.Join(t.TempDir(), "s.sock")},
				{"materialize", "--shards", dir, "--out", filepath.Join(t.TempDir(), "m"), "--epochs", "0:1"},
			} {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				cmd := exec.CommandContext(ctx, bin, args...)
				var errb strings.Builder
				cmd.Stderr = &errb
				t0 := time.Now()
				err := cmd.Run()
				hung := ctx.Err() != nil
				cancel()
				if hung {
					t.Fatalf("%s hung on a FIFO %s", args[0], name)
				}
				if err == nil || !strings.Contains(errb.String(), name) || !strings.Contains(errb.String(), "not a regular file") {
					t.Fatalf("%s: %v\n%s", args[0], err, errb.String())
				}
				t.Logf("%s refused in %v: %s", args[0], time.Since(t0).Round(time.Millisecond), strings.TrimSpace(errb.String()))
			}
		})
	}
}

// serve --twins and fetch --twins end to end: the daemon's log names the
// twins a view serves; a fetch of twins counts graphs once (each is sent
// twice); malformed weights are refused by the flag parser (exit 2), and
// another k than the daemon's sets by the daemon, naming it.
func TestServeFetchTwins(t *testing.T) {
	shards := fixture.SynthShards(t, "COLLAB", 60, 1)
	d := startDaemon(t, "", "--shards", shards, "--policy", "none", "--workers", "2",
		"--twins", "dropnode:ratio=0.2 / subgraph", "--twins", "attrmask / dropedge:ratio=0.1")
	out, stderr, code := runBin(t, "fetch", "--addr", d.sock, "--twins", "2", "--twin-weights", "1,3", "--json")
	if code != 0 || !strings.Contains(out, `"graphs":60`) {
		t.Fatalf("fetch --twins 2: exit %d\n%s%s", code, out, stderr)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--twins", "2", "--twin-weights", "1,x"}, 2, `"x" is not a number`},
		{[]string{"--twin-weights", "1,1"}, 2, "twin_weights without twins"},
		{[]string{"--twins", "2", "--twin-weights", "0,0"}, 2, "every twin weight is 0"},
		{[]string{"--twins", "3"}, 1, "sets are of 2"},
		{[]string{"--twins", "2", "--twin-weights", "1"}, 1, "1 twin weights for the daemon's 2 twin sets"},
	} {
		_, stderr, code := runBin(t, append([]string{"fetch", "--addr", d.sock}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("fetch %v: exit %d, %s; want exit %d saying %q", c.args, code, stderr, c.code, c.want)
		}
	}
	d.stop(t)
	if !strings.Contains(d.logs.String(), "twins=2") {
		t.Fatalf("the start-up log does not say the twins:\n%s", d.logs)
	}
}

// fetch --json is a summary (3520536 printed every batch's hash in it):
// the list of batch hashes only with --batch-hashes, one a batch, whose
// digest is the summary's batches_sha256.
func TestFetchJSONIsASummary(t *testing.T) {
	shards := fixture.SynthShards(t, "COLLAB", 60, 1)
	d := startDaemon(t, "", "--shards", shards, "--batch-size", "8")
	read := func(extra ...string) map[string]any {
		t.Helper()
		out, stderr, code := runBin(t, append([]string{"fetch", "--addr", d.sock, "--epoch", "1", "--json"}, extra...)...)
		var got map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("fetch --json %v: exit %d\n%s%s", extra, code, out, stderr)
		}
		return got
	}
	sum := read()
	if _, ok := sum["batch_sha256"]; ok || sum["batches_sha256"] == nil || sum["batches"] != 8.0 {
		t.Fatalf("fetch --json is not a summary: %v", sum)
	}
	all := read("--batch-hashes")
	list, _ := all["batch_sha256"].([]any)
	if len(list) != 8 || all["batches_sha256"] != sum["batches_sha256"] {
		t.Fatalf("fetch --json --batch-hashes: %d hashes for 8 batches, batches_sha256 %v vs %v", len(list), all["batches_sha256"], sum["batches_sha256"])
	}
	d.stop(t)
}

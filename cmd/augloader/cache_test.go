package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/wire"
)

// epochDigests reads epoch e of the daemon at sock from batch start on and
// returns each batch's SHA-256.
func epochDigests(t *testing.T, sock string, e uint64, start int) [][32]byte {
	t.Helper()
	res, err := client.Fetch(context.Background(), sock, wire.Request{Epoch: e, World: 1, StartBatch: start},
		client.Options{Digests: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.BatchDigests
}

// A daemon under --cache-limit serving a set whose decoded shards (and
// NodeSam indexes) are several times the limit: its peak RSS stays under
// the limit plus --memory-budget, --ppr-cache and ProcessOverhead, while the
// same daemon without a limit holds more; every batch is byte-identical
// to the unlimited daemon's in the same shuffle mode, and a restarted
// daemon resumed mid-epoch sends the rest of the epoch's bytes. (The
// global shuffle under a limit, as slow as a shard read per graph, is
// checked byte for byte in package loader.)
func TestCacheLimitBoundsMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	shards := fixture.SynthShardsSized(t, "COLLAB", 4000, 5, 256<<10)
	const limit = 16 << 20
	base := []string{"--shards", shards, "--policy", "nodesam:0.5,submix:p=0.4:0.5", "--workers", "2",
		"--memory-budget", "16MiB", "--ppr-cache", "0"}
	bound := (limit + 16<<20 + ProcessOverhead) / 1024
	for _, shuffle := range []string{"window:2"} {
		t.Run(shuffle, func(t *testing.T) {
			full := startDaemon(t, "", append(base, "--shuffle", shuffle)...)
			want := epochDigests(t, full.sock, 3, 0)
			fullPeak := peakRSSKiB(t, full.cmd.Process.Pid)
			full.stop(t)

			lim := startDaemon(t, "", append(base, "--shuffle", shuffle, "--cache-limit", "16MiB")...)
			got := epochDigests(t, lim.sock, 3, 0)
			peak := peakRSSKiB(t, lim.cmd.Process.Pid)
			lim.stop(t)
			t.Logf("%s: peak RSS %d MiB under a 16 MiB cache limit (bound %d MiB), %d MiB with every shard held; %d batches",
				shuffle, peak/1024, bound/1024, fullPeak/1024, len(want))
			if len(got) != len(want) {
				t.Fatalf("%d batches under the limit, %d without", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("batch %d differs under --cache-limit", i)
				}
			}
			if peak > bound {
				t.Errorf("peak RSS %d KiB over the documented bound %d KiB", peak, bound)
			}
			if fullPeak <= bound {
				t.Errorf("the unlimited daemon peaked at %d KiB, within the bound %d KiB: the set is too small to show the limit", fullPeak, bound)
			}
			// Resume across a restart: a new daemon asked for the epoch from
			// batch k on sends exactly the rest.
			k := len(want) / 3
			again := startDaemon(t, "", append(base, "--shuffle", shuffle, "--cache-limit", "16MiB")...)
			rest := epochDigests(t, again.sock, 3, k)
			again.stop(t)
			testutil.CheckTail(t, want, rest, k)
		})
	}
}

// The windowed shuffle is a different order: its identity says so, and
// a wrong --shuffle or --cache-limit is refused naming the flag.
func TestShuffleFlags(t *testing.T) {
	shards := fixture.SynthShards(t, "COLLAB", 60, 1)
	for _, tc := range []struct{ args, want string }{
		{"--shuffle window:0", "--shuffle"},
		{"--shuffle local", "--shuffle"},
		{"--cache-limit 1MiB", "--cache-limit"},
		{"--cache-limit lots", "--cache-limit"},
	} {
		_, stderr, code := runBin(t, append([]string{"serve", "--shards", shards, "--socket", t.TempDir() + "/s"}, strings.Fields(tc.args)...)...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("serve %s: exit %d, %q", tc.args, code, stderr)
		}
	}
	d := startDaemon(t, "", "--shards", shards, "--shuffle", "window:2")
	defer d.stop(t)
	res, err := client.Fetch(context.Background(), d.sock, wire.Request{Epoch: 0, World: 1}, client.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Info.Config.Shuffle != "window:2" {
		t.Errorf("identity shuffle %q, want window:2", res.Info.Config.Shuffle)
	}
}

// memoryCgroup makes a cgroup v1 memory group limited to limit bytes and
// removes it when the test ends; it skips, saying why, where it cannot.
func memoryCgroup(t *testing.T, limit int64) string {
	t.Helper()
	root := "/sys/fs/cgroup/memory"
	if _, err := os.Stat(root + "/memory.limit_in_bytes"); err != nil {
		t.Skipf("no cgroup v1 memory controller at %s (%v): the memory-cgroup test needs one", root, err)
	}
	dir := fmt.Sprintf("%s/augloader-test-%d", root, os.Getpid())
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup (%v): the test needs write access to %s (root)", err, root)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("removing the test's cgroup %s: %v", dir, err)
		}
	})
	if err := os.WriteFile(dir+"/memory.limit_in_bytes", []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func cgroupValue(t *testing.T, dir, name string) int64 {
	t.Helper()
	b, err := os.ReadFile(dir + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A daemon under --cache-limit 16MiB inside a memory cgroup of 192 MiB
// (its memory and the page cache of the shards it reads together), on a
// set whose decoded shards and indexes alone take more, serves the epoch
// whole and byte for byte the unlimited daemon's, and exits cleanly: the
// kernel never had to kill it.
func TestCacheLimitInMemoryCgroup(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	const limit = 192 << 20
	cg := memoryCgroup(t, limit)
	shards := fixture.SynthShardsSized(t, "COLLAB", 4000, 5, 256<<10)
	args := []string{"--shards", shards, "--policy", "nodesam", "--workers", "2", "--shuffle", "window:2",
		"--memory-budget", "16MiB", "--ppr-cache", "0"}
	full := startDaemon(t, "", args...)
	want := epochDigests(t, full.sock, 1, 0)
	fullPeak := peakRSSKiB(t, full.cmd.Process.Pid)
	full.stop(t)
	if int64(fullPeak)<<10 < limit {
		t.Fatalf("the unlimited daemon peaked at %d MiB, under the cgroup's %d MiB: the set is too small to test the limit", fullPeak>>10, limit>>20)
	}
	d := startDaemon(t, "echo $$ > "+cg+"/cgroup.procs;", append(args, "--cache-limit", "16MiB")...)
	got := epochDigests(t, d.sock, 1, 0)
	d.stop(t)
	if len(got) != len(want) {
		t.Fatalf("%d batches in the cgroup, %d outside", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("batch %d differs in the cgroup", i)
		}
	}
	t.Logf("cgroup peak %d MiB of %d (page cache included), failcnt %d; the unlimited daemon's RSS peaked at %d MiB",
		cgroupValue(t, cg, "memory.max_usage_in_bytes")>>20, limit>>20, cgroupValue(t, cg, "memory.failcnt"), fullPeak>>10)
}

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/wire"
)

// served reads epoch e of the daemon at sock from batch start on and
// returns each batch's SHA-256, the identity's shuffle, and the daemon's
// CPU seconds spent meanwhile and the wall time.
func served(t *testing.T, d *daemon, e uint64, start int) (digests [][32]byte, shuffle string, cpu, wall float64) {
	t.Helper()
	c0, t0 := cpuSeconds(t, d.cmd.Process.Pid), time.Now()
	res, err := client.Fetch(context.Background(), d.sock, wire.Request{Epoch: e, World: 1, StartBatch: start},
		client.Options{Digests: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.BatchDigests, res.Info.Config.Shuffle, cpuSeconds(t, d.cmd.Process.Pid) - c0, time.Since(t0).Seconds()
}

// cpuSeconds is a process's user and system time so far (/proc/PID/stat).
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command's closing parenthesis: state is field 3,
	// utime 14 and stime 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100 // USER_HZ
}

// The path a new user takes with the defaults: one shard (the default
// --shard-size) whose decoded graphs are over four times --cache-limit
// (20 MiB: the shard's pages, record batches of 4 Mi values, take about
// 17 MiB each), served
// under the limit with the default windowed shuffle, pages as its blocks.
// The daemon's peak RSS stays under the limit plus --memory-budget,
// --ppr-cache and ProcessOverhead (while the unlimited daemon holds more);
// the epoch costs at most 3 times the unlimited daemon's CPU (whole-shard
// caching decoded the shard for every graph: 4.6 graphs/s); every batch
// is byte-identical to the unlimited daemon's in the same shuffle mode,
// and a restarted daemon resumed mid-epoch sends the rest of the epoch's
// bytes. (The global shuffle under a limit, as slow as a page read per
// graph, is checked byte for byte in package loader.)
func TestCacheLimitBoundsMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	shards := fixture.SynthShardsSized(t, "COLLAB", 5000, 5, 64<<20)
	man, err := shard.ReadManifest(shards)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 20 << 20
	var decoded int64
	for i := range man.Shards {
		decoded += man.DecodedBytes(i)
	}
	if len(man.Shards) != 1 || decoded < 4*limit {
		t.Fatalf("want one shard decoding to 4 times the limit at least: %d shards, %d MiB", len(man.Shards), decoded>>20)
	}
	base := []string{"--shards", shards, "--policy", "nodesam:0.5,submix:p=0.4:0.5", "--workers", "2",
		"--memory-budget", "64MiB", "--ppr-cache", "0"}
	bound := (limit + 64<<20 + ProcessOverhead) / 1024

	lim := startDaemon(t, "", append(base, "--cache-limit", "20MiB")...)
	got, shuffle, limCPU, limWall := served(t, lim, 3, 0)
	peak := peakRSSKiB(t, lim.cmd.Process.Pid)
	lim.stop(t)
	if !strings.HasPrefix(shuffle, "page-window:") || !strings.Contains(lim.logs.String(), "windows of") {
		t.Fatalf("the default shuffle under the limit is %q, want a page window, said so:\n%s", shuffle, lim.logs)
	}

	full := startDaemon(t, "", append(base, "--shuffle", shuffle)...)
	want, _, fullCPU, fullWall := served(t, full, 3, 0)
	fullPeak := peakRSSKiB(t, full.cmd.Process.Pid)
	full.stop(t)
	t.Logf("%s: peak RSS %d MiB under a 20 MiB cache limit (bound %d MiB), %d MiB with the shard held; "+
		"the epoch took %.2f s and %.2f CPU s under the limit, %.2f s and %.2f CPU s without (%.0f%% of its throughput); %d batches",
		shuffle, peak/1024, bound/1024, fullPeak/1024, limWall, limCPU, fullWall, fullCPU, 100*fullWall/limWall, len(want))
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
	if limCPU > 3*fullCPU+0.5 {
		t.Errorf("the epoch cost %.2f CPU seconds under the limit, %.2f without: more than 3 times", limCPU, fullCPU)
	}
	// Resume across a restart: a new daemon asked for the epoch from
	// batch k on sends exactly the rest.
	k := len(want) / 3
	again := startDaemon(t, "", append(base, "--cache-limit", "20MiB")...)
	rest, _, _, _ := served(t, again, 3, k)
	again.stop(t)
	testutil.CheckTail(t, want, rest, k)
}

// A daemon busy reading pages under a limit too small for its shuffle
// (the global one: a page read for nearly every graph) ends within its
// drain time on SIGTERM: every graph's load checks the stream's context.
func TestSIGTERMWhileReadingPages(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	shards := fixture.SynthShardsSized(t, "COLLAB", 5000, 5, 64<<20)
	const drain = time.Second
	d := startDaemon(t, "", "--shards", shards, "--policy", "nodesam", "--workers", "2", "--cache-limit", "64MiB",
		"--memory-budget", "64MiB", "--ppr-cache", "0", "--shuffle", "global", "--drain", drain.String())
	done := make(chan error, 1)
	go func() {
		_, err := client.Fetch(context.Background(), d.sock, wire.Request{Epoch: 0, World: 1}, client.Options{}, nil)
		done <- err
	}()
	time.Sleep(700 * time.Millisecond)
	took := d.stop(t)
	<-done
	t.Logf("exited %.2f s after SIGTERM while reading a page for each graph (drain %s)", took.Seconds(), drain)
	if took > drain+2*time.Second {
		t.Fatalf("exited %s after SIGTERM, want within drain + 2 s", took)
	}
}

// A cache limit that cannot hold the largest page is refused at start,
// naming the page, its shard and what it needs; a window given in bytes
// becomes a number of pages in the identity.
func TestCacheLimitTooSmallForAPage(t *testing.T) {
	shards := fixture.SynthShardsSized(t, "COLLAB", 5000, 5, 64<<20)
	_, stderr, code := runBin(t, "serve", "--shards", shards, "--socket", filepath.Join(t.TempDir(), "s"), "--cache-limit", "16MiB")
	if code == 0 || !strings.Contains(stderr, "cannot hold page") || !strings.Contains(stderr, "shard-00000.arrow") || !strings.Contains(stderr, "give --cache-limit") {
		t.Fatalf("serve under a limit smaller than a page: exit %d, %s", code, stderr)
	}
	d := startDaemon(t, "", "--shards", shards, "--policy", "none", "--shuffle", "window:40MiB")
	defer d.stop(t)
	_, shuffle, _, _ := served(t, d, 0, 0)
	if shuffle != "page-window:2" {
		t.Errorf("--shuffle window:40MiB over pages of about 17 MiB: identity %q, want page-window:2", shuffle)
	}
}

// The windowed shuffle is a different order: its identity says so, and
// a wrong --shuffle, --cache-limit or --disk-cache is refused naming the
// flag or the folder.
func TestShuffleFlags(t *testing.T) {
	shards := fixture.SynthShards(t, "COLLAB", 60, 1)
	for _, tc := range []struct{ args, want string }{
		{"--shuffle window:0", "--shuffle"},
		{"--shuffle local", "--shuffle"},
		{"--cache-limit 1MiB", "--cache-limit"},
		{"--cache-limit lots", "--cache-limit"},
		{"--disk-cache " + t.TempDir() + " --disk-cache-limit 0", "--disk-cache-limit"},
		{"--disk-cache " + t.TempDir() + " --disk-cache-limit 1.5", "--disk-cache-limit"},
		{"--disk-cache " + shards + "/manifest.json", "manifest.json: not a directory"},
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
	if res.Info.Config.Shuffle != "page-window:2" {
		t.Errorf("identity shuffle %q, want page-window:2 (window:2 was two shard files before pages)", res.Info.Config.Shuffle)
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
	args := []string{"--shards", shards, "--policy", "nodesam", "--workers", "2", "--shuffle", "window:8",
		"--memory-budget", "16MiB", "--ppr-cache", "0"}
	full := startDaemon(t, "", args...)
	want, _, _, _ := served(t, full, 1, 0)
	fullPeak := peakRSSKiB(t, full.cmd.Process.Pid)
	full.stop(t)
	if int64(fullPeak)<<10 < limit {
		t.Fatalf("the unlimited daemon peaked at %d MiB, under the cgroup's %d MiB: the set is too small to test the limit", fullPeak>>10, limit>>20)
	}
	d := startDaemon(t, "echo $$ > "+cg+"/cgroup.procs;", append(args, "--cache-limit", "16MiB")...)
	got, _, _, _ := served(t, d, 1, 0)
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

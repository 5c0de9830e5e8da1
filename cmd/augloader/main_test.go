package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/materialize"
	"github.com/augloader/augloader/wire"
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
	bin = filepath.Join(dir, "augloader")
	fixture.Main(m)
}

// startServe runs `augloader serve` and waits for its socket.
func startServe(t *testing.T, args ...string) (string, *exec.Cmd, *strings.Builder) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "aug.sock")
	cmd := testutil.DieWithTest(exec.Command(bin, append([]string{"serve", "--socket", sock}, args...)...))
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not start:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return sock, cmd, &logs
}

func stopServe(t *testing.T, cmd *exec.Cmd, sock string, logs *strings.Builder) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, logs)
	}
	if _, err := os.Lstat(sock); err == nil {
		t.Fatal("socket file left after shutdown")
	}
}

// checkBatch checks a batch's PyG invariants: edges symmetric within each
// graph's ptr range, features on existing nodes with weights summing to 1
// per node, soft labels summing to 1.
func checkBatch(t *testing.T, rec arrow.RecordBatch, classes int32) {
	t.Helper()
	get := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
	nn := get(wire.ColNumNodes).(*array.Int32).Int32Values()
	ptr := []int32{0}
	for _, n := range nn {
		ptr = append(ptr, ptr[len(ptr)-1]+n)
	}
	src := get(wire.ColEdgeSrc).(*array.List)
	sv := src.ListValues().(*array.Int32).Int32Values()
	dv := get(wire.ColEdgeDst).(*array.List).ListValues().(*array.Int32).Int32Values()
	for r := range nn {
		set := map[[2]int32]bool{}
		for k := src.Offsets()[r]; k < src.Offsets()[r+1]; k++ {
			if sv[k] < ptr[r] || sv[k] >= ptr[r+1] || dv[k] < ptr[r] || dv[k] >= ptr[r+1] || sv[k] == dv[k] {
				t.Fatalf("edge (%d, %d) outside graph %d's nodes [%d, %d)", sv[k], dv[k], r, ptr[r], ptr[r+1])
			}
			set[[2]int32{sv[k], dv[k]}] = true
		}
		for e := range set {
			if !set[[2]int32{e[1], e[0]}] {
				t.Fatalf("edge %v without reverse", e)
			}
		}
	}
	xn := get(wire.ColXNode).(*array.List).ListValues().(*array.Int32).Int32Values()
	xw := get(wire.ColXWeight).(*array.List).ListValues().(*array.Float32).Float32Values()
	sum := make([]float64, ptr[len(ptr)-1])
	for k, v := range xn {
		sum[v] += float64(xw[k])
	}
	for v, s := range sum {
		if math.Abs(s-1) > 1e-5 {
			t.Fatalf("node %d: feature weights sum to %g", v, s)
		}
	}
	y, ym := get(wire.ColY).(*array.Int32).Int32Values(), get(wire.ColYMix).(*array.Int32).Int32Values()
	q := get(wire.ColYQ).(*array.Float32).Float32Values()
	for r := range y {
		if y[r] < 0 || y[r] >= classes || ym[r] < 0 || ym[r] >= classes || q[r] < 0 || q[r] > 1 {
			t.Fatalf("row %d: label %d/%d q %g", r, y[r], ym[r], q[r])
		}
	}
}

// TestServeProcessMUTAG: real process, real socket, real MUTAG.
func TestServeProcessMUTAG(t *testing.T) {
	in := testutil.Shared(t, "tu", "MUTAG")
	shards := filepath.Join(t.TempDir(), "mutag")
	if _, err := convert.Run(context.Background(), convert.Options{Input: in, Out: shards}); err != nil {
		t.Fatal(err)
	}
	for _, pol := range []string{"nodesam", "submix:p=0.4"} {
		t.Run(pol, func(t *testing.T) {
			sock, cmd, logs := startServe(t, "--shards", shards, "--policy", pol, "--seed", "3", "--workers", "2")
			var digests []string
			for range 2 {
				policies := map[string]int{}
				soft := 0
				res, err := client.Fetch(context.Background(), sock, wire.Request{Epoch: 4, World: 1}, client.Options{Digests: true}, func(rec arrow.RecordBatch) error {
					checkBatch(t, rec, 2)
					n, _, p := countBatch(rec)
					_ = n
					for k, v := range p {
						policies[k] += v
					}
					for _, q := range rec.Column(rec.Schema().FieldIndices(wire.ColYQ)[0]).(*array.Float32).Float32Values() {
						if q < 1 {
							soft++
						}
					}
					return nil
				})
				if err != nil {
					t.Fatalf("%v\n%s", err, logs)
				}
				if res.Graphs != 188 || res.Batches != 6 || res.Trailer.Graphs != 188 {
					t.Fatalf("%d graphs in %d batches", res.Graphs, res.Batches)
				}
				name := strings.SplitN(pol, ":", 2)[0]
				if policies[name] != 188 {
					t.Fatalf("policies %v", policies)
				}
				if name == "submix" && soft < 100 {
					t.Fatalf("only %d of 188 SubMix graphs have soft labels", soft)
				}
				digests = append(digests, hex.EncodeToString(res.Digest[:]))
			}
			if digests[0] != digests[1] {
				t.Fatal("the same request gave different streams")
			}
			// `augloader fetch` prints the same digest, over the socket
			// and over shared memory.
			for _, shm := range []string{"0", "1048576", "1MiB"} {
				out, err := exec.Command(bin, "fetch", "--socket", sock, "--epoch", "4", "--shm-ring", shm).CombinedOutput()
				if err != nil || !strings.Contains(string(out), digests[0]) || !strings.Contains(string(out), "188 graphs") {
					t.Fatalf("fetch --shm-ring %s: %v\n%s", shm, err, out)
				}
			}
			// --no-digest: the same counts, no digest printed.
			out, err := exec.Command(bin, "fetch", "--socket", sock, "--epoch", "4", "--no-digest", "--json").CombinedOutput()
			var got map[string]any
			if err != nil || json.Unmarshal(out, &got) != nil || got["graphs"] != 188.0 {
				t.Fatalf("fetch --no-digest: %v\n%s", err, out)
			}
			for _, k := range []string{"sha256", "batch_sha256", "batches_sha256"} {
				if _, ok := got[k]; ok {
					t.Fatalf("fetch --no-digest printed %s:\n%s", k, out)
				}
			}
			stopServe(t, cmd, sock, logs)
			if !strings.Contains(logs.String(), "epoch served") {
				t.Errorf("no per-epoch summary in the log:\n%s", logs)
			}
		})
	}
}

// TestMaterializeSIGTERM: SIGTERM during materialize, then a rerun
// completes and verify passes; no partial file counts as complete.
func TestMaterializeSIGTERM(t *testing.T) {
	shards := fixture.SynthShards(t, "COLLAB", 400, 5)
	out := filepath.Join(t.TempDir(), "epochs")
	args := []string{"materialize", "--shards", shards, "--epochs", "0:40", "--out", out, "--policy", "nodesam", "--world", "2", "--workers", "2"}
	cmd := exec.Command(bin, args...)
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, err := os.Stat(filepath.Join(out, materialize.EpochDir(2), materialize.ManifestName)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no epoch finished:\n%s", logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if err == nil {
		t.Log("materialize finished before the signal landed; the rerun still has to skip everything")
	} else if !strings.Contains(logs.String(), "interrupted") && !strings.Contains(logs.String(), "context canceled") {
		t.Fatalf("interrupted materialize: %v\n%s", err, logs.String())
	}
	checked, incomplete, errs := materialize.Verify(context.Background(), out)
	if len(errs) > 0 {
		t.Fatalf("verify after SIGTERM: %v", errs)
	}
	t.Logf("after SIGTERM: %d complete epochs, %d incomplete", len(checked), len(incomplete))
	// No temporary file may look like a stream file.
	matches, _ := filepath.Glob(filepath.Join(out, "epoch-*", "rank-*.arrows"))
	for _, m := range matches {
		if _, err := os.Stat(filepath.Join(filepath.Dir(m), materialize.ManifestName)); err != nil {
			t.Fatalf("%s exists in an epoch without a manifest", m)
		}
	}
	rerun := exec.Command(bin, args...)
	if b, err := rerun.CombinedOutput(); err != nil {
		t.Fatalf("rerun: %v\n%s", err, b)
	}
	v := exec.Command(bin, "verify", out)
	b, err := v.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "40 complete epochs, 0 incomplete") {
		t.Fatalf("verify: %v\n%s", err, b)
	}
}

func TestServeRefusesToClobber(t *testing.T) {
	shards := fixture.SynthShards(t, "COLLAB", 20, 5)
	path := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(path, []byte("precious"), 0o644)
	out, err := exec.Command(bin, "serve", "--shards", shards, "--socket", path).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not a socket") {
		t.Fatalf("serve over a regular file: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Fatal("file clobbered")
	}
}

// TestMaterializeSIGKILL: no chance to clean up; the rerun removes the
// leftovers of the incomplete epoch, completes, and verify passes.
func TestMaterializeSIGKILL(t *testing.T) {
	shards := fixture.SynthShards(t, "COLLAB", 400, 5)
	out := filepath.Join(t.TempDir(), "epochs")
	args := []string{"materialize", "--shards", shards, "--epochs", "0:30", "--out", out, "--policy", "submix", "--workers", "2"}
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, err := os.Stat(filepath.Join(out, materialize.EpochDir(1), materialize.ManifestName)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no epoch finished")
		}
		time.Sleep(2 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	leftovers, _ := filepath.Glob(filepath.Join(out, "epoch-*", ".*.tmp-*"))
	t.Logf("SIGKILL left %d temporary files", len(leftovers))
	if _, _, errs := materialize.Verify(context.Background(), out); len(errs) > 0 {
		t.Fatalf("verify after SIGKILL: %v", errs)
	}
	if b, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("rerun: %v\n%s", err, b)
	}
	if left, _ := filepath.Glob(filepath.Join(out, "epoch-*", ".*.tmp-*")); len(left) != 0 {
		t.Fatalf("temporary files survive the rerun: %v", left)
	}
	b, err := exec.Command(bin, "verify", out).CombinedOutput()
	if err != nil || !strings.Contains(string(b), "30 complete epochs, 0 incomplete") {
		t.Fatalf("verify: %v\n%s", err, b)
	}
}

package server_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/ingest/synth"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/materialize"
	"github.com/augloader/augloader/server"
	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/wire"
)

// panicOp panics on one graph, as a bug in an augmentation would.
type panicOp struct{ at int64 }

var panicSpec = aug.Spec{Name: "panicky", ID: 999, Augments: true}

func (panicOp) Spec() *aug.Spec { return &panicSpec }
func (p panicOp) Apply(in, out *aug.Graph, r aug.Rand, s *aug.Scratch) error {
	if in.ID == p.at {
		panic("augmentation bug")
	}
	out.CopyFrom(in)
	return nil
}

// panicSource serves the loader's plans with the policy swapped for panicOp.
type panicSource struct {
	l  *loader.Loader
	at int64
}

type planStream struct {
	l *loader.Loader
	p *loader.Plan
}

func (s planStream) Info() wire.Response {
	return wire.Response{Batches: len(s.p.Batches), TotalBatches: s.p.Total, Graphs: s.p.Graphs()}
}

func (s planStream) Schema() *arrow.Schema { return s.p.Schema }

func (s planStream) WriteTo(ctx context.Context, w io.Writer) (int, int, error) {
	st, err := s.l.WriteStream(ctx, s.p, w)
	return st.Batches, st.Graphs, err
}

func (ps panicSource) Open(req wire.Request) (server.Stream, error) {
	p, err := ps.l.Plan(wire.Request{Epoch: req.Epoch, Rank: req.Rank, World: req.World, BatchSize: req.BatchSize})
	if err != nil {
		return nil, err
	}
	if req.Epoch == 13 {
		if p.Policy, err = epoch.NewPolicy([]aug.Op{panicOp{ps.at}}, nil); err != nil {
			return nil, err
		}
	}
	return planStream{ps.l, p}, nil
}

// A panic inside an augmentation fails that request with an error naming
// the graph; the daemon keeps serving.
func TestWorkerPanicRecovered(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	l := newLoader(t, dir, "none", 2)
	sock := serve(t, panicSource{l, 42})
	_, err := client.Fetch(context.Background(), sock, wire.Request{Epoch: 13, World: 1}, client.Options{}, nil)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeInternal || !strings.Contains(we.Message, "graph 42") || !strings.Contains(we.Message, "panic") {
		t.Fatalf("panicking request: %v", err)
	}
	// The loader reports the graph as a *GraphError too.
	p, _ := l.Plan(wire.Request{Epoch: 13, World: 1})
	p.Policy, _ = epoch.NewPolicy([]aug.Op{panicOp{7}}, nil)
	_, err = l.WriteStream(context.Background(), p, io.Discard)
	var ge *loader.GraphError
	if !errors.As(err, &ge) || ge.Graph != 7 {
		t.Fatalf("loader error %v, want a GraphError for graph 7", err)
	}
	fetch(t, sock, wire.Request{Epoch: 1, World: 1}, nil) // still serving
}

// A materialized file damaged while the daemon runs fails the requests that
// read the damaged batch, naming the file; other epochs keep being served.
func TestReplayCorruptionWhileServing(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	l := newLoader(t, dir, policy, 2)
	out := t.TempDir()
	if err := materialize.Run(context.Background(), materialize.Options{Loader: l, Out: out, From: 0, To: 2}); err != nil {
		t.Fatal(err)
	}
	rp, _ := server.OpenReplay(out)
	sock := serve(t, rp)
	before := fetch(t, sock, wire.Request{Epoch: 1, World: 1}, nil)
	man, _ := materialize.ReadEpoch(out, 1)
	path := filepath.Join(out, materialize.EpochDir(1), man.Files[0].File)
	b, _ := os.ReadFile(path)
	at := man.Files[0].Batches[2].Offset + man.Files[0].Batches[2].Bytes/2
	b[at] ^= 0x40
	os.WriteFile(path, b, 0o644)
	_, err := client.Fetch(context.Background(), sock, wire.Request{Epoch: 1, World: 1}, client.Options{}, nil)
	var we *wire.Error
	if !errors.As(err, &we) || !strings.Contains(we.Message, path) || !strings.Contains(we.Message, "batch 2") {
		t.Fatalf("damaged epoch: %v", err)
	}
	// A resume past the damage is still served; so is the other epoch.
	fetch(t, sock, wire.Request{Epoch: 1, World: 1, StartBatch: 3}, nil)
	fetch(t, sock, wire.Request{Epoch: 0, World: 1}, nil)
	_, _, errs := materialize.Verify(context.Background(), out)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "sha256") {
		t.Fatalf("verify after damage: %v", errs)
	}
	_ = before
}

// Replay refuses, before sending a batch, what verify refuses: a flipped
// byte in a file's schema message (pyarrow decoded a column "edge_srb" from
// such a file, with a complete trailer) and an edited epoch manifest (it
// announced 2,100 graphs and sent 500). Both are internal errors naming
// the file; the other epochs are served.
func TestReplayRefusesDamage(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	l := newLoader(t, dir, policy, 2)
	out := t.TempDir()
	if err := materialize.Run(context.Background(), materialize.Options{Loader: l, Out: out, From: 0, To: 3}); err != nil {
		t.Fatal(err)
	}
	rp, err := server.OpenReplay(out)
	if err != nil {
		t.Fatal(err)
	}
	sock := serve(t, rp)
	// Epoch 1: one byte of the schema message flipped (edge_src → edge_srb).
	file := filepath.Join(out, materialize.EpochDir(1), materialize.FileName(0, 1))
	b, _ := os.ReadFile(file)
	i := bytes.Index(b, []byte("edge_src"))
	b[i+7] ^= 1
	os.WriteFile(file, b, 0o644)
	// Epoch 2: its manifest's graph counts edited.
	mp := filepath.Join(out, materialize.EpochDir(2), materialize.ManifestName)
	mb, _ := os.ReadFile(mp)
	os.WriteFile(mp, bytes.ReplaceAll(mb, []byte(`"graphs": 60`), []byte(`"graphs": 2100`)), 0o644)
	for e, want := range map[uint64]string{1: "schema message fails its SHA-256", 2: "checksum mismatch"} {
		var batches int
		_, err := client.Fetch(context.Background(), sock, wire.Request{Epoch: e, World: 1}, client.Options{},
			func(arrow.RecordBatch) error { batches++; return nil })
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != wire.CodeInternal || !strings.Contains(we.Message, want) || batches != 0 {
			t.Errorf("epoch %d: %v after %d batches, want an internal error %q before any batch", e, err, batches, want)
		}
	}
	fetch(t, sock, wire.Request{Epoch: 0, World: 1}, nil)
	_, _, errs := materialize.Verify(context.Background(), out)
	if len(errs) != 2 {
		t.Fatalf("verify: %v, want the two damages", errs)
	}
}

// Shards are checksummed and held in memory at start: damage on disk
// afterwards cannot change what is served, and a restart refuses the
// damaged shard by name.
func TestShardDamagedWhileServing(t *testing.T) {
	src := fixture.SynthShards(t, "COLLAB", 60, 1)
	dir := filepath.Join(t.TempDir(), "shards")
	os.CopyFS(dir, os.DirFS(src))
	sock := serve(t, server.Live{L: newLoader(t, dir, policy, 2)})
	a := fetch(t, sock, wire.Request{Epoch: 3, World: 1}, nil)
	p := filepath.Join(dir, "shard-00000.arrow")
	b, _ := os.ReadFile(p)
	b[len(b)/3] ^= 1
	os.WriteFile(p, b, 0o644)
	if c := fetch(t, sock, wire.Request{Epoch: 3, World: 1}, nil); c.Digest != a.Digest {
		t.Fatal("served bytes changed after the shard file was damaged")
	}
	if _, err := shard.Open(context.Background(), dir); err == nil || !strings.Contains(err.Error(), "shard-00000.arrow: checksum") {
		t.Fatalf("reopen of damaged shards: %v", err)
	}
}

// mountTmpfs mounts a tmpfs of the given size (root only) for disk-full
// tests, unmounted at cleanup.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small")
	os.MkdirAll(dir, 0o755)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}

func remount(t *testing.T, dir, size string) {
	if out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v %s", err, out)
	}
}

// Disk full during convert: a clear error, nothing left that looks like
// output; with room, the rerun works.
func TestDiskFullConvert(t *testing.T) {
	spec, _ := synth.Like("COLLAB")
	tu := filepath.Join(t.TempDir(), "tu")
	if _, err := synth.Write(context.Background(), spec.Scaled(200), 3, tu, false); err != nil {
		t.Fatal(err)
	}
	small := mountTmpfs(t, "200k")
	out := filepath.Join(small, "shards")
	_, err := convert.Run(context.Background(), convert.Options{Input: tu, Out: out})
	if err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("convert onto a full disk: %v", err)
	}
	if entries, _ := os.ReadDir(small); len(entries) != 0 {
		t.Fatalf("left %s behind on the full disk", entries[0].Name())
	}
	remount(t, small, "64m")
	if _, err := convert.Run(context.Background(), convert.Options{Input: tu, Out: out}); err != nil {
		t.Fatalf("rerun with room: %v", err)
	}
	if _, errs := shard.Verify(context.Background(), out); len(errs) > 0 {
		t.Fatal(errs)
	}
}

// Disk full during materialize: an error, no partial file taken for a
// complete epoch; with room, the rerun completes and verify passes.
func TestDiskFullMaterialize(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	l := newLoader(t, dir, policy, 2)
	small := mountTmpfs(t, "6m")
	out := filepath.Join(small, "epochs")
	o := materialize.Options{Loader: l, Out: out, From: 0, To: 12}
	err := materialize.Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("materialize onto a full disk: %v", err)
	}
	checked, incomplete, errs := materialize.Verify(context.Background(), out)
	if len(errs) > 0 {
		t.Fatalf("verify after disk full: %v", errs)
	}
	t.Logf("disk full after %d complete epochs (%d incomplete)", len(checked), len(incomplete))
	remount(t, small, "128m")
	if err := materialize.Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	checked, incomplete, errs = materialize.Verify(context.Background(), out)
	if len(errs) > 0 || len(checked) != 12 || len(incomplete) != 0 {
		t.Fatalf("after rerun: %d complete, %v incomplete, %v", len(checked), incomplete, errs)
	}
}

func rssKiB() int {
	f, _ := os.Open("/proc/self/status")
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	return 0
}

// Load: 64 socket clients and 16 Flight clients at once, each reading two
// full epochs: every stream correct, RSS bounded, no goroutine or fd growth.
func TestLoad(t *testing.T) {
	if testing.Short() || testutil.RaceEnabled {
		t.Skip("load test: skipped under -race or -short (make test runs it without -race)")
	}
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	l := newLoader(t, dir, policy, 2)
	sock := serve(t, server.Live{L: l})
	addr := serveFlight(t, server.Live{L: l}, false, "")
	want := map[uint64][32]byte{}
	for e := range uint64(2) {
		want[e] = fetch(t, sock, wire.Request{Epoch: e, World: 1}, nil).Digest
	}
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	g0, fd0, rss0 := runtime.NumGoroutine(), openFDs(), rssKiB()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 80)
	var bytes int64
	var mu sync.Mutex
	for c := range 80 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range uint64(2) {
				req := wire.Request{Epoch: e, World: 1}
				var res *client.Result
				var err error
				if c < 64 {
					res, err = client.Fetch(context.Background(), sock, req, client.Options{Digests: true}, nil)
				} else {
					res, err = client.FetchFlight(context.Background(), addr, "", req, client.Options{Digests: true}, nil)
				}
				if err != nil {
					errs <- fmt.Errorf("client %d epoch %d: %w", c, e, err)
					return
				}
				if res.Digest != want[e] {
					errs <- fmt.Errorf("client %d epoch %d: wrong digest", c, e)
					return
				}
				mu.Lock()
				bytes += res.Bytes
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	elapsed := time.Since(start)
	peak := rssKiB()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && (runtime.NumGoroutine() > g0+4 || openFDs() > fd0); {
		time.Sleep(20 * time.Millisecond)
	}
	g1, fd1 := runtime.NumGoroutine(), openFDs()
	t.Logf("load: 64 socket + 16 Flight clients × 2 epochs, %.1f MB in %s; RSS %d MiB → %d MiB; goroutines %d → %d; fds %d → %d",
		float64(bytes)/1e6, elapsed.Round(time.Millisecond), rss0/1024, peak/1024, g0, g1, fd0, fd1)
	if g1 > g0+4 || fd1 > fd0 {
		t.Errorf("leak: goroutines %d → %d, fds %d → %d", g0, g1, fd0, fd1)
	}
	// Expected: 80 streams × a window of 4 batches (~1.3 MB each) on the
	// server, plus each client's 1 MiB read buffer and decoded batch:
	// about 0.7 GiB at this concurrency, whatever the number of epochs.
	if peak-rss0 > 3<<19 { // 1.5 GiB
		t.Errorf("RSS grew by %d MiB", (peak-rss0)/1024)
	}
}

// One client (peer uid) cannot hold more than its share of streams.
func TestPerClientStreamLimit(t *testing.T) {
	// 300 COLLAB-shaped graphs: ~12 MB per epoch, more than the socket's
	// send buffer (4 MiB) holds.
	dir := fixture.SynthShards(t, "COLLAB", 300, 1)
	sock := serveWith(t, server.Options{Source: server.Live{L: newLoader(t, dir, policy, 1)}, Limits: server.Limits{MaxStreamsPerClient: 2, Drain: time.Second}})
	// Two streams that are not read (batch size 1: many batches, the socket
	// buffer fills and the streams stay open).
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		wire.WriteFrame(c, wire.MagicRequest, 0, wire.Request{Epoch: 0, World: 1, BatchSize: 1})
		if st, _, err := wire.ReadFrame(c, wire.MagicResponse); err != nil || st != wire.StatusOK {
			t.Fatalf("held stream: %d %v", st, err)
		}
	}
	_, err := client.Fetch(context.Background(), sock, wire.Request{Epoch: 0, World: 1}, client.Options{}, nil)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeUnavailable {
		t.Fatalf("third stream: %v", err)
	}
	for _, c := range held {
		c.Close()
	}
	// Once the held streams are gone, the client is served again.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, err := client.Fetch(context.Background(), sock, wire.Request{Epoch: 0, World: 1}, client.Options{}, nil)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still refused after the held streams closed: %v", err)
		}
	}
}

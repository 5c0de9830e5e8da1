package loader_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/internal/ipcframe"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/wire"
)

func TestMain(m *testing.M) { fixture.Main(m) }

const policy = "nodesam:0.4,submix:p=0.4:0.4,none:0.2"

func newLoader(t testing.TB, dir string, cfg loader.Config, served []int64) *loader.Loader {
	t.Helper()
	if cfg.Seed == 0 {
		cfg.Seed = 11
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 16
	}
	return fixture.Loader(t, dir, served, policy, cfg)
}

// stream writes req's plan as an Arrow IPC stream and returns its bytes
// and each record batch message's SHA-256.
func stream(t testing.TB, l *loader.Loader, req wire.Request) ([]byte, [][32]byte) {
	t.Helper()
	p, err := l.Plan(req)
	if err != nil {
		t.Fatalf("plan %+v: %v", req, err)
	}
	var buf bytes.Buffer
	if _, err := l.WriteStream(context.Background(), p, &buf); err != nil {
		t.Fatal(err)
	}
	var digests [][32]byte
	mr := ipcframe.NewReader(bytes.NewReader(buf.Bytes()))
	for i := 0; ; i++ {
		meta, body, err := mr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 { // the schema message is not a batch
			digests = append(digests, sha256.Sum256(ipcframe.Append(nil, meta, body)))
		}
	}
	return buf.Bytes(), digests
}

// The contract's first line: a request's bytes do not depend on the
// number of workers (nor on scheduling: 8 workers on 2 cores).
func TestSameBytesAnyWorkers(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	var ref []byte
	for _, w := range []int{1, 2, 8} {
		got, batches := stream(t, newLoader(t, dir, loader.Config{Workers: w}, nil), wire.Request{Epoch: 3, World: 1})
		if len(batches) != 4 {
			t.Fatalf("workers %d: %d batches, want 4", w, len(batches))
		}
		if ref == nil {
			ref = got
		} else if !bytes.Equal(got, ref) {
			t.Fatalf("workers %d: the stream differs from 1 worker's", w)
		}
	}
}

// A resumed request (start_batch k) is the tail of the full stream.
func TestResumeIsTail(t *testing.T) {
	l := newLoader(t, fixture.SynthShards(t, "COLLAB", 60, 1), loader.Config{Workers: 2}, nil)
	_, full := stream(t, l, wire.Request{Epoch: 2, BatchSize: 7})
	for _, k := range []int{0, 1, 4, len(full)} {
		_, tail := stream(t, l, wire.Request{Epoch: 2, BatchSize: 7, StartBatch: k})
		testutil.CheckTail(t, full, tail, k)
	}
}

// An elastic resume: 2 ranks take 10 and 11 graphs of their slices, then
// 3 ranks (resume phases) split the rest. Batches of one graph make a
// batch's digest that graph's bytes: across both phases every graph of
// the epoch is served once, in the bytes of the uninterrupted one-rank
// epoch. The same phases with batches_per_epoch are refused, and so is a
// count past a rank's slice.
func TestElasticResume(t *testing.T) {
	l := newLoader(t, fixture.SynthShards(t, "COLLAB", 60, 1), loader.Config{Workers: 2}, nil)
	_, want := stream(t, l, wire.Request{Epoch: 2, World: 1, BatchSize: 1})
	var got [][32]byte
	counts := []int{10, 11}
	for r, c := range counts {
		_, d := stream(t, l, wire.Request{Epoch: 2, Rank: r, World: 2, BatchSize: 1, Count: c})
		got = append(got, d...)
	}
	phases := []wire.ResumePhase{{World: 2, Graphs: counts}}
	for r := range 3 {
		_, d := stream(t, l, wire.Request{Epoch: 2, Rank: r, World: 3, BatchSize: 1, Resume: phases})
		if len(d) != 13 {
			t.Fatalf("rank %d of 3 resumed: %d graphs, want 13", r, len(d))
		}
		got = append(got, d...)
	}
	sortDigests := func(d [][32]byte) [][32]byte {
		return slices.SortedFunc(slices.Values(d), func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
	}
	if !slices.Equal(sortDigests(got), sortDigests(want)) {
		t.Fatal("across both phases the graphs served are not the one-rank epoch's, each once")
	}
	for _, req := range []wire.Request{
		{Epoch: 2, World: 1, BatchesPerEpoch: 3, Resume: phases},
		{Epoch: 2, World: 1, Resume: []wire.ResumePhase{{World: 2, Graphs: []int{31, 0}}}},
	} {
		if _, err := l.Plan(req); !errors.Is(err, epoch.ErrRange) {
			t.Errorf("%+v: %v, want ErrRange", req, err)
		}
	}
}

// The per-graph NodeSam index is a cache: streams are byte-identical with
// and without it.
func TestIndexSameBytes(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	with := newLoader(t, dir, loader.Config{Workers: 2}, nil)
	without := newLoader(t, dir, loader.Config{Workers: 2, NoIndex: true}, nil)
	for e := range uint64(3) {
		a, _ := stream(t, with, wire.Request{Epoch: e, World: 1})
		b, _ := stream(t, without, wire.Request{Epoch: e, World: 1})
		if !bytes.Equal(a, b) {
			t.Fatalf("epoch %d: the indexed stream differs", e)
		}
	}
}

// SubMix's PageRank ranking cache is a cache too: streams are
// byte-identical with it (roomy or tight), without it, and without the
// index; a later epoch finds rankings an earlier one stored.
func TestPPRCacheSameBytes(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	sched := func() *epoch.Schedule {
		s, err := epoch.ParseSchedule("submix:p=0.4")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	roomy := newLoader(t, dir, loader.Config{Workers: 2, Schedule: sched(), PPRCache: 1 << 30}, nil)
	tight := newLoader(t, dir, loader.Config{Workers: 2, Schedule: sched(), PPRCache: 4 << 10}, nil)
	plain := newLoader(t, dir, loader.Config{Workers: 2, Schedule: sched(), NoIndex: true}, nil)
	for e := range uint64(6) {
		want, _ := stream(t, plain, wire.Request{Epoch: e, World: 1})
		for name, l := range map[string]*loader.Loader{"roomy": roomy, "tight": tight} {
			if got, _ := stream(t, l, wire.Request{Epoch: e, World: 1}); !bytes.Equal(got, want) {
				t.Fatalf("epoch %d: the stream with a %s cache differs", e, name)
			}
		}
	}
	c := roomy.Source().PPRCache()
	if c == nil || c.Hits() == 0 || c.Used() == 0 {
		t.Fatalf("cache %+v: no ranking stored or found in 6 epochs", c)
	}
	if tc := tight.Source().PPRCache(); tc.Used() > tc.Limit() {
		t.Fatalf("tight cache holds %d bytes, over its %d", tc.Used(), tc.Limit())
	}
	if plain.Source().PPRCache() != nil {
		t.Fatal("a loader without the index has a ranking cache")
	}
}

// A slow consumer holds at most Window batches in flight.
func TestSlowConsumerBounded(t *testing.T) {
	l := newLoader(t, fixture.SynthShards(t, "COLLAB", 60, 1), loader.Config{Workers: 2}, nil)
	p, err := l.Plan(wire.Request{Epoch: 0, World: 1, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	st, err := l.Stream(context.Background(), p, func(arrow.RecordBatch) error {
		time.Sleep(15 * time.Millisecond) // far slower than building 2 graphs, even under -race
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Batches != 30 || st.MaxInFlight > l.Config().Window {
		t.Fatalf("%d batches, max in flight %d, window %d", st.Batches, st.MaxInFlight, l.Config().Window)
	}
	if st.WaitSink < st.WaitWorkers {
		t.Errorf("slow sink: waited %s on the sink, %s on workers", st.WaitSink, st.WaitWorkers)
	}
}

// A cancelled context or a failing sink stops the pool: Stream returns the
// error and leaves no goroutine behind.
func TestStreamStops(t *testing.T) {
	l := newLoader(t, fixture.SynthShards(t, "COLLAB", 60, 1), loader.Config{Workers: 4}, nil)
	g0 := runtime.NumGoroutine()
	p, _ := l.Plan(wire.Request{Epoch: 0, World: 1, BatchSize: 1})
	stop := errors.New("stop")
	n := 0
	if _, err := l.Stream(context.Background(), p, func(arrow.RecordBatch) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	}); !errors.Is(err, stop) {
		t.Fatalf("sink error: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Stream(ctx, p, func(arrow.RecordBatch) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > g0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > g0 {
		t.Fatalf("goroutines %d, were %d", g, g0)
	}
}

// Plan refuses what the configuration does not offer, with epoch.ErrRange.
func TestPlanRanges(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	l := newLoader(t, dir, loader.Config{Workers: 1, MaxEpoch: 10, MaxBatchSize: 100}, nil)
	for _, c := range []struct {
		name string
		req  wire.Request
	}{
		{"rank ≥ world", wire.Request{Rank: 2, World: 2}},
		{"world > served", wire.Request{World: 61}},
		{"batch size above the max", wire.Request{World: 1, BatchSize: 101}},
		{"epoch ≥ max", wire.Request{Epoch: 10, World: 1}},
		{"start batch past the end", wire.Request{World: 1, StartBatch: 5}},
	} {
		if _, err := l.Plan(c.req); !errors.Is(err, epoch.ErrRange) {
			t.Errorf("%s: %v, want ErrRange", c.name, err)
		}
	}
	p, err := l.Plan(wire.Request{World: 1, StartBatch: 4}) // the empty tail is a valid request
	if err != nil || len(p.Batches) != 0 || p.Total != 4 {
		t.Fatalf("start at the end: %+v %v", p, err)
	}
}

// A served subset: every rank's graphs come from it, and SubMix's partners
// too (the partner's label shows in y_mix).
func TestServedSubset(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	served := []int64{3, 5, 8, 13, 21, 34, 55}
	l := newLoader(t, dir, loader.Config{Workers: 2}, served)
	p, err := l.Plan(wire.Request{Epoch: 1, World: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]bool{}
	for _, b := range p.Batches {
		for _, it := range b {
			got[it.Graph] = true
		}
	}
	if len(got) != len(served) {
		t.Fatalf("plan covers %v, want %v", got, served)
	}
	for _, id := range served {
		if !got[id] {
			t.Fatalf("graph %d missing", id)
		}
	}
}

// One Memory bounds the batches in flight of every stream sharing it: with
// eight streams whose clients read slowly, the bytes held never pass the
// budget, and each stream still completes (a stream with nothing in
// flight builds its next batch whatever the others hold), also with a
// budget smaller than one batch.
func TestMemoryBoundsStreams(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	for _, limit := range []int64{1 << 20, 1 << 10} {
		mem := loader.NewMemory(limit)
		l := newLoader(t, dir, loader.Config{Workers: 4, Window: 8, Memory: mem}, nil)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for s := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, err := l.Plan(wire.Request{Epoch: uint64(s), World: 1, BatchSize: 4})
				if err != nil {
					errs <- err
					return
				}
				st, err := l.Stream(context.Background(), p, func(arrow.RecordBatch) error {
					time.Sleep(2 * time.Millisecond)
					return nil
				})
				if err == nil && st.Batches != 15 {
					err = fmt.Errorf("stream %d: %d batches", s, st.Batches)
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if mem.Peak() > limit || mem.Held() != 0 {
			t.Fatalf("budget %d: peak %d held, %d still held after the streams", limit, mem.Peak(), mem.Held())
		}
		t.Logf("budget %d B: peak %d B held by batches beyond each stream's first", limit, mem.Peak())
	}
}

// Bytes an idle holder keeps (the daemon's cached shared-memory rings)
// go back when a batch needs them: a stream under a budget that such a
// holder fills asks it (AddReclaim) instead of waiting, and the budget
// still bounds what is held.
func TestMemoryReclaimsIdleHolders(t *testing.T) {
	const limit = 4 << 20
	mem := loader.NewMemory(limit)
	var mu sync.Mutex
	idle, reclaims := int64(0), 0
	mem.AddReclaim(func() {
		mu.Lock()
		defer mu.Unlock()
		reclaims++
		mem.Release(idle)
		idle = 0
	})
	if !mem.TryAcquire(limit) {
		t.Fatal("an empty budget refused its whole size")
	}
	idle = limit
	l := newLoader(t, fixture.SynthShards(t, "COLLAB", 60, 1), loader.Config{Workers: 2, Window: 4, Memory: mem}, nil)
	_, batches := stream(t, l, wire.Request{Epoch: 1, World: 1, BatchSize: 4})
	if len(batches) != 15 || reclaims == 0 || mem.Held() != 0 || mem.Peak() > limit {
		t.Fatalf("%d batches, %d reclaims, %d bytes held after, peak %d (budget %d)", len(batches), reclaims, mem.Held(), mem.Peak(), limit)
	}
}

// Striding and counting select batches of the rank's epoch: the streams
// (start k, stride s) for k < s interleave back into the whole epoch, and
// consecutive chunks (count c) concatenate into it, batch for batch.
func TestStrideAndCount(t *testing.T) {
	l := newLoader(t, fixture.SynthShards(t, "COLLAB", 60, 1), loader.Config{Workers: 2}, nil)
	_, full := stream(t, l, wire.Request{Epoch: 4, BatchSize: 5, World: 2, Rank: 1}) // 6 batches
	if len(full) != 6 {
		t.Fatalf("%d batches", len(full))
	}
	for _, s := range []int{2, 3, 4, 7} {
		got := make([][32]byte, len(full))
		for k := range s {
			_, part := stream(t, l, wire.Request{Epoch: 4, BatchSize: 5, World: 2, Rank: 1, StartBatch: k, Stride: s})
			for i, d := range part {
				got[k+i*s] = d
			}
		}
		for i := range full {
			if got[i] != full[i] {
				t.Fatalf("stride %d: batch %d differs from the whole epoch's", s, i)
			}
		}
	}
	for _, c := range []int{1, 4, 6} {
		var got [][32]byte
		for k := 0; k < len(full); k += c {
			_, part := stream(t, l, wire.Request{Epoch: 4, BatchSize: 5, World: 2, Rank: 1, StartBatch: k, Count: c})
			got = append(got, part...)
		}
		if len(got) != len(full) {
			t.Fatalf("count %d: %d batches", c, len(got))
		}
		for i := range full {
			if got[i] != full[i] {
				t.Fatalf("count %d: batch %d differs", c, i)
			}
		}
	}
}

// With batches_per_epoch B, epoch e is batches e·B … (e+1)·B−1 of the
// passes 0, 1, 2, … laid end to end, each pass the batches a one-pass
// epoch of that number has (same permutation, same draws); drop_last
// removes each pass's short batch.
func TestBatchesPerEpoch(t *testing.T) {
	l := newLoader(t, fixture.SynthShards(t, "COLLAB", 60, 1), loader.Config{Workers: 2}, nil)
	for _, dropLast := range []bool{false, true} {
		var passes [][32]byte
		for p := range uint64(5) {
			_, b := stream(t, l, wire.Request{Epoch: p, BatchSize: 16, DropLast: dropLast})
			passes = append(passes, b...)
		}
		perPass := 4
		if dropLast {
			perPass = 3 // 60 = 16+16+16+12
		}
		if len(passes) != 5*perPass {
			t.Fatalf("drop_last %v: %d batches in 5 passes", dropLast, len(passes))
		}
		const B = 7
		var epochs [][32]byte
		for e := range uint64(2) {
			_, b := stream(t, l, wire.Request{Epoch: e, BatchSize: 16, BatchesPerEpoch: B, DropLast: dropLast})
			if len(b) != B {
				t.Fatalf("epoch %d: %d batches, want %d", e, len(b), B)
			}
			epochs = append(epochs, b...)
		}
		for i, d := range epochs {
			if d != passes[i] {
				t.Fatalf("drop_last %v: batch %d of the fixed epochs is not batch %d of the passes", dropLast, i, i)
			}
		}
		// A later epoch is cut without the passes before it.
		_, late := stream(t, l, wire.Request{Epoch: 300, BatchSize: 16, BatchesPerEpoch: B, DropLast: dropLast, StartBatch: 2, Count: 1})
		_, pass := stream(t, l, wire.Request{Epoch: uint64((300*B + 2) / perPass), BatchSize: 16, DropLast: dropLast})
		if late[0] != pass[(300*B+2)%perPass] {
			t.Fatalf("drop_last %v: epoch 300 batch 2 is not its pass's", dropLast)
		}
	}
}

// A cache limit changes speed, never bytes: a limit below one shard (every
// graph read from a shard loaded anew, SubMix's partners included) and one
// of a few shards give the unlimited reader's stream, in both shuffle
// modes and with several workers; the windowed shuffle is another order.
func TestCacheLimitSameBytes(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 300, 2, 128<<10)
	var orders [][]byte
	for _, sh := range []epoch.Shuffle{{}, {Window: 4}} { // 4: no window of one graph (TestWindowTooSmallForSubMixRefusedAtStart)
		cfg := loader.Config{Workers: 3, Seed: 5, BatchSize: 16, Shuffle: sh}
		sched, _ := epoch.ParseSchedule(policy)
		cfg.Schedule = sched
		want, _ := stream(t, fixture.Loader(t, dir, nil, policy, cfg), wire.Request{Epoch: 4, World: 1})
		for _, limit := range []int64{1, 4 << 20} {
			got, _ := stream(t, fixture.Loader(t, dir, nil, policy, cfg, shard.WithCacheLimit(limit)), wire.Request{Epoch: 4, World: 1})
			if !bytes.Equal(got, want) {
				t.Fatalf("shuffle %s, cache limit %d: the stream differs from the unlimited reader's", sh, limit)
			}
		}
		orders = append(orders, want)
	}
	if bytes.Equal(orders[0], orders[1]) {
		t.Fatal("the windowed shuffle gave the global order")
	}
}

// A folder stored in a random order (shardconv convert --order random:SEED)
// serves the global shuffle's batches byte for byte as the folder stored
// in id order, with and without a cache limit: ids, not positions, key
// every draw.
func TestRandomOrderSameBatches(t *testing.T) {
	byID := fixture.SynthShardsSized(t, "COLLAB", 300, 2, 128<<10)
	random := fixture.SynthShardsOrdered(t, "COLLAB", 300, 2, 128<<10, "random:3")
	cfg := loader.Config{Workers: 2, Seed: 5, BatchSize: 16}
	sched, _ := epoch.ParseSchedule(policy)
	cfg.Schedule = sched
	_, want := stream(t, fixture.Loader(t, byID, nil, policy, cfg), wire.Request{Epoch: 2, World: 1})
	for _, limit := range []int64{0, 4 << 20} {
		var opts []shard.Option
		if limit > 0 {
			opts = append(opts, shard.WithCacheLimit(limit))
		}
		_, got := stream(t, fixture.Loader(t, random, nil, policy, cfg, opts...), wire.Request{Epoch: 2, World: 1})
		if !slices.Equal(got, want) {
			t.Fatalf("cache limit %d: the random-order folder's batches differ from the id-order folder's", limit)
		}
	}
}

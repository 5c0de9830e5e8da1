package shard_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/ingest/synth"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/shard"
)

func TestMain(m *testing.M) { fixture.Main(m) }

// decodedPages is what decoding each of dir's first k pages takes: a
// reader that keeps everything, one pin a page.
func decodedPages(t *testing.T, dir string, k int) []int64 {
	t.Helper()
	r, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sizes := make([]int64, k)
	for p := range sizes {
		before := r.Stats().Used
		first, _ := r.PageGraphs(p)
		if err := pin(r, r.Manifest().IDAt(first)); err != nil {
			t.Fatal(err)
		}
		sizes[p] = r.Stats().Used - before
	}
	return sizes
}

// Under a cache limit every graph pinned, in any order and from many
// goroutines, equals the eagerly read one; the cache stays within its
// limit plus what is pinned at once, and drops shards to do so.
func TestCacheLimit(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 400, 3, 128<<10)
	eager, err := shard.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer eager.Close()
	man := eager.Manifest()
	if len(man.Shards) < 6 {
		t.Fatalf("the fixture has %d shards, want several", len(man.Shards))
	}
	var largest int64
	for _, s := range man.Shards {
		largest = max(largest, s.Bytes)
	}
	decoded := decodedPages(t, dir, 1)[0]
	// Room for three shards of the set's many.
	limit := 3 * decoded
	lazy, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(limit))
	if err != nil {
		t.Fatal(err)
	}
	defer lazy.Close()
	if !lazy.Lazy() || lazy.Stats().Loads != 0 {
		t.Fatalf("a cache-limited Open read shards: %+v", lazy.Stats())
	}
	if _, err := lazy.Graph(0); err == nil {
		t.Fatal("Graph on a lazy reader did not refuse")
	}
	n := int64(lazy.NumGraphs())
	const workers = 4
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			for range 150 {
				id := r.Int64N(n)
				g, release, err := lazy.Pin(context.Background(), id)
				if err != nil {
					errs <- err
					return
				}
				want, _ := eager.Graph(id)
				if !reflect.DeepEqual(g, want) {
					t.Errorf("graph %d differs under the cache limit", id)
				}
				if lazy.ShardOf(id) < 0 || lazy.ShardOf(id) >= lazy.NumShards() {
					t.Errorf("ShardOf(%d) = %d", id, lazy.ShardOf(id))
				}
				release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := lazy.Stats()
	t.Logf("%+v (largest shard file %d bytes, shard 0 decoded %d)", st, largest, decoded)
	if st.Evictions == 0 || st.Loads <= int64(lazy.NumShards()) {
		t.Errorf("random reads of %d shards under a limit of a few were served without dropping any: %+v", lazy.NumShards(), st)
	}
	// Over the limit only by what the workers pinned at once: one shard
	// each (its decoded size is at most a few times its file's).
	if st.Peak > limit+workers*2*decoded {
		t.Errorf("peak %d bytes, limit %d", st.Peak, limit)
	}
	if st.Used > limit {
		t.Errorf("%d bytes held with nothing pinned, limit %d", st.Used, limit)
	}
}

// charge is a user's charge that notes when it is forgotten.
type charge struct {
	n      int64
	forgot *int
}

func (c charge) Bytes() int64 { return c.n }
func (c charge) Forget()      { *c.forgot++ }

// What a pin's release charges counts against the limit with its page,
// and is forgotten when the page goes.
func TestCacheChargeAndEvict(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 400, 3, 128<<10)
	r, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sched := r.Schedule(2, func(b int, visit func(int64)) { visit(int64(b)) }, nil, 2)
	defer sched.Close()
	forgot := 0
	_, pin, err := sched.Pin(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	before := r.Stats().Used
	pin.Release(charge{1000, &forgot})
	if st := r.Stats(); st.Resident != 1 || st.Used != before+1000 || forgot != 0 {
		t.Fatalf("the charge was not counted, or forgotten under the limit: %+v, forgotten %d", st, forgot)
	}
	// Not needed again and cooled, the page goes first when room is
	// needed: its charge with it.
	sched.ReleaseBatch(0)
	sched.ReleaseBatch(1)
	tight, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(1))
	if err != nil {
		t.Fatal(err)
	}
	defer tight.Close()
	tsched := tight.Schedule(1, func(b int, visit func(int64)) { visit(0) }, nil, 1)
	defer tsched.Close()
	_, pin, err = tsched.Pin(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	pin.Release(charge{1000, &forgot})
	if st := tight.Stats(); st.Resident != 0 || st.Used != st.Futures || forgot != 1 {
		t.Fatalf("an unpinned page over the limit stayed, or its charge was not forgotten: %+v, forgotten %d", st, forgot)
	}
}

// The graph-size index: read when present and sound; a folder without one
// says ErrNoSizes; a flipped byte, a stale copy from another folder, a
// truncated file are refused naming the file and field; and verify finds
// an index whose entries disagree with the shards even when its checksum
// and manifest match.
func TestGraphSizes(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 400, 3, 128<<10)
	other := fixture.SynthShardsSized(t, "COLLAB", 400, 4, 128<<10)
	open := func(d string) (*shard.GraphSizes, error) {
		r, err := shard.Open(context.Background(), d, shard.WithCacheLimit(1<<30))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		return r.GraphSizes()
	}
	gs, err := open(dir)
	if err != nil {
		t.Fatal(err)
	}
	eager, _ := shard.Open(context.Background(), dir)
	defer eager.Close()
	for id := range int64(eager.NumGraphs()) {
		g, _ := eager.Graph(id)
		if gs.Nodes[id] != g.NumNodes || int(gs.Edges[id]) != g.NumEdges() || gs.MaxDegree[id] < 1 {
			t.Fatalf("graph %d: index %d/%d/%d, shard %d nodes %d edges", id, gs.Nodes[id], gs.Edges[id], gs.MaxDegree[id], g.NumNodes, g.NumEdges())
		}
	}
	copyDir := func(src string) string {
		d := filepath.Join(t.TempDir(), "s")
		if err := os.CopyFS(d, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		return d
	}
	name := shard.GraphSizesName
	for _, tc := range []struct {
		what   string
		mutate func(d string)
		want   string
	}{
		{"absent", func(d string) { os.Remove(filepath.Join(d, name)) }, ""},
		{"flipped", func(d string) {
			b, _ := os.ReadFile(filepath.Join(d, name))
			b[5] ^= 1
			os.WriteFile(filepath.Join(d, name), b, 0o644)
		}, "graph-sizes.bin: checksum"},
		{"stale", func(d string) {
			b, _ := os.ReadFile(filepath.Join(other, name))
			os.WriteFile(filepath.Join(d, name), b, 0o644)
		}, "graph-sizes.bin: manifest"},
		{"truncated", func(d string) {
			b, _ := os.ReadFile(filepath.Join(d, name))
			os.WriteFile(filepath.Join(d, name), b[:len(b)-1], 0o644)
		}, "graph-sizes.bin: size"},
	} {
		d := copyDir(dir)
		tc.mutate(d)
		_, err := open(d)
		switch {
		case tc.want == "" && !errors.Is(err, shard.ErrNoSizes):
			t.Errorf("%s: %v, want ErrNoSizes", tc.what, err)
		case tc.want != "" && (!errors.Is(err, shard.ErrCorrupt) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want a corruption naming %q", tc.what, err, tc.want)
		}
	}
	// Two graphs' entries swapped, the CRC recomputed: only the shards
	// can tell, and verify reads them.
	d := copyDir(dir)
	p := filepath.Join(d, name)
	b, _ := os.ReadFile(p)
	body := b[:len(b)-56]
	var a [12]byte
	copy(a[:], body[0:12])
	copy(body[0:12], body[12:24])
	copy(body[12:24], a[:])
	if bytes.Equal(body[0:12], body[12:24]) {
		t.Fatal("graphs 0 and 1 have the same sizes: pick others")
	}
	binary.LittleEndian.PutUint32(b[len(b)-56+16:], crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	os.WriteFile(p, b, 0o644)
	if _, err := open(d); err != nil {
		t.Fatalf("a consistent index was refused: %v", err)
	}
	if _, errs := shard.Verify(context.Background(), d); len(errs) != 1 || !strings.Contains(errs[0].Error(), "graph-sizes.bin: graph 0") {
		t.Fatalf("verify of a swapped index: %v", errs)
	}
	if _, errs := shard.Verify(context.Background(), dir); len(errs) != 0 {
		t.Fatalf("verify of a sound folder: %v", errs)
	}
}

// FuzzGraphSizes: any bytes in place of the index are read or refused as
// corrupt, never a panic, and what is read agrees with the manifest.
func FuzzGraphSizes(f *testing.F) {
	dir := fixture.SynthShardsSized(f, "COLLAB", 40, 3, 0)
	good, _ := os.ReadFile(filepath.Join(dir, shard.GraphSizesName))
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add([]byte("AUGSIZE1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := t.TempDir()
		if err := os.CopyFS(d+"/s", os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "s", shard.GraphSizesName), data, 0o644)
		r, err := shard.Open(context.Background(), d+"/s", shard.WithCacheLimit(1<<30))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		gs, err := r.GraphSizes()
		if err != nil {
			if !errors.Is(err, shard.ErrCorrupt) {
				t.Fatalf("not a corruption: %v", err)
			}
			return
		}
		var nodes int64
		for _, n := range gs.Nodes {
			nodes += int64(n)
		}
		if nodes != r.Manifest().Stats.Nodes {
			t.Fatalf("read %d nodes, manifest %d", nodes, r.Manifest().Stats.Nodes)
		}
	})
}

// Prefetch reads a page ahead into room, and reads nothing when the cache
// has none: a later Pin finds the page held.
func TestPrefetch(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 400, 3, 128<<10)
	r, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(1<<30))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Prefetch(2)
	for deadline := time.Now().Add(10 * time.Second); r.Stats().Resident != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the prefetched page never arrived: %+v", r.Stats())
		}
	}
	first, n := r.PageGraphs(2)
	for id := first; id < first+n; id++ {
		_, release, err := r.Pin(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	if st := r.Stats(); st.Loads != 1 || st.Prefetches != 1 || st.Scans != 0 { // the page map: no scan
		t.Fatalf("the pins read the prefetched page again: %+v", st)
	}
	tight, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(1))
	if err != nil {
		t.Fatal(err)
	}
	defer tight.Close()
	tight.Prefetch(0)
	if st := tight.Stats(); st.Prefetches != 0 {
		t.Fatalf("prefetched into a full cache: %+v", st)
	}
}

// A cooled page is dropped first, and to make room for a prefetch; a pin
// warms it again.
func TestCool(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 400, 3, 128<<10)
	size := decodedPages(t, dir, 3)
	// Room for pages 0 and 1 and half of 2: 0 and 1 held, then 0 cooled.
	r, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(size[0]+size[1]+size[2]/2))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, p := range []int{0, 1} {
		first, _ := r.PageGraphs(p)
		_, rel, err := r.Pin(context.Background(), first)
		if err != nil {
			t.Fatal(err)
		}
		rel()
	}
	r.Prefetch(2)
	time.Sleep(50 * time.Millisecond)
	if st := r.Stats(); st.Prefetches != 0 {
		t.Fatalf("prefetched over warm pages: %+v", st)
	}
	r.Cool(0)
	r.Prefetch(2)
	for deadline := time.Now().Add(10 * time.Second); r.Stats().Loads != 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the prefetch never came: %+v", r.Stats())
		}
	}
	st := r.Stats()
	if st.Evictions != 1 || st.Resident != 2 {
		t.Fatalf("want page 0 dropped for page 2: %+v", st)
	}
	// Page 1 is still held: a pin reads nothing.
	first, _ := r.PageGraphs(1)
	_, rel, err := r.Pin(context.Background(), first)
	if err != nil {
		t.Fatal(err)
	}
	rel()
	if r.Stats().Loads != 3 {
		t.Fatalf("page 1 was dropped instead of the cold page 0: %+v", r.Stats())
	}
}

// The estimate of a page's decoded size (from the manifest and the
// graph-size index) is within a quarter of what decoding it takes, for
// format 2 (one-hot TU) and format 3 (float edge features, no node
// features); without the index, the shard's estimate is spread over its
// pages by graph count.
func TestDecodedBytesEstimate(t *testing.T) {
	ppa := filepath.Join(t.TempDir(), "ppa")
	spec, _ := synth.LikePPA("ogbg-ppa")
	if _, err := synth.WritePPA(context.Background(), spec.Scaled(200), 1, ppa, false); err != nil {
		t.Fatal(err)
	}
	ppaShards := filepath.Join(t.TempDir(), "ppa.shards")
	if _, err := convert.Run(context.Background(), convert.Options{Input: ppa, Out: ppaShards}); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{fixture.SynthShardsSized(t, "COLLAB", 400, 3, 128<<10), ppaShards} {
		r, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(1<<40))
		if err != nil {
			t.Fatal(err)
		}
		pages := r.PageBytes()
		r.Close()
		got, est := decodedPages(t, dir, 1)[0], pages[0]
		if ratio := float64(est) / float64(got); ratio < 0.75 || ratio > 1.25 {
			t.Errorf("%s: estimate %d bytes, decoded %d (%.2f×)", dir, est, got, ratio)
		}
		man, _ := shard.ReadManifest(dir)
		var sum int64
		for _, b := range pages[:len(man.Shards[0].Batches)] {
			sum += b
		}
		if shardEst := man.DecodedBytes(0); float64(sum) < 0.75*float64(shardEst) || float64(sum) > 1.25*float64(shardEst) {
			t.Errorf("%s: shard 0's pages estimated at %d bytes together, the shard at %d", dir, sum, shardEst)
		}
	}
}

// pin pins graph id and releases it at once.
func pin(r *shard.Reader, id int64) error {
	_, rel, err := r.Pin(context.Background(), id)
	if err == nil {
		rel()
	}
	return err
}

// copyDir copies a fixture's shard folder so a test may damage it.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "shards")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

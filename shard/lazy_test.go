package shard_test

import (
	"context"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"

	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/shard"
)

func TestMain(m *testing.M) { fixture.Main(m) }

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
	// The decoded size of one shard, from a reader that keeps everything.
	probe, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	_, release, err := probe.Pin(0)
	if err != nil {
		t.Fatal(err)
	}
	release()
	decoded := probe.Stats().Used
	probe.Close()
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
				g, release, err := lazy.Pin(id)
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

// Charged bytes count against the limit, and the eviction tells the user
// which shard went.
func TestCacheChargeAndEvict(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 400, 3, 128<<10)
	r, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(1))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var evicted []int
	r.OnEvict(func(s int) { evicted = append(evicted, s) })
	_, release, err := r.Pin(0)
	if err != nil {
		t.Fatal(err)
	}
	r.Charge(0, 1000)
	if st := r.Stats(); st.Resident != 1 || st.Used < 1000 {
		t.Fatalf("a pinned shard was dropped or the charge lost: %+v", st)
	}
	release()
	if st := r.Stats(); st.Resident != 0 || st.Used != 0 || len(evicted) != 1 || evicted[0] != 0 {
		t.Fatalf("an unpinned shard over the limit stayed: %+v, evicted %v", st, evicted)
	}
}

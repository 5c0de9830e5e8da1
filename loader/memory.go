package loader

import (
	"context"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/shard"
)

// Memory bounds the bytes of the batches in flight (being built, or built
// and waiting for their client) across every stream of every Loader that
// shares it, and the shared-memory rings the daemon maps (TryAcquire): one
// budget for a daemon's socket and Flight streams and all its views. A
// batch is counted at an upper bound of its size, taken before it is
// built; a stream with nothing in flight may always build its next batch,
// so no stream waits on another's slow client forever. Memory held by
// batches and rings is therefore at most the budget plus one batch per
// running stream.
type Memory struct {
	sem        *semaphore.Weighted
	limit      int64
	held, peak atomic.Int64
	// takers counts takes under way (acquire, TryAcquire); reclaim, when
	// set, gives back bytes that idle holders keep (the daemon's cached
	// rings) and is called before a take waits or fails.
	takers  atomic.Int64
	reclaim atomic.Pointer[[]func()]
	addMu   sync.Mutex
}

// DefaultMemory is the budget a Loader gets when given none.
const DefaultMemory = 1 << 30

// NewMemory returns a budget of limit bytes (limit ≤ 0: DefaultMemory).
func NewMemory(limit int64) *Memory {
	if limit <= 0 {
		limit = DefaultMemory
	}
	return &Memory{sem: semaphore.NewWeighted(limit), limit: limit}
}

// Limit is the budget in bytes.
func (m *Memory) Limit() int64 { return m.limit }

// WorkLimit is the most working memory one graph's augmentation may take
// under this budget: the budget, and never less than 64 MiB (a stream's
// next batch is built whatever the budget holds; a budget of a few KiB
// throttles streams, it does not refuse graphs). A request whose batches
// hold a graph that needs more is refused (Loader.Plan).
func (m *Memory) WorkLimit() int64 { return max(m.limit, minWorkLimit) }

const minWorkLimit = 64 << 20

// Held is the bytes batches hold now; Peak the most they held at once.
func (m *Memory) Held() int64 { return m.held.Load() }

// Peak is the most bytes batches held at once.
func (m *Memory) Peak() int64 { return m.peak.Load() }

// AddReclaim registers f, which gives back the bytes of holders that
// keep them only while nothing else needs them (a server's idle
// shared-memory rings, server.ringCache). A take that cannot have its
// bytes at once calls every f first.
func (m *Memory) AddReclaim(f func()) {
	m.addMu.Lock()
	defer m.addMu.Unlock()
	var fs []func()
	if p := m.reclaim.Load(); p != nil {
		fs = append(fs, *p...)
	}
	fs = append(fs, f)
	m.reclaim.Store(&fs)
}

// Wanted reports whether a take is under way: an idle holder should give
// its bytes back rather than keep them.
func (m *Memory) Wanted() bool { return m.takers.Load() > 0 }

// reclaimIdle asks the idle holders for their bytes (AddReclaim).
func (m *Memory) reclaimIdle() {
	if p := m.reclaim.Load(); p != nil {
		for _, f := range *p {
			f()
		}
	}
}

// acquire takes n bytes (at most the whole budget), waiting for them.
func (m *Memory) acquire(ctx context.Context, n int64) (int64, error) {
	n = min(n, m.limit)
	m.takers.Add(1)
	defer m.takers.Add(-1)
	if !m.sem.TryAcquire(n) {
		m.reclaimIdle()
		if err := m.sem.Acquire(ctx, n); err != nil {
			return 0, err
		}
	}
	h := m.held.Add(n)
	for p := m.peak.Load(); h > p && !m.peak.CompareAndSwap(p, h); p = m.peak.Load() {
	}
	return n, nil
}

// TryAcquire takes n bytes if the budget has them now (a holder other
// than a batch: a shared-memory ring), without waiting; Release gives
// them back.
func (m *Memory) TryAcquire(n int64) bool {
	if n <= 0 {
		return true
	}
	if n > m.limit {
		return false
	}
	m.takers.Add(1)
	defer m.takers.Add(-1)
	if !m.sem.TryAcquire(n) {
		m.reclaimIdle()
		if !m.sem.TryAcquire(n) {
			return false
		}
	}
	h := m.held.Add(n)
	for p := m.peak.Load(); h > p && !m.peak.CompareAndSwap(p, h); p = m.peak.Load() {
	}
	return true
}

// Release gives back n bytes taken by TryAcquire.
func (m *Memory) Release(n int64) { m.release(n) }

func (m *Memory) release(n int64) {
	if n > 0 {
		m.held.Add(-n)
		m.sem.Release(n)
	}
}

// batchBytes bounds the bytes of a collated batch of graphs whose sizes
// are bounded by sizes (see collator): both directions of every edge in
// two int32 columns, up to two feature codes per node (a merged node's
// mix) with their node id and weight, or dim float32 per node, the
// categorical columns' codes, the edge features of both directions, and a
// few fixed-size columns per graph.
func batchBytes(sizes []aug.Size, lay *shard.Layout, nodeWidth, edgeWidth int) int64 {
	perNode := int64(nodeWidth*len(lay.NodeCat) + 4*lay.NodeDense)
	if lay.OneHot > 0 {
		perNode += 24
	}
	perEdge := 16 + 2*int64(edgeWidth*len(lay.EdgeCat)+4*lay.EdgeDense) // both directions
	var b int64
	for _, s := range sizes {
		b += 48 + 4*int64(lay.Targets) + perEdge*int64(s.Edges) + perNode*int64(s.Nodes)
	}
	return b
}

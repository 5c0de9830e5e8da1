package shard

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// WithCacheLimit makes Open read only the manifest: shards are then read,
// checked and decoded when a graph of theirs is first pinned (Pin), kept
// while pinned, and the least recently needed unpinned ones dropped
// whenever the decoded bytes (with what users charged to them, Charge)
// pass limit bytes. Graph is then refused; Pin works in both modes.
// limit 0 (the default) decodes every shard at Open.
func WithCacheLimit(limit int64) Option { return func(c *readerConfig) { c.cacheLimit = limit } }

// lazy is a Reader's state under a cache limit.
type lazy struct {
	limit int64
	mem   memory.Allocator

	mu    sync.Mutex
	slots []lazySlot
	used  int64
	tick  uint64
	// onEvict is told which shard was dropped (under mu).
	onEvict func(shard int)

	loads, evictions atomic.Int64
	peak             atomic.Int64

	// Decoded and file bytes of every load so far: the ratio estimates an
	// unread shard's decoded size for Prefetch.
	decoded, filed int64
	prefetching    int
	prefetches     atomic.Int64
}

// maxPrefetch bounds the shards read ahead at once.
const maxPrefetch = 2

// Prefetch starts reading shard si on a goroutine of its own when it is
// neither held nor being read and the cache has room for it without
// dropping anything (its decoded size estimated from the shards read so
// far): the loader calls it for the shards of batches ahead, so a window's
// shards are read while the one before is augmented. Errors are left to
// the Pin that needs the shard.
func (r *Reader) Prefetch(si int) {
	l := r.lazy
	if l == nil || si < 0 || si >= len(l.slots) {
		return
	}
	l.mu.Lock()
	s := &l.slots[si]
	file := r.man.Shards[si].Bytes
	est := 4 * file
	if l.filed > 0 {
		est = int64(float64(file) * float64(l.decoded) / float64(l.filed))
	}
	if s.loaded || s.ready != nil || l.prefetching >= maxPrefetch || l.used-l.coldBytes()+est > l.limit {
		l.mu.Unlock()
		return
	}
	// Room is made from cold shards only: a warm one may be needed next.
	for l.used+est > l.limit {
		if !l.evictOne(r, true) {
			break
		}
	}
	l.prefetching++
	l.mu.Unlock()
	l.prefetches.Add(1)
	go func() {
		if _, err := r.acquire(si); err == nil {
			r.unpin(si)
		}
		l.mu.Lock()
		l.prefetching--
		l.mu.Unlock()
	}()
}

type lazySlot struct {
	ready   chan struct{} // set while loading or loaded; closed once loaded
	loaded  bool
	batches []batch
	first   []int64 // first graph id of each batch
	recs    []arrow.RecordBatch
	bytes   int64 // decoded (and mapped) bytes
	charged int64 // what users attached (Charge)
	pins    int
	last    uint64
	// cold: a user said no batch ahead needs it (Cool); dropped first,
	// and dropped to make room for a Prefetch.
	cold bool
}

// CacheStats describe a lazy Reader's cache.
type CacheStats struct {
	Limit, Used, Peak int64
	Loads, Evictions  int64
	Resident          int
	// Prefetches counts the reads Prefetch started.
	Prefetches int64
}

// countingAlloc counts the bytes a shard's decoding allocates.
type countingAlloc struct {
	memory.Allocator
	n int64
}

func (a *countingAlloc) Allocate(size int) []byte {
	a.n += int64(size)
	return a.Allocator.Allocate(size)
}

func (a *countingAlloc) Reallocate(size int, b []byte) []byte {
	a.n += int64(size - len(b))
	return a.Allocator.Reallocate(size, b)
}

func (r *Reader) openLazy(cfg readerConfig) {
	r.lazy = &lazy{limit: cfg.cacheLimit, mem: cfg.mem, slots: make([]lazySlot, len(r.man.Shards))}
}

// Lazy reports whether the reader holds shards on demand (WithCacheLimit).
func (r *Reader) Lazy() bool { return r.lazy != nil }

// NumShards is the number of shard files.
func (r *Reader) NumShards() int { return len(r.man.Shards) }

// ShardOf returns the shard holding graph id (ids must be in range).
func (r *Reader) ShardOf(id int64) int {
	sh := r.man.Shards
	return sort.Search(len(sh), func(i int) bool { return sh[i].FirstGraph > id }) - 1
}

// Pin returns graph id and a release to call once its slices are no
// longer read; the slices stay valid until then. Without a cache limit the
// release does nothing and the slices live until Close.
func (r *Reader) Pin(id int64) (Graph, func(), error) {
	if r.lazy == nil {
		g, err := r.Graph(id)
		return g, func() {}, err
	}
	if id < 0 || id >= r.man.Stats.Graphs {
		return Graph{}, nil, fmt.Errorf("%w: id %d of %d", ErrNotFound, id, r.man.Stats.Graphs)
	}
	si := r.ShardOf(id)
	s, err := r.acquire(si)
	if err != nil {
		return Graph{}, nil, err
	}
	bi := sort.Search(len(s.first), func(i int) bool { return s.first[i] > id }) - 1
	g := r.graphOf(&s.batches[bi], int(id-s.first[bi]))
	return g, func() { r.unpin(si) }, nil
}

// OnEvict sets what is told when a shard is dropped (the loader drops the
// indexes it charged to it). Call before serving.
func (r *Reader) OnEvict(fn func(shard int)) {
	if r.lazy != nil {
		r.lazy.onEvict = fn
	}
}

// Charge adds n bytes that a user keeps for a pinned shard's graphs (the
// loader's NodeSam indexes) to the shard's share of the limit; they are
// forgotten when the shard is dropped (OnEvict).
func (r *Reader) Charge(shard int, n int64) {
	l := r.lazy
	if l == nil {
		return
	}
	l.mu.Lock()
	if s := &l.slots[shard]; s.loaded {
		s.charged += n
		l.used += n
		l.notePeak()
		l.evictLocked(r)
	}
	l.mu.Unlock()
}

// Stats returns the cache's counters (zero without a cache limit).
func (r *Reader) Stats() CacheStats {
	l := r.lazy
	if l == nil {
		return CacheStats{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := CacheStats{Limit: l.limit, Used: l.used, Peak: l.peak.Load(), Loads: l.loads.Load(), Evictions: l.evictions.Load(),
		Prefetches: l.prefetches.Load()}
	for i := range l.slots {
		if l.slots[i].loaded {
			st.Resident++
		}
	}
	return st
}

func (l *lazy) notePeak() {
	if l.used > l.peak.Load() {
		l.peak.Store(l.used)
	}
}

// acquire pins shard si, loading it when absent (one loader at a time
// per shard: the others wait for it).
func (r *Reader) acquire(si int) (*lazySlot, error) {
	l := r.lazy
	l.mu.Lock()
	for {
		s := &l.slots[si]
		if s.loaded {
			s.pins++
			s.cold = false
			l.tick++
			s.last = l.tick
			l.mu.Unlock()
			return s, nil
		}
		if s.ready != nil { // another goroutine is loading it
			ch := s.ready
			l.mu.Unlock()
			<-ch
			l.mu.Lock()
			continue
		}
		ch := make(chan struct{})
		s.ready = ch
		l.mu.Unlock()
		alloc := &countingAlloc{Allocator: l.mem}
		batches, recs, err := loadShard(r.dir, r.man, si, alloc, false)
		l.mu.Lock()
		close(ch)
		if err != nil {
			s.ready = nil
			l.mu.Unlock()
			return nil, err
		}
		s.batches, s.recs, s.loaded = batches, recs, true
		s.first = s.first[:0]
		next := r.man.Shards[si].FirstGraph
		for _, b := range batches {
			s.first = append(s.first, next)
			next += int64(len(b.ids))
		}
		s.bytes = alloc.n
		if r.man.Compression == CompressNone {
			s.bytes += r.man.Shards[si].Bytes // the buffers are views of the file's bytes
		}
		l.used += s.bytes
		l.decoded += s.bytes
		l.filed += r.man.Shards[si].Bytes
		l.loads.Add(1)
		s.pins++
		l.tick++
		s.last = l.tick
		l.notePeak()
		l.evictLocked(r)
		l.mu.Unlock()
		return s, nil
	}
}

func (r *Reader) unpin(si int) {
	l := r.lazy
	l.mu.Lock()
	l.slots[si].pins--
	l.evictLocked(r)
	l.mu.Unlock()
}

// evictLocked drops unpinned shards, cold ones first then the least
// recently needed, while the cache is over its limit (everything resident
// pinned: over the limit until a release).
func (l *lazy) evictLocked(r *Reader) {
	for l.used > l.limit && l.evictOne(r, false) {
	}
}

// evictOne drops one unpinned shard (only a cold one when coldOnly):
// cold before warm, then the least recently needed. It reports whether
// there was one.
func (l *lazy) evictOne(r *Reader, coldOnly bool) bool {
	victim := -1
	for i := range l.slots {
		s := &l.slots[i]
		if !s.loaded || s.pins > 0 || (coldOnly && !s.cold) {
			continue
		}
		if v := &l.slots[max(victim, 0)]; victim < 0 || (s.cold && !v.cold) || (s.cold == v.cold && s.last < v.last) {
			victim = i
		}
	}
	if victim < 0 {
		return false
	}
	s := &l.slots[victim]
	for _, rec := range s.recs {
		rec.Release()
	}
	l.used -= s.bytes + s.charged
	*s = lazySlot{first: s.first[:0]}
	l.evictions.Add(1)
	if l.onEvict != nil {
		l.onEvict(victim)
	}
	return true
}

// coldBytes is what the unpinned cold shards hold.
func (l *lazy) coldBytes() int64 {
	var n int64
	for i := range l.slots {
		if s := &l.slots[i]; s.loaded && s.cold && s.pins == 0 {
			n += s.bytes + s.charged
		}
	}
	return n
}

// Cool says no batch ahead needs shard si (the loader, once the last
// batch of a stream needing it is sent): it is dropped before any other,
// and to make room for a Prefetch. A later Pin makes it warm again.
func (r *Reader) Cool(si int) {
	l := r.lazy
	if l == nil || si < 0 || si >= len(l.slots) {
		return
	}
	l.mu.Lock()
	if s := &l.slots[si]; s.loaded {
		s.cold = true
	}
	l.mu.Unlock()
}

func (l *lazy) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.slots {
		for _, rec := range l.slots[i].recs {
			rec.Release()
		}
		l.slots[i] = lazySlot{}
	}
	l.used = 0
}

// DecodedBytes estimates shard i's decoded size from the manifest's
// counts alone (no shard is read): the edge pairs, every feature and
// label column at its stored width, and the per-graph offsets. Under a
// cache limit it sizes windows before any shard is read.
func (m *Manifest) DecodedBytes(i int) int64 {
	s := m.Shards[i]
	perNode, perEdge, perGraph := int64(0), int64(8), int64(48)
	if m.FormatVersion >= FormatV3 {
		for _, c := range []*Columns{m.NodeFeatures, m.EdgeFeatures} {
			per := int64(c.Cols()*c.widthOr1() + 4*c.DenseDim())
			if c == m.NodeFeatures {
				perNode += per
			} else {
				perEdge += per
			}
		}
		if m.Task != nil {
			perGraph += 4 * int64(max(m.Task.Targets, 1))
		}
	} else {
		switch m.Features.Kind {
		case FeatureAttributes:
			perNode += 4 * int64(m.Features.Dim)
		default:
			perNode += 4 // one code a node
		}
		if m.HasEdgeLabels {
			perEdge += 4
		}
	}
	return s.Nodes*perNode + s.Edges*perEdge + s.NumGraphs*perGraph
}

// widthOr1 is the stored code width (1 when unset).
func (c *Columns) widthOr1() int {
	if c == nil || c.Width == 0 {
		return 1
	}
	return c.Width
}

package shard

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// WithCacheLimit makes Open read only the manifest: pages (a shard file's
// record batches, pages.go) are then read by offset, checked and decoded
// when a graph of theirs is first pinned (Pin), kept while pinned, and
// unpinned ones dropped whenever the decoded bytes (with what users
// charged to them, Charge) pass limit bytes: the one needed farthest ahead
// by the registered streams (Foresee), else the least recently needed. A
// page is checked against its CRC-32C from the manifest's page map; a
// shard without one is read through once, the first time a page of it is
// needed, to check it against the manifest's CRC-32C and note each page's.
// Graph is then refused; Pin works in both modes. limit 0 (the default)
// decodes every shard at Open.
func WithCacheLimit(limit int64) Option { return func(c *readerConfig) { c.cacheLimit = limit } }

// lazy is a Reader's state under a cache limit.
type lazy struct {
	limit int64
	mem   memory.Allocator

	mu    sync.Mutex
	slots []pageSlot
	used  int64
	// private counts the private reads held (Pin), their bytes in used;
	// futureBytes is the registered futures' bytes, in used too.
	private     int
	futureBytes int64
	// The loaded pages no one pins, least recently released first: cold
	// ones (Cool) and warm ones, so a drop takes O(1) whatever the page
	// count. coldHeld is what the cold list holds; resident counts the
	// loaded pages.
	warm, cold pageList
	coldHeld   int64
	resident   int
	// onEvict is told which page was dropped (under mu).
	onEvict func(page int)
	// futures are the registered streams' page uses (Foresee): with any,
	// eviction is by next use, not by recency.
	futures []*Future

	loads, evictions, scans, sheds atomic.Int64
	compactions, trims             atomic.Int64
	// pageGraphs is Reader.PageGraphs (compact.go).
	pageGraphs func(p int) (first, n int64)
	peak       atomic.Int64

	// decoded and estimated sum the actual and the estimated
	// (Reader.PageBytes) bytes of every load so far, to correct the
	// estimate of a page to prefetch.
	decoded, estimated int64
	prefetching        int
	prefetches         atomic.Int64
	// The prefetch goroutines running, which close waits for (a page one
	// of them loads after close would stay resident); closed stops new ones.
	prefetchers sync.WaitGroup
	closed      bool

	// index[si] is shard si's scan, made once on first need.
	index []shardScan
	bufs  sync.Pool // *[]byte: page reads
}

type shardScan struct {
	mu sync.Mutex
	ix *shardIndex
	// tries counts the attempts made (read without mu before waiting on
	// it), err the last one's failure: a caller that waited through an
	// attempt which failed gets its error rather than a try of its own, so
	// a store that stalls costs the waiters one timeout, not one each.
	tries atomic.Uint64
	err   error
}

// maxPrefetch bounds the pages read ahead at once.
const maxPrefetch = 2

// Prefetch starts reading page p on a goroutine of its own when it is
// neither held nor being read and the cache has room for it without
// dropping anything warm (its decoded size estimated): the loader calls
// it for the pages of batches ahead, so a window's pages are read while
// the one before is augmented. Errors are left to the Pin that needs the
// page.
func (r *Reader) Prefetch(p int) {
	l := r.lazy
	if l == nil || p < 0 || p >= len(l.slots) {
		return
	}
	est := r.PageBytes()[p]
	l.mu.Lock()
	s := &l.slots[p]
	if l.estimated > 0 {
		est = int64(float64(est) * float64(l.decoded) / float64(l.estimated))
	}
	if l.closed || s.loaded || s.ready != nil || l.prefetching >= maxPrefetch || !l.roomFor(p, est) {
		l.mu.Unlock()
		return
	}
	l.prefetching++
	l.prefetchers.Add(1)
	l.mu.Unlock()
	l.prefetches.Add(1)
	go func() {
		defer l.prefetchers.Done()
		if _, err := r.acquire(p, -1); err == nil {
			r.unpin(p)
		}
		l.mu.Lock()
		l.prefetching--
		l.mu.Unlock()
	}()
}

type pageSlot struct {
	ready   chan struct{} // set while loading or loaded; closed once loaded
	loaded  bool
	batch   batch
	rec     arrow.RecordBatch
	bytes   int64 // decoded bytes
	charged int64 // what users attached (Charge)
	pins    int
	// cold: a user said no batch ahead needs it (Cool); dropped first,
	// and dropped to make room for a Prefetch.
	cold bool
	// The page's place in the warm or cold list while loaded and unpinned
	// (list nil otherwise).
	list       *pageList
	prev, next int32
	// rows maps the page's rows to batch's once compacted (-1: not kept;
	// compact.go); nil while batch holds them all.
	rows []int32
}

// pageList is a doubly linked list of pages threaded through their slots.
type pageList struct{ head, tail int32 }

func newPageList() pageList { return pageList{-1, -1} }

// push appends page p.
func (l *lazy) push(list *pageList, p int) {
	s := &l.slots[p]
	s.list, s.prev, s.next = list, list.tail, -1
	if list.tail >= 0 {
		l.slots[list.tail].next = int32(p)
	} else {
		list.head = int32(p)
	}
	list.tail = int32(p)
	if list == &l.cold {
		l.coldHeld += s.bytes + s.charged
	}
}

// unlink takes page p out of its list, if any.
func (l *lazy) unlink(p int) {
	s := &l.slots[p]
	list := s.list
	if list == nil {
		return
	}
	if s.prev >= 0 {
		l.slots[s.prev].next = s.next
	} else {
		list.head = s.next
	}
	if s.next >= 0 {
		l.slots[s.next].prev = s.prev
	} else {
		list.tail = s.prev
	}
	if list == &l.cold {
		l.coldHeld -= s.bytes + s.charged
	}
	s.list, s.prev, s.next = nil, -1, -1
}

// CacheStats describe a lazy Reader's cache.
type CacheStats struct {
	Limit, Used, Peak int64
	// Loads counts pages read and decoded (again after an eviction),
	// Evictions pages dropped, Resident the pages held.
	Loads, Evictions int64
	Resident         int
	// Prefetches counts the reads Prefetch started.
	Prefetches int64
	// Scans counts shard files read through to index their pages (once
	// each, the first time a page of theirs is needed).
	Scans int64
	// Sheds counts charges forgotten with their page kept (Charge).
	Sheds int64
	// Compactions counts pages shrunk to the graphs still needed, Trims
	// those of them shrunk further by the graphs needed last (compact.go).
	Compactions, Trims int64
	// Private is the private reads held now: a page read again whole for
	// a graph compacted away from it while others pin it, counted in Used.
	Private int
	// Futures is the bytes of the streams' registered futures (Foresee),
	// counted in Used.
	Futures int64
}

// countingAlloc counts the bytes a page's decoding holds.
type countingAlloc struct {
	memory.Allocator
	n atomic.Int64
}

func (a *countingAlloc) Allocate(size int) []byte {
	a.n.Add(int64(size))
	return a.Allocator.Allocate(size)
}

func (a *countingAlloc) Reallocate(size int, b []byte) []byte {
	a.n.Add(int64(size - len(b)))
	return a.Allocator.Reallocate(size, b)
}

// Free uncounts what decoding dropped (a compressed body once inflated).
func (a *countingAlloc) Free(b []byte) {
	a.n.Add(-int64(len(b)))
	a.Allocator.Free(b)
}

func (r *Reader) openLazy(cfg readerConfig) {
	r.lazy = &lazy{limit: cfg.cacheLimit, mem: cfg.mem, slots: make([]pageSlot, r.NumPages()),
		index: make([]shardScan, len(r.man.Shards)), warm: newPageList(), cold: newPageList(), pageGraphs: r.PageGraphs}
}

// Lazy reports whether the reader holds pages on demand (WithCacheLimit).
func (r *Reader) Lazy() bool { return r.lazy != nil }

// NumShards is the number of shard files.
func (r *Reader) NumShards() int { return len(r.man.Shards) }

// ShardOf returns the shard holding graph id (ids must be in range).
func (r *Reader) ShardOf(id int64) int { return int(r.pages.shard[r.PageOf(id)]) }

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
	pos := r.man.PositionOf(id)
	p := r.pages.pageOf(pos)
	s, err := r.acquire(p, int(pos-r.pages.first[p]))
	if err != nil {
		return Graph{}, nil, err
	}
	row := r.lazy.rowOf(s, int(pos-r.pages.first[p]))
	if row < 0 {
		r.unpin(p)
		return r.pinPrivate(p, int(pos-r.pages.first[p]))
	}
	g := r.graphOf(&s.batch, int(row))
	return g, func() { r.unpin(p) }, nil
}

// OnEvict sets what is told when a page is dropped, or only what was
// charged to it shed (Charge): the loader then drops the indexes it
// charged to the page. Call before serving.
func (r *Reader) OnEvict(fn func(page int)) {
	if r.lazy != nil {
		r.lazy.onEvict = fn
	}
}

// Charge adds n bytes that a user keeps for a page's graphs (the loader's
// NodeSam indexes) to the page's share of the limit; they are forgotten
// when the page is dropped (OnEvict). Charged bytes are derived and
// rebuilt at will, so under pressure they go before any page a stream
// still needs: shed (OnEvict, the page kept) from the page needed
// farthest ahead, pinned or not. An index serves its graph once an epoch
// (twice with twins) where its page serves a batch in every window that
// draws from it: kept in place of pages, indexes turned a window of four
// pages that fit into a page load at nearly every batch.
func (r *Reader) Charge(page int, n int64) {
	l := r.lazy
	if l == nil {
		return
	}
	l.mu.Lock()
	if s := &l.slots[page]; s.loaded {
		s.charged += n
		l.used += n
		if s.list == &l.cold {
			l.coldHeld += n
		}
		l.notePeak()
		l.evictLocked()
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
	return CacheStats{Limit: l.limit, Used: l.used, Peak: l.peak.Load(), Loads: l.loads.Load(), Evictions: l.evictions.Load(),
		Resident: l.resident, Prefetches: l.prefetches.Load(), Scans: l.scans.Load(), Sheds: l.sheds.Load(),
		Compactions: l.compactions.Load(), Trims: l.trims.Load(), Private: l.private, Futures: l.futureBytes}
}

func (l *lazy) notePeak() {
	if l.used > l.peak.Load() {
		l.peak.Store(l.used)
	}
}

// shardIndex returns shard si's page index, scanning the file the first
// time (one scan per shard at a time; the others wait for it).
func (r *Reader) shardIndex(si int) (*shardIndex, error) {
	sc := &r.lazy.index[si]
	seen := sc.tries.Load()
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.ix == nil && sc.tries.Load() != seen && sc.err != nil {
		return nil, sc.err
	}
	if sc.ix == nil {
		ix, err := r.indexShard(si)
		sc.tries.Add(1)
		sc.ix, sc.err = ix, err
		if err != nil {
			return nil, err
		}
	}
	return sc.ix, nil
}

// indexShard reads shard si's page index: by its page map, or by a scan.
func (r *Reader) indexShard(si int) (*shardIndex, error) {
	if r.man.Shards[si].PageMap != nil {
		return mapShard(context.Background(), r.store, r.man, si)
	}
	ix, err := scanShard(context.Background(), r.store, r.man, si)
	if err == nil {
		r.lazy.scans.Add(1)
	}
	return ix, err
}

// loadPage reads, checks and decodes page p.
func (r *Reader) loadPage(p int, mem memory.Allocator) (batch, arrow.RecordBatch, error) {
	b, rec, err := r.loadPageFrom(p, mem)
	return b, rec, located(r.store, err)
}

func (r *Reader) loadPageFrom(p int, mem memory.Allocator) (batch, arrow.RecordBatch, error) {
	si := int(r.pages.shard[p])
	ix, err := r.shardIndex(si)
	if err != nil {
		return batch{}, nil, err
	}
	info := &r.man.Shards[si]
	pi := p - r.pages.starts[si]
	bp, _ := r.lazy.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer r.lazy.bufs.Put(bp)
	*bp, err = readPage(ix.file, info, pi, ix.pages[pi], *bp)
	if err != nil {
		return batch{}, nil, err
	}
	return decodePage(ix, *bp, r.man, info, pi, r.pages.first[p], mem)
}

// roomFor makes room for est bytes of page p, to be read ahead, and
// reports whether there is. Without registered futures the room comes
// from cold pages only (a warm one may be needed next); with them, from
// pages needed later than p, farthest first, and nothing is dropped
// unless that makes room (a page no stream needs is never read ahead).
func (l *lazy) roomFor(p int, est int64) bool {
	if len(l.futures) == 0 {
		if l.used-l.coldHeld+est > l.limit {
			return false
		}
		for l.used+est > l.limit && l.evictOne(true) {
		}
		return true
	}
	dp := l.nextUse(p)
	if dp == never {
		return false
	}
	if l.used+est > l.limit {
		var later int64
		for q := range l.slots {
			s := &l.slots[q]
			if !s.loaded {
				continue
			}
			later += s.charged // shed before any page
			if s.list != nil && l.nextUse(q) > dp {
				later += s.bytes
			} else if s.list != nil {
				later += l.garbage(q) // compacted before any page
			}
		}
		if l.used-later+est > l.limit {
			return false
		}
	}
	for l.used+est > l.limit {
		if v, d := l.farthest(); v >= 0 && d == never {
			l.drop(v)
			continue
		}
		if l.shedOne() || l.compactOne() {
			continue
		}
		v, d := l.farthest()
		if v < 0 || d <= dp {
			break
		}
		l.drop(v)
	}
	return true
}

// evictLocked drops unpinned pages while the cache is over its limit
// (everything resident pinned: over the limit until a release): by next
// use with registered futures, else cold ones first then the least
// recently needed.
func (l *lazy) evictLocked() {
	for l.used > l.limit && l.evictOne(false) {
	}
}

// evictOne drops one unpinned page, sheds what was charged to one page or
// shrinks one, and reports whether there was one. With registered
// futures: a page no stream needs, else a charge (shed), else the graphs
// no stream needs again (compact.go), else the page needed farthest ahead
// (Belady); without: cold pages, least recently released first, then a
// charge, then warm pages likewise (only a cold one when coldOnly).
func (l *lazy) evictOne(coldOnly bool) bool {
	victim := -1
	if len(l.futures) > 0 {
		var d int64
		victim, d = l.farthest()
		if d != never && (l.shedOne() || l.compactOne() || victim >= 0 && l.trim(victim, l.used-l.limit)) {
			return true
		}
	} else {
		victim = int(l.cold.head)
		if victim < 0 && !coldOnly {
			if l.shedOne() {
				return true
			}
			victim = int(l.warm.head)
		}
	}
	if victim < 0 {
		return false
	}
	l.drop(victim)
	return true
}

// drop releases unpinned loaded page victim.
func (l *lazy) drop(victim int) {
	l.unlink(victim)
	s := &l.slots[victim]
	if s.rec != nil {
		s.rec.Release()
	}
	l.used -= s.bytes + s.charged
	l.resident--
	*s = pageSlot{}
	l.evictions.Add(1)
	if l.onEvict != nil {
		l.onEvict(victim)
	}
}

// Cool says no batch ahead needs page p (the loader, once the last batch
// of a stream needing it is sent): it is dropped before any other, and to
// make room for a Prefetch. A later Pin makes it warm again.
func (r *Reader) Cool(p int) {
	l := r.lazy
	if l == nil || p < 0 || p >= len(l.slots) {
		return
	}
	l.mu.Lock()
	if s := &l.slots[p]; s.loaded && !s.cold {
		s.cold = true
		if s.list == &l.warm {
			l.unlink(p)
			l.push(&l.cold, p)
		}
	}
	l.mu.Unlock()
}

// close waits for the prefetches under way (each needs mu to finish),
// then releases every page.
func (l *lazy) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.prefetchers.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.slots {
		if l.slots[i].rec != nil {
			l.slots[i].rec.Release()
		}
		l.slots[i] = pageSlot{}
	}
	l.used, l.coldHeld, l.resident = 0, 0, 0
	l.warm, l.cold = newPageList(), newPageList()
	for i := range l.index {
		sc := &l.index[i]
		sc.mu.Lock()
		sc.ix.close()
		sc.mu.Unlock()
	}
}

// DecodedBytes estimates shard i's decoded size from the manifest's
// counts alone (no shard is read): the edge pairs, every feature and
// label column at its stored width, and the per-graph offsets. Under a
// cache limit it sizes windows before any shard is read.
func (m *Manifest) DecodedBytes(i int) int64 {
	s := m.Shards[i]
	perNode, perEdge, perGraph := m.decodedPer()
	return s.Nodes*perNode + s.Edges*perEdge + s.NumGraphs*perGraph
}

// decodedPer is what a node, an undirected edge and a graph take decoded.
func (m *Manifest) decodedPer() (perNode, perEdge, perGraph int64) {
	perNode, perEdge, perGraph = 0, 8, 48
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
	return perNode, perEdge, perGraph
}

// widthOr1 is the stored code width (1 when unset).
func (c *Columns) widthOr1() int {
	if c == nil || c.Width == 0 {
		return 1
	}
	return c.Width
}

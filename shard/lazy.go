package shard

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/augloader/augloader/shard/internal/pagecache"
)

// WithCacheLimit makes Open read only the manifest: pages (a shard file's
// record batches, pages.go) are then read by offset, checked and decoded
// when a graph of theirs is first pinned (Pin, Schedule), kept while
// pinned, and unpinned ones dropped whenever the decoded bytes (with what
// users charged to them) pass limit bytes, by the policy of
// shard/internal/pagecache: with streams' schedules (Schedule), the page
// needed farthest ahead after what none needs, else the least recently
// needed. A page is checked against its CRC-32C from the manifest's page
// map; a shard without one is read through once, the first time a page of
// it is needed, to check it against the manifest's CRC-32C and note each
// page's. Graph is then refused; Pin works in both modes. limit 0 (the
// default) decodes every shard at Open.
func WithCacheLimit(limit int64) Option { return func(c *readerConfig) { c.cacheLimit = limit } }

// lazy is a Reader's state under a cache limit: the page cache, and what
// reads pages for it (the pagecache.Source).
type lazy struct {
	r     *Reader
	cache *pagecache.Cache
	// index[si] is shard si's scan, made once on first need.
	index []shardScan
	bufs  sync.Pool // *[]byte: page reads
	scans atomic.Int64
}

type shardScan struct {
	// turn is held (one token) by the caller scanning the shard; a caller
	// waiting for its turn gives up once its ctx ends.
	turn chan struct{}
	ix   *shardIndex
	// tries counts the attempts made (read before waiting for the turn),
	// err the last one's failure and gaveUp whether its caller had gone
	// (its ctx ended): a caller that waited through an attempt which
	// failed gets its error rather than a try of its own, so a store that
	// stalls costs the waiters one timeout, not one each; but one whose
	// caller went away fails no other, and the next caller tries.
	tries  atomic.Uint64
	err    error
	gaveUp bool
}

func (r *Reader) openLazy(cfg readerConfig) {
	l := &lazy{r: r, index: make([]shardScan, len(r.man.Shards))}
	for i := range l.index {
		l.index[i].turn = make(chan struct{}, 1)
	}
	l.cache = pagecache.New(l, cfg.cacheLimit, cfg.mem)
	r.lazy = l
}

// page is a decoded page as the cache holds it: its batch, and the record
// batch whose buffers back it (nil once compacted into Go memory).
type page struct {
	batch
	rec arrow.RecordBatch
}

func (p *page) Weight(i int) int64 { return int64(p.edgeOff[i+1] - p.edgeOff[i]) }
func (p *page) Total() int64       { return int64(len(p.edges)) }

func (p *page) Subset(keep []int) (pagecache.Page, int64) {
	b, n := p.batch.subset(keep)
	return &page{batch: b}, n
}

func (p *page) Release() {
	if p.rec != nil {
		p.rec.Release()
	}
}

// The pagecache.Source methods.

func (l *lazy) NumPages() int                 { return l.r.NumPages() }
func (l *lazy) Graphs(p int) (first, n int64) { return l.r.PageGraphs(p) }
func (l *lazy) Estimate(p int) int64          { return l.r.PageBytes()[p] }
func (l *lazy) Load(ctx context.Context, p int, mem memory.Allocator) (pagecache.Page, error) {
	b, rec, err := l.r.loadPage(ctx, p, mem)
	if err != nil {
		return nil, err
	}
	return &page{batch: b, rec: rec}, nil
}

// Lazy reports whether the reader holds pages on demand (WithCacheLimit).
func (r *Reader) Lazy() bool { return r.lazy != nil }

// NumShards is the number of shard files.
func (r *Reader) NumShards() int { return len(r.man.Shards) }

// ShardOf returns the shard holding graph id (ids must be in range).
func (r *Reader) ShardOf(id int64) int { return int(r.pages.shard[r.PageOf(id)]) }

// Pin returns graph id and a release to call once its slices are no
// longer read; the slices stay valid until then. Without a cache limit the
// release does nothing and the slices live until Close. A read of its
// page, or a wait for another's, gives up once ctx ends. A stream that
// knows its batches pins through a Schedule instead.
func (r *Reader) Pin(ctx context.Context, id int64) (Graph, func(), error) {
	if r.lazy == nil {
		g, err := r.Graph(id)
		return g, func() {}, err
	}
	p, row, err := r.locate(id)
	if err != nil {
		return Graph{}, nil, err
	}
	pg, at, h, err := r.lazy.cache.Pin(ctx, p, row)
	if err != nil {
		return Graph{}, nil, err
	}
	return r.graphOf(&pg.(*page).batch, at), h.Release, nil
}

// locate is graph id's page and row in it.
func (r *Reader) locate(id int64) (p, row int, err error) {
	if id < 0 || id >= r.man.Stats.Graphs {
		return 0, 0, fmt.Errorf("%w: id %d of %d", ErrNotFound, id, r.man.Stats.Graphs)
	}
	pos := r.man.PositionOf(id)
	p = r.pages.pageOf(pos)
	return p, int(pos - r.pages.first[p]), nil
}

// CacheStats describe a lazy Reader's cache (shard/internal/pagecache).
type CacheStats = pagecache.Stats

// Stats returns the cache's counters (zero without a cache limit).
func (r *Reader) Stats() CacheStats {
	if r.lazy == nil {
		return CacheStats{}
	}
	st := r.lazy.cache.Stats()
	st.Scans = r.lazy.scans.Load()
	return st
}

// shardIndex returns shard si's page index, scanning the file the first
// time (one scan per shard at a time; the others wait for it).
func (r *Reader) shardIndex(ctx context.Context, si int) (*shardIndex, error) {
	sc := &r.lazy.index[si]
	seen := sc.tries.Load()
	select {
	case sc.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-sc.turn }()
	if sc.ix == nil && sc.tries.Load() != seen && sc.err != nil && !sc.gaveUp {
		return nil, sc.err
	}
	if sc.ix == nil {
		ix, err := r.indexShard(ctx, si)
		sc.tries.Add(1)
		sc.ix, sc.err, sc.gaveUp = ix, err, ctx.Err() != nil
		if err != nil {
			return nil, err
		}
	}
	return sc.ix, nil
}

// indexShard reads shard si's page index: by its page map, or by a scan.
func (r *Reader) indexShard(ctx context.Context, si int) (*shardIndex, error) {
	if r.man.Shards[si].PageMap != nil {
		return mapShard(ctx, r.store, r.man, si)
	}
	ix, err := scanShard(ctx, r.store, r.man, si)
	if err == nil {
		r.lazy.scans.Add(1)
	}
	return ix, err
}

// loadPage reads, checks and decodes page p under ctx.
func (r *Reader) loadPage(ctx context.Context, p int, mem memory.Allocator) (batch, arrow.RecordBatch, error) {
	b, rec, err := r.loadPageFrom(ctx, p, mem)
	return b, rec, located(r.store, err)
}

func (r *Reader) loadPageFrom(ctx context.Context, p int, mem memory.Allocator) (batch, arrow.RecordBatch, error) {
	si := int(r.pages.shard[p])
	ix, err := r.shardIndex(ctx, si)
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
	*bp, err = readPage(ctx, ix.file, info, pi, ix.pages[pi], *bp)
	if err != nil {
		return batch{}, nil, err
	}
	return decodePage(ix, *bp, r.man, info, pi, r.pages.first[p], mem)
}

// close releases every page (once the reads ahead under way are done),
// then the shards' open files.
func (l *lazy) close() {
	l.cache.Close()
	for i := range l.index {
		sc := &l.index[i]
		sc.turn <- struct{}{}
		sc.ix.close()
		<-sc.turn
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
	if s := m.Structures; s != nil && m.FormatVersion >= FormatV4 {
		// numbers, positions; a directed edge's pair and shift; the cell.
		perNode, perEdge, perGraph = 1+24+4, 4+3+8, 48+72+8+1+4*8
		for _, p := range s.Properties {
			if p.Per == PerAtom {
				perNode += 8 * int64(p.Size)
			} else {
				perGraph += 8*int64(p.Size) + 4
			}
		}
		return perNode, perEdge, perGraph
	}
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

package loader

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/shard"
)

// dataset is what every Source of one shard folder shares: the reader,
// the graphs' sizes, and the per-graph NodeSam index cache.
type dataset struct {
	r     *shard.Reader
	man   *shard.Manifest
	lay   shard.Layout
	sizes []aug.Size
	// The layout's vocabularies and the edge fill, shared read only by
	// every graph loaded.
	nodeVocab, edgeVocab []int32
	fill                 *aug.EdgeFill
	// fillSet: the fill is not the default (the identity then says it).
	fillSet bool
	// index[id] is graph id's aug.Index, built on first use when enabled.
	index atomic.Pointer[[]atomic.Pointer[aug.Index]]
	// ppr caches SubMix's PageRank rankings in the indexes, when set.
	ppr atomic.Pointer[aug.PPRCache]
	// feat is what a node's and an edge's features take in an aug.Graph
	// (working-memory estimates).
	feat aug.FeatureBytes
	// cacheLimit is the reader's cache limit (0: every shard held).
	cacheLimit int64
	// unchecked: a bit per graph whose sizes came from the graph-size
	// index and have not yet been checked against its shard (nil: the
	// sizes were measured).
	unchecked []atomic.Uint64
}

// ErrSizes: the graph-size index disagrees with a graph its shard holds.
var ErrSizes = errors.New("loader: the graph-size index does not match the shards")

// checkSize checks graph id's sizes from the index against sg, once.
func (ds *dataset) checkSize(id int64, sg *shard.Graph) error {
	if ds.unchecked == nil {
		return nil
	}
	w, bit := &ds.unchecked[id/64], uint64(1)<<(id%64)
	if w.Load()&bit == 0 {
		return nil
	}
	got := aug.Size{Nodes: int(sg.NumNodes), Edges: len(sg.Edges) / 2, MaxDegree: int(shard.MaxDegree(sg))}
	if want := ds.sizes[id]; got != want {
		return fmt.Errorf("%w: %s says graph %d has %d nodes, %d edges, largest degree %d; its shard holds %d, %d, %d (run shardconv verify; convert again to rebuild the index)",
			ErrSizes, shard.GraphSizesName, id, want.Nodes, want.Edges, want.MaxDegree, got.Nodes, got.Edges, got.MaxDegree)
	}
	w.And(^bit)
	return nil
}

// Source reads graphs of a served set as aug.Graphs and serves SubMix's
// partners from it.
type Source struct {
	ds       *dataset
	served   []int64
	maxEdges int    // the served set's largest graph: SubMix's partner bound
	maxNodes int    // and its most nodes
	digest   string // SHA-256 of the served ids
}

// NewSource serves the graphs in served (all graphs when nil).
func NewSource(r *shard.Reader, served []int64) (*Source, error) {
	return NewSourceContext(context.Background(), r, served)
}

// NewSourceContext is NewSource stopping when ctx is done (a folder
// without a graph-size index has every graph read to size it).
func NewSourceContext(ctx context.Context, r *shard.Reader, served []int64) (*Source, error) {
	man := r.Manifest()
	if !man.Features.Kind.Valid() {
		return nil, fmt.Errorf("loader: unknown feature kind %q", man.Features.Kind)
	}
	lay := man.Layout()
	ds := &dataset{r: r, man: man, lay: lay, sizes: make([]aug.Size, r.NumGraphs())}
	ds.nodeVocab = vocabs(lay.NodeCat)
	ds.edgeVocab = vocabs(lay.EdgeCat)
	ds.cacheLimit = r.Stats().Limit
	ds.feat = aug.FeatureBytes{Node: 4 * int64(len(lay.NodeCat)+lay.NodeDense), Edge: 4 * int64(len(lay.EdgeCat)+lay.EdgeDense)}
	if lay.OneHot > 0 {
		ds.feat.Node += 12 // a code, its offset and its weight
	}
	if lay.EdgeFeatures() {
		// The default fill: each column's reserved code (its vocabulary
		// size: an embedding table of size+1 takes it), floats 0.
		ds.fill = &aug.EdgeFill{Codes: slices.Clone(ds.edgeVocab)}
	}
	// The sizes plan every batch: from the folder's graph-size index
	// when it has one (no shard is read), else measured from every graph.
	if gs, err := r.GraphSizes(); err == nil {
		for id := range ds.sizes {
			ds.sizes[id] = aug.Size{Nodes: int(gs.Nodes[id]), Edges: int(gs.Edges[id]), MaxDegree: int(gs.MaxDegree[id])}
		}
		// The index is checked against each graph the first time it is
		// loaded (checkSize): a forged index (its CRC recomputed) would
		// otherwise plan batches past the budgets.
		ds.unchecked = make([]atomic.Uint64, (len(ds.sizes)+63)/64)
		for i := range ds.unchecked {
			ds.unchecked[i].Store(^uint64(0))
		}
	} else if !errors.Is(err, shard.ErrNoSizes) {
		return nil, err
	} else {
		var deg []int32
		for pos := range int64(len(ds.sizes)) { // in storage order: one page read at a time
			if pos&255 == 0 && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			id := man.IDAt(pos)
			g, release, err := r.Pin(ctx, id)
			if err != nil {
				return nil, err
			}
			ds.sizes[id], deg = aug.SizeOf(g.NumNodes, g.Edges, deg)
			release()
		}
	}
	return ds.subset(served)
}

// vocabs lists the columns' vocabulary sizes (nil for none).
func vocabs(cols []shard.Column) []int32 {
	if len(cols) == 0 {
		return nil
	}
	v := make([]int32, len(cols))
	for i, c := range cols {
		v[i] = int32(c.Vocab)
	}
	return v
}

// SetEdgeFill declares what an edge no input edge explains carries (a
// NodeSam split's new edge, an added edge): a code per categorical edge
// column (its vocabulary size, the reserved code, by default) and a value
// for the float columns. Call before serving.
func (s *Source) SetEdgeFill(f aug.EdgeFill) error {
	ds := s.ds
	if !ds.lay.EdgeFeatures() {
		return nil
	}
	if len(f.Codes) != len(ds.edgeVocab) {
		return fmt.Errorf("loader: edge fill has %d codes, the edges have %d categorical columns", len(f.Codes), len(ds.edgeVocab))
	}
	for i, c := range f.Codes {
		if c < 0 || c > ds.edgeVocab[i] {
			return fmt.Errorf("loader: edge fill code %d of column %q not in 0..%d (its vocabulary, or the reserved code %d)", c, ds.lay.EdgeCat[i].Name, ds.edgeVocab[i], ds.edgeVocab[i])
		}
	}
	ds.fill = &aug.EdgeFill{Codes: slices.Clone(f.Codes), X: f.X}
	ds.fillSet = !slices.Equal(f.Codes, ds.edgeVocab) || f.X != 0
	return nil
}

// ParseEdgeFill sets the fill from its text (aug.ParseEdgeFill: a part
// left out keeps the default's).
func (s *Source) ParseEdgeFill(text string) error {
	if s.ds.fill == nil {
		return fmt.Errorf("loader: edge fill %q: the edges of %s carry no features", text, s.ds.man.Dataset)
	}
	f, err := aug.ParseEdgeFill(text, aug.EdgeFill{Codes: s.ds.edgeVocab})
	if err != nil {
		return fmt.Errorf("loader: %w", err)
	}
	return s.SetEdgeFill(f)
}

// edgeFillID is the fill as the identity says it: empty for the default
// (so the identities of every configuration without a fill of its own
// are what they were).
func (s *Source) edgeFillID() string {
	if !s.ds.fillSet {
		return ""
	}
	return s.ds.fill.String()
}

// EdgeFill is the fill edges get (nil when edges carry no features).
func (s *Source) EdgeFill() *aug.EdgeFill { return s.ds.fill }

// Layout is what the served graphs carry.
func (s *Source) Layout() shard.Layout { return s.ds.lay }

// Subset serves another set of the same shards, sharing the sizes and the
// index cache (a daemon's views of one dataset).
func (s *Source) Subset(served []int64) (*Source, error) { return s.ds.subset(served) }

func (ds *dataset) subset(served []int64) (*Source, error) {
	n := ds.r.NumGraphs()
	if served == nil {
		served = make([]int64, n)
		for i := range served {
			served[i] = int64(i)
		}
	}
	s := &Source{ds: ds, served: served}
	h := sha256.New()
	var b [8]byte
	for _, id := range served {
		if id < 0 || id >= int64(n) {
			return nil, fmt.Errorf("loader: served graph %d out of range 0..%d", id, n-1)
		}
		s.maxEdges = max(s.maxEdges, ds.sizes[id].Edges)
		s.maxNodes = max(s.maxNodes, ds.sizes[id].Nodes)
		binary.LittleEndian.PutUint64(b[:], uint64(id))
		h.Write(b[:])
	}
	s.digest = hex.EncodeToString(h.Sum(nil))
	return s, nil
}

// EnableIndex makes Load attach each graph's aug.Index, built once on
// first use (NodeSam then skips its per-draw neighbourhood passes). Costs
// up to 4 int32 per edge of memory for the graphs that are indexed; shared
// by every Source of the dataset.
func (s *Source) EnableIndex() {
	if s.ds.index.Load() == nil {
		ix := make([]atomic.Pointer[aug.Index], s.ds.r.NumGraphs())
		s.ds.index.CompareAndSwap(nil, &ix)
	}
}

// EnablePPRCache lets SubMix keep each graph's PageRank rankings, up to
// limit bytes for the dataset (aug.PPRCache; the indexes carry them, so it
// takes effect with EnableIndex). Call before serving.
func (s *Source) EnablePPRCache(limit int64) {
	if limit > 0 {
		s.ds.ppr.CompareAndSwap(nil, aug.NewPPRCache(limit))
	}
}

// PPRCache returns the dataset's SubMix ranking cache, or nil.
func (s *Source) PPRCache() *aug.PPRCache { return s.ds.ppr.Load() }

// Served returns the served graph ids (callers must not modify them).
func (s *Source) Served() []int64 { return s.served }

// ServedDigest is the SHA-256 of the served ids (int64 little endian, in
// order): part of a configuration's identity.
func (s *Source) ServedDigest() string { return s.digest }

// Manifest returns the shard manifest.
func (s *Source) Manifest() *shard.Manifest { return s.ds.man }

// Size returns graph id's size (nodes, undirected edges, largest degree).
func (s *Source) Size(id int64) aug.Size { return s.ds.sizes[id] }

// Bound is the largest size op can give graph id (aug.Bound, with the
// served set's largest graph as SubMix's partner bound).
func (s *Source) Bound(op aug.Op, id int64) aug.Size {
	return aug.Bound(op, s.ds.sizes[id], s.maxEdges)
}

// Load writes graph id into g as an op's input, reusing g's feature
// buffers. g.Edges is the shard's own memory, not a copy (ops never modify
// their input, and copying the edges cost ~7% of a NodeSam epoch): g must
// only be read, never be an op's output or a CopyFrom target. Its
// capacity ends with the graph, so an append copies. A read of the
// graph's page gives up once ctx ends.
func (s *Source) Load(ctx context.Context, id int64, g *aug.Graph) error {
	return s.load(ctx, nil, -1, id, g)
}

// load is Load for batch b of a stream pinning through pages (nil: a pin
// of the reader's own, as SubMix's partners take). Under a cache limit a
// graph's NodeSam index built here is charged to its page with the
// stream's pin, and dropped when the cache forgets it; a pin of the
// reader's own cannot charge, so it builds none (NodeSam then scans the
// graph's neighbourhoods; the bytes are the same).
func (s *Source) load(ctx context.Context, pages *shard.Schedule, b int, id int64, g *aug.Graph) (err error) {
	var sg shard.Graph
	var charge shard.Charge
	if pages != nil {
		var pin shard.Pinned
		if sg, pin, err = pages.Pin(ctx, b, id); err != nil {
			return err
		}
		defer func() { pin.Release(charge) }()
	} else {
		var release func()
		if sg, release, err = s.ds.r.Pin(ctx, id); err != nil {
			return err
		}
		defer release()
	}
	if err := s.ds.checkSize(id, &sg); err != nil {
		return err
	}
	g.ID, g.N, g.Label, g.MixLabel, g.Q = sg.ID, sg.NumNodes, sg.Label, sg.Label, 1
	lazy := s.ds.r.Lazy()
	if lazy {
		// The shard may be dropped once released: a copy of our own.
		g.EdgeBuf = append(g.EdgeBuf[:0], sg.Edges...)
		g.Edges = g.EdgeBuf[:len(sg.Edges):len(sg.Edges)] // an op's append still copies
	} else {
		g.Edges = sg.Edges[:len(sg.Edges):len(sg.Edges)]
	}
	ds := s.ds
	lay := &ds.lay
	switch {
	case lay.OneHot > 0:
		g.SetCodes(sg.Codes, int32(lay.OneHot))
	case lay.NodeDense > 0:
		g.SetDense(sg.X, int32(lay.NodeDense))
	default:
		g.Dense, g.Dim = false, 0
		g.FeatOff, g.Codes, g.Weights, g.X = g.FeatOff[:0], g.Codes[:0], g.Weights[:0], g.X[:0]
	}
	// Every column is copied into g's own buffers (widened to int32):
	// never aliasing the shard keeps a later append from writing into it.
	g.CatCols, g.CatVocab = int32(len(ds.nodeVocab)), ds.nodeVocab
	g.NodeCat = sg.NodeCat.AppendTo(g.NodeCat[:0])
	g.EdgeCatCols, g.EdgeDim, g.Fill = int32(len(ds.edgeVocab)), int32(lay.EdgeDense), ds.fill
	if ds.man.FormatVersion < shard.FormatV3 {
		g.EdgeCat = append(g.EdgeCat[:0], sg.EdgeLabels...)
	} else {
		g.EdgeCat = sg.EdgeCat.AppendTo(g.EdgeCat[:0])
	}
	g.EdgeX = append(g.EdgeX[:0], sg.EdgeX...)
	g.Y = append(g.Y[:0], sg.Targets...)
	g.Index = nil
	if idx := s.ds.index.Load(); idx != nil && s.ds.indexable(id) {
		slot := &(*idx)[id]
		ix := slot.Load()
		if ix == nil && (!lazy || pages != nil) {
			// Two workers may build the same index at once: both results
			// are equal, the first stored wins.
			built := aug.BuildIndex(g)
			built.EnablePPR(s.ds.ppr.Load())
			if slot.CompareAndSwap(nil, built) && lazy {
				charge = indexCharge{slot, built}
			}
			ix = slot.Load()
		}
		g.Index = ix
	}
	return nil
}

// indexCharge is a graph's NodeSam index charged to its page (under a
// cache limit the indexes are bounded by the limit too): forgotten, the
// slot is emptied unless a newer index took it.
type indexCharge struct {
	slot *atomic.Pointer[aug.Index]
	ix   *aug.Index
}

func (c indexCharge) Bytes() int64 { return c.ix.Bytes() }
func (c indexCharge) Forget()      { c.slot.CompareAndSwap(c.ix, nil) }

// indexable reports whether graph id's index costs about what the graph
// itself does: at most 16 times its stored bytes (a graph that declares
// 2^27 nodes and holds one edge would take 6 GiB of index for nothing;
// COLLAB's graphs take 2 to 6 times), and, under a cache limit, a quarter
// of the limit, to which it is charged. Other graphs are served without
// one (NodeSam then scans their neighbourhoods each draw; the bytes are
// the same).
func (ds *dataset) indexable(id int64) bool {
	sz := ds.sizes[id]
	n, m := int64(sz.Nodes), int64(sz.Edges)
	idx := aug.IndexBytes(sz) - aug.IndexBytes(aug.Size{})
	stored := 8*m + ds.feat.Node*n + ds.feat.Edge*m
	if idx > 16*stored+64<<10 {
		return false
	}
	if lim := ds.cacheLimit; lim > 0 && aug.IndexBytes(sz) > lim/4 {
		return false
	}
	return true
}

// Work bounds what augmenting graph id with op allocates (aug.Work, with
// the served set's largest graph as SubMix's partner), and building its
// index when the loader keeps one.
func (s *Source) Work(op aug.Op, id int64) int64 {
	w := aug.Work(op, s.ds.sizes[id], s.ds.feat, aug.Size{Nodes: s.maxNodes, Edges: s.maxEdges})
	if s.ds.index.Load() != nil && s.ds.indexable(id) {
		w += aug.IndexBytes(s.ds.sizes[id])
	}
	return w
}

// windowsPair checks, before any epoch, that no window of w pages an
// epoch can form holds a served graph alone: SubMix draws a partner from
// the target's window, and such a graph has none (the epoch would be cut
// where it comes). A window is w pages of the epoch's page order, the
// last one the remainder, empty ones skipped; one graph alone is
// possible when a page serves exactly one graph and enough pages serve
// none to fill the rest of a window of either size.
func (s *Source) windowsPair(w int) error {
	r := s.ds.r
	counts := make([]int, r.NumPages())
	for _, id := range s.served {
		counts[r.PageOf(id)]++
	}
	page, empty := loneGraphPage(counts, w)
	if page < 0 {
		return nil
	}
	fix := "--shuffle global"
	for larger := w + 1; larger <= len(counts); larger++ {
		if p, _ := loneGraphPage(counts, larger); p < 0 {
			fix = fmt.Sprintf("--shuffle window:%d (%d pages a window), or %s", larger, larger, fix)
			break
		}
	}
	return fmt.Errorf("%w for submix: a window of %d page(s) can hold page %d's one served graph alone "+
		"(%d of the %d pages serve none, and %d %% %d leaves a window of %d), leaving SubMix no partner; use %s",
		epoch.ErrShuffle, w, page, empty, len(counts), len(counts), w, len(counts)%w, fix)
}

// loneGraphPage returns a page serving one graph that some window of w
// pages can hold alone (−1: none), and the count of empty pages.
func loneGraphPage(counts []int, w int) (page, empty int) {
	page = -1
	for p, c := range counts {
		switch {
		case c == 0:
			empty++
		case c == 1 && page < 0:
			page = p
		}
	}
	if page < 0 {
		return -1, empty
	}
	if len(counts) >= w && empty >= w-1 {
		return page, empty
	}
	if rem := len(counts) % w; rem > 0 && empty >= rem-1 {
		return page, empty
	}
	return -1, empty
}

// windowPartners serves SubMix's partners under a windowed shuffle: the
// target's window of one pass's order.
type windowPartners struct {
	src *Source
	win *epoch.Windowed
	// of[id] is the window of graph id in this pass (−1: not served),
	// built on the first draw: a schedule without SubMix never needs it.
	once sync.Once
	of   []int32
	// pages[w] is window w's pages, in order (pagesOf), built once.
	pagesOnce sync.Once
	pages     [][]int32
}

func (s *Source) windowPartners(win *epoch.Windowed) *windowPartners {
	return &windowPartners{src: s, win: win}
}

func (p *windowPartners) windows() []int32 {
	p.once.Do(func() {
		p.of = make([]int32, p.src.ds.r.NumGraphs())
		for i := range p.of {
			p.of[i] = -1
		}
		for w := 0; w+1 < len(p.win.Starts); w++ {
			for _, id := range p.win.Perm[p.win.Starts[w]:p.win.Starts[w+1]] {
				p.of[id] = int32(w)
			}
		}
	})
	return p.of
}

// pagesOf returns the pages holding window w's graphs.
func (p *windowPartners) pagesOf(w int32) []int32 {
	p.pagesOnce.Do(func() {
		r := p.src.ds.r
		p.pages = make([][]int32, max(len(p.win.Starts)-1, 0))
		for w := range p.pages {
			var pages []int32
			for _, id := range p.win.Perm[p.win.Starts[w]:p.win.Starts[w+1]] {
				pages = append(pages, int32(r.PageOf(id)))
			}
			slices.Sort(pages)
			p.pages[w] = slices.Compact(pages)
		}
	})
	return p.pages[w]
}

// Partner implements aug.Partners: uniform over the target's window minus
// the target, drawn from the target's own stream.
func (p *windowPartners) Partner(ctx context.Context, target int64, r aug.Rand, into *aug.Graph) error {
	of := p.windows()
	if target < 0 || target >= int64(len(of)) || of[target] < 0 {
		return fmt.Errorf("loader: submix partner of graph %d, which this pass does not serve", target)
	}
	w := of[target]
	part := p.win.Perm[p.win.Starts[w]:p.win.Starts[w+1]]
	if len(part) < 2 {
		return fmt.Errorf("loader: submix needs at least two graphs in a window, graph %d's has %d (use a larger --shuffle window)", target, len(part))
	}
	return p.src.Load(ctx, otherThan(part, target, r), into)
}

// Partner implements aug.Partners: uniform over the whole served set minus
// the target (not one rank's part), drawn from the target's own stream.
func (s *Source) Partner(ctx context.Context, target int64, r aug.Rand, into *aug.Graph) error {
	if n := len(s.served); n < 2 {
		return fmt.Errorf("loader: submix needs at least two served graphs, have %d", n)
	}
	return s.Load(ctx, otherThan(s.served, target, r), into)
}

// otherThan draws uniformly from ids (at least two) minus target: one
// draw over all but the last position, the target's position standing
// for the last.
func otherThan(ids []int64, target int64, r aug.Rand) int64 {
	n := len(ids)
	i := r.IntN(n - 1)
	if ids[i] == target {
		i = n - 1 // the draw skipped over the target's position
	}
	return ids[i]
}

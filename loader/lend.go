package loader

import (
	"context"
	"unsafe"

	"github.com/augloader/augloader/wire"
)

// An EdgeLender lends a batch's edge columns room in the buffer its
// transport sends from (the shared-memory ring), so that the workers
// write them once, where the client reads them, instead of into the
// collator's buffers for the transport to copy (a fifth of the daemon's
// time on a NodeSam epoch of COLLAB). The Arrow IPC bytes are the same
// either way: the lender places each message so that the columns are
// already where they belong in it, and copies them where they are not.
type EdgeLender interface {
	// LendEdges lends room for batch b of the plan (called in batch
	// order, before b is built), whose record has rows rows, at most
	// edges directed edges, and at most rest bytes in its other columns;
	// ok is false when there is none (it may wait for some, until ctx is
	// done). A batch of E directed edges
	// puts edge_src's values at the end of src, in its last
	// EdgeSrcSlots(E) elements (Arrow pads a buffer to 8 bytes), and
	// edge_dst's from dst[0]. src and dst are the lender's until the batch
	// is written or the stream ends.
	LendEdges(ctx context.Context, b, rows, edges int, rest int64) (src, dst []int32, ok bool)
}

// EdgeSrcSlots is how many int32 slots edge_src's values take at the end
// of a lent src for a batch of e directed edges: e rounded up to even.
func EdgeSrcSlots(e int) int { return (e + 1) &^ 1 }

// loan is the room lent to one batch.
type loan struct{ src, dst []int32 }

// lend lends room to batch b when the plan has a lender and the batch's
// edges can be written there: graphs without edge features (whose
// collation needs the sources as it goes, aug.Coalesced.AppendIDs), not
// structures, uncompressed.
func (s *stream) lend(b int) loan {
	p := s.p
	if p.Lender == nil || s.l.st != nil || s.l.src.ds.lay.EdgeFeatures() || p.Compression != wire.CompressNone || b >= len(p.Edges) {
		return loan{}
	}
	rows := len(p.Batches[b]) * max(p.Twins, 1)
	// The other columns: the batch's collated bound less its edge columns'.
	rest := max(p.Bytes[b]-p.Work[b]-8*int64(p.Edges[b]), 0)
	src, dst, ok := p.Lender.LendEdges(s.ctx, b, rows, p.Edges[b], rest)
	if !ok {
		return loan{}
	}
	return loan{src, dst}
}

// borrow makes the collator write its edges into l: Dst there, Src
// deferred (aug.Coalesced.DeferSrc) until record puts it at the end of
// l.src. Its own buffers are kept for giveBack.
func (c *collator) borrow(l loan) {
	if l.dst == nil {
		return
	}
	c.ownSrc, c.ownDst = c.edges.Src, c.edges.Dst
	c.edges.Src, c.edges.Dst = nil, l.dst[:0]
	c.edges.DeferSrc = true
	c.lent = l
}

// lentSrc writes the deferred sources into their place at the end of the
// lent src and makes them edges.Src. When the edges outgrew the loan
// (a bound was off: Dst was moved to the heap), they go on the heap too,
// and the transport copies them.
func (c *collator) lentSrc() {
	n := c.edges.Len()
	src := c.lent.src
	if slots := EdgeSrcSlots(n); slots <= len(src) && unsafe.SliceData(c.edges.Dst) == unsafe.SliceData(c.lent.dst) {
		src = src[len(src)-slots:][:n] // Arrow's padding after it: the writer's
	} else {
		src = make([]int32, n)
	}
	c.edges.FillSrc(src)
	c.edges.Src = src
}

// giveBack returns the collator to its own buffers once its batch is
// written: nothing of the loan stays in the pool.
func (c *collator) giveBack() {
	if c.lent.dst == nil {
		return
	}
	c.edges.Src, c.edges.Dst = c.ownSrc[:0], c.ownDst[:0]
	c.ownSrc, c.ownDst = nil, nil
	c.edges.DeferSrc = false
	c.edges.Runs = c.edges.Runs[:0]
	c.lent = loan{}
}

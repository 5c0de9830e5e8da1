package aug

import (
	"fmt"
	"slices"
)

// Coalesced accumulates graphs' edges in both directions, coalesced: per
// graph sorted by source, then target, with the graph's node ids offset by
// a base — a PyG edge_index after coalesce(), batch-global. The loader
// collates a batch into one (Src and Dst back the edge_src and edge_dst
// columns without a copy).
type Coalesced struct {
	Src, Dst []int32
	// DeferSrc leaves Src alone: Runs records instead, as (source, count)
	// pairs in order, the runs Src would hold (each node's edges share
	// their source), and FillSrc writes them once the batch is whole. The
	// loader defers Src when Dst is written straight into the transport's
	// buffer: Src's place there depends on the batch's edge count, known
	// only at its end. Dst (and Len) are as without it; AppendIDs needs Src
	// and refuses.
	DeferSrc bool
	Runs     []int32
	deg      []int32 // Append's run starts
}

// Reset empties c, keeping its buffers.
func (c *Coalesced) Reset() { c.Src, c.Dst, c.Runs = c.Src[:0], c.Dst[:0], c.Runs[:0] }

// Len is the number of directed edges appended.
func (c *Coalesced) Len() int { return len(c.Dst) }

// run records, under DeferSrc, that the n directed edges before Dst's end
// have source v.
func (c *Coalesced) run(v int32, n int) {
	if n > 0 {
		c.Runs = append(c.Runs, v, int32(n))
	}
}

// FillSrc writes into src (Len() long) the sources Runs records: what Src
// would hold without DeferSrc.
func (c *Coalesced) FillSrc(src []int32) {
	at := 0
	for k := 0; k+1 < len(c.Runs); k += 2 {
		n := int(c.Runs[k+1])
		fill(src[at:at+n], c.Runs[k])
		at += n
	}
	if at != len(src) {
		panic(fmt.Sprintf("aug: coalesced runs cover %d directed edges, want %d", at, len(src)))
	}
}

// CoalescedApplier is an op that can write its output's edges straight
// into a Coalesced instead of out.Edges. ApplyCoalesced makes the same
// draws as Apply, appends to c exactly what c.Append(out, base) would
// after Apply, and leaves out.Edges empty; the rest of out is as Apply
// writes it. Fusing saves writing the canonical pairs and reading them back
// in a second pass; NodeSam on an indexed input builds each node's run
// from the index's adjacency, O(|V| + |E|) with a copy-like inner loop.
type CoalescedApplier interface {
	Op
	ApplyCoalesced(in, out *Graph, r Rand, s *Scratch, c *Coalesced, base int32) error
}

// Append appends g's edges in both directions, node ids offset by base.
// g.Edges holds canonical pairs u < v sorted by (u, v), as every op emits
// them. A counting pass sizes each node's run; Src is constant over a run,
// so it is filled sequentially; then every pair drops v into u's run of Dst
// and u into v's. A node receives its smaller neighbours (from earlier
// pairs) before its larger ones, in order, so each run comes out sorted.
// Pairs sharing u are consecutive: u's write position stays in a register
// over its run (a load-increment-store per pair on one slot serialises on
// store forwarding); v differs in every pair of a run.
//
// About 1.5 ns per directed edge on COLLAB-sized graphs (BenchmarkCoalesce),
// bound by its stores; a variant copying each node's block of larger
// neighbours sequentially measured no faster.
func (c *Coalesced) Append(g *Graph, base int32) {
	n, e := int(g.N), g.Edges
	if n > 4*len(e)+1024 {
		c.appendSparse(e, base)
		return
	}
	c.deg = grow(c.deg, n+1)
	deg := c.deg
	clear(deg)
	for k := 0; k < len(e); {
		u, run := e[k], int32(0)
		for ; k < len(e) && e[k] == u; k += 2 {
			deg[e[k+1]+1]++
			run++
		}
		deg[u+1] += run
	}
	start := int32(len(c.Dst))
	deg[0] = start
	for i := 0; i < n; i++ {
		deg[i+1] += deg[i]
	}
	end := int(start) + len(e)
	c.Dst = slices.Grow(c.Dst, len(e))[:end]
	dst := c.Dst
	if c.DeferSrc {
		for u := 0; u < n; u++ {
			c.run(base+int32(u), int(deg[u+1]-deg[u]))
		}
	} else {
		c.Src = slices.Grow(c.Src, len(e))[:end]
		for u := 0; u < n; u++ {
			fill(c.Src[deg[u]:deg[u+1]], base+int32(u))
		}
	}
	pos := deg[:n]
	for k := 0; k < len(e); {
		u := e[k]
		i := pos[u]
		for ; k < len(e) && e[k] == u; k += 2 {
			v := e[k+1]
			j := pos[v]
			dst[i], dst[j] = base+v, base+u
			pos[v] = j + 1
			i++
		}
		pos[u] = i
	}
}

// appendSparse is Append for a graph of far more nodes than edges (one
// that declares 2^27 nodes and holds a few edges): the directed edges
// sorted by (source, target), in memory proportional to the edges, not a
// counter per node. Same output.
func (c *Coalesced) appendSparse(e []int32, base int32) {
	keys := make([]uint64, 0, len(e))
	for k := 0; k < len(e); k += 2 {
		u, v := uint64(uint32(e[k])), uint64(uint32(e[k+1]))
		keys = append(keys, u<<32|v, v<<32|u)
	}
	slices.Sort(keys)
	from := 0 // the current source's first key (sorted by source)
	for i, k := range keys {
		if !c.DeferSrc {
			c.Src = append(c.Src, base+int32(k>>32))
		} else if i == len(keys)-1 || keys[i+1]>>32 != k>>32 {
			c.run(base+int32(k>>32), i+1-from) // k ends its source's run
			from = i + 1
		}
		c.Dst = append(c.Dst, base+int32(k&(1<<32-1)))
	}
}

// fill sets every element of s to v, eight stores a round. Runs are a
// node's degree (about 66 on COLLAB): doubling copies through memmove
// cost a call per power of two, and measured a quarter slower into the
// shared-memory ring (BenchmarkFillSrc) and 7% slower in Append.
func fill(s []int32, v int32) {
	k := 0
	for ; k+8 <= len(s); k += 8 {
		q := s[k : k+8 : k+8]
		q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7] = v, v, v, v, v, v, v, v
	}
	for ; k < len(s); k++ {
		s[k] = v
	}
}

// AppendIDs is Append that also appends to ids, for every directed edge
// appended, the index of the undirected edge (the pair of g.Edges) it is a
// direction of: the row of the edge's features (Graph.EdgeCat, EdgeX).
func (c *Coalesced) AppendIDs(g *Graph, base int32, ids []int32) []int32 {
	if c.DeferSrc {
		panic("aug: Coalesced.AppendIDs under DeferSrc")
	}
	start := len(c.Src)
	c.Append(g, base)
	added := c.Src[start:]
	ids = slices.Grow(ids, len(added))
	// Each node's run is its neighbours, sorted: undirected edge (u, v)
	// is found in g's sorted pairs by binary search, from either end.
	for j := range added {
		u, v := c.Src[start+j]-base, c.Dst[start+j]-base
		ids = append(ids, int32(edgeIndex(g, min(u, v), max(u, v))))
	}
	return ids
}

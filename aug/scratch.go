package aug

import (
	"context"
	"math/rand/v2"
)

// Scratch holds the buffers an op reuses between calls. Not safe for
// concurrent use: give each worker its own.
type Scratch struct {
	pcg rand.PCG
	rng *rand.Rand

	off, adj   []int32  // CSR of the input graph
	off2, adj2 []int32  // CSR of SubMix's partner
	nb         []int32  // neighbours of the split node, in id order
	inT        []uint32 // stamp: neighbour of the split node in a triangle with it
	keys       []uint64 // touched output edges, packed u<<32|v
	tmpKeys    []uint64
	added      []int32 // adjustment set
	side       []int8  // split side per node (valid where stamped)
	stamp      []uint32
	gen        uint32
	cnt        []int32
	tmp        []int32
	touched    []uint8  // emit: 1 for the ≤ 4 nodes whose edges change (all 0 between calls)
	kmask      []uint8  // emitCoalesced: per output node, its special neighbours (all 0 between calls)
	specOf     []uint8  // emitCoalesced: 1 + a special's index (all 0 between calls)
	specBits   []uint64 // emitCoalesced: each special's neighbours, a row of bits (all 0 between calls)
	present    []uint8  // emitIndexed, emitCoalesced: bit q for a neighbour of marks[q] (all 0 between calls)

	// SubMix
	score, y, rr, pp, ap, x []float64
	rankKeys                []rankKey
	span                    []int32
	dinv                    []float64
	order, comp, comp2      []int32 // ranking buffer; root components in BFS order
	set, set2               []int32 // S and S' in rank order
	pos                     []int32 // position in S or S' (valid where stamped)
	e1, e2                  []int32 // SubMix's kept and mapped edges
	partner                 Graph
	// ctx is what a partner's read stops with (SetContext): the request
	// the graph is built for.
	ctx       context.Context
	unchanged int // SubMix draws that left their graph unchanged (Ē empty)
}

// TakeUnchanged returns how many SubMix draws with this scratch left their
// graph unchanged, with its hard label, because the mix would have had no
// edge (Ē empty), and resets the count. The loader reports it per stream.
func (s *Scratch) TakeUnchanged() int {
	n := s.unchanged
	s.unchanged = 0
	return n
}

// nextGen returns a fresh stamp for s.stamp sized ≥ n (no clearing needed).
func (s *Scratch) nextGen(n int) uint32 {
	if len(s.stamp) < n {
		s.stamp = make([]uint32, n+n/4+8)
		s.gen = 0
	}
	s.gen++
	if s.gen == 0 { // wrapped: clear once every 2^32 uses
		clear(s.stamp)
		s.gen = 1
	}
	return s.gen
}

// csr builds the adjacency of the input graph into s.off, s.adj.
func (s *Scratch) csr(n int32, edges []int32) {
	s.off, s.adj = s.buildCSR(n, edges, s.off, s.adj)
}

// buildCSR builds the adjacency of n nodes and sorted canonical edges,
// reusing off and adj. Because the edges are sorted, every neighbour list
// comes out sorted too.
func (s *Scratch) buildCSR(n int32, edges, off, adj []int32) ([]int32, []int32) {
	off = grow(off, int(n)+1)
	clear(off)
	for _, v := range edges {
		off[v+1]++
	}
	for i := int32(0); i < n; i++ {
		off[i+1] += off[i]
	}
	adj = grow(adj, len(edges))
	s.cnt = grow(s.cnt, int(n))
	copy(s.cnt, off[:n])
	for k := 0; k < len(edges); k += 2 {
		u, v := edges[k], edges[k+1]
		adj[s.cnt[u]] = v
		s.cnt[u]++
		adj[s.cnt[v]] = u
		s.cnt[v]++
	}
	return off, adj
}

// sortPairs sorts (u, v) pairs with u < v < n by (u, v) in O(n + pairs):
// a stable counting pass by v, then one by u.
func (s *Scratch) sortPairs(n int32, e []int32) {
	m := len(e) / 2
	if m < 2 {
		return
	}
	s.tmp = grow(s.tmp, len(e))
	s.cnt = grow(s.cnt, int(n)+1)
	pass := func(src, dst []int32, key int) {
		clear(s.cnt)
		for k := key; k < len(src); k += 2 {
			s.cnt[src[k]+1]++
		}
		for i := int32(0); i < n; i++ {
			s.cnt[i+1] += s.cnt[i]
		}
		for k := 0; k < len(src); k += 2 {
			p := s.cnt[src[k+key]] * 2
			dst[p], dst[p+1] = src[k], src[k+1]
			s.cnt[src[k+key]]++
		}
	}
	pass(e, s.tmp, 1)
	pass(s.tmp, e, 0)
}

// SetContext sets the context of the reads an op makes through s (SubMix's
// partner, Partners.Partner): the request the graph is built for, so a
// client that goes away stops them. Until set, context.Background().
func (s *Scratch) SetContext(ctx context.Context) { s.ctx = ctx }

// Forget drops what s refers to beyond its own buffers, which it keeps:
// the request's context and the last partner's views of its shard and
// its Index. A scratch kept between requests (the loader's pool of
// workers) then holds no page or index a cache limit has let go.
func (s *Scratch) Forget() {
	s.ctx = nil
	s.partner.ForgetInput()
}

func (s *Scratch) context() context.Context {
	if s.ctx == nil {
		return context.Background()
	}
	return s.ctx
}

package aug

import "math/bits"

// Index is per-graph structure that NodeSam (and its split-based ablations)
// and SubMix would otherwise recompute on every draw: the adjacency, per
// node its triangle count and the neighbours that share a triangle with
// it, and (EnablePPR) the graph's components and SubMix's cached
// PageRank rankings. The
// loader builds it once per graph (the same graphs are augmented every
// epoch) and attaches it to the input. With it, split and adjustment cost
// O(deg v_i) instead of passes over all edges; the draws, and therefore the
// outputs, are the same with or without it.
//
// An Index is read-only once built and safe for concurrent use.
type Index struct {
	N        int32
	Off, Adj []int32 // CSR: node v's neighbours, sorted, are Adj[Off[v]:Off[v+1]]
	Tri      []int64 // triangles through each node
	TOff, T  []int32 // node v's neighbours sharing a triangle with it, sorted

	ppr *pprTable // SubMix's cached rankings (EnablePPR), or nil
}

// BuildIndex indexes g (canonical sorted edges). Graphs of up to 1,024
// nodes use adjacency bitsets (a few words per edge); larger ones enumerate
// each triangle once, as u < v < w from forward neighbour lists
// (O(Σ over edges of the forward degrees), O(|V| + |E|) memory).
func BuildIndex(g *Graph) *Index {
	n := g.N
	ix := &Index{N: n, Off: make([]int32, n+1), Adj: make([]int32, len(g.Edges)), Tri: make([]int64, n)}
	for _, v := range g.Edges {
		ix.Off[v+1]++
	}
	for i := int32(0); i < n; i++ {
		ix.Off[i+1] += ix.Off[i]
	}
	pos := make([]int32, n)
	copy(pos, ix.Off[:n])
	for k := 0; k < len(g.Edges); k += 2 {
		u, v := g.Edges[k], g.Edges[k+1]
		ix.Adj[pos[u]] = v
		pos[u]++
		ix.Adj[pos[v]] = u
		pos[v]++
	}
	if n <= bitsetMaxNodes {
		ix.triangleBits(g)
		return ix
	}
	// fwd[v] is where v's neighbours greater than v start in Adj.
	fwd := make([]int32, n)
	for v := int32(0); v < n; v++ {
		lo, hi := ix.Off[v], ix.Off[v+1]
		for lo < hi && ix.Adj[lo] < v {
			lo++
		}
		fwd[v] = lo
	}
	// inTri[e] flags adjacency entry e (forward ones only) as an edge of a
	// triangle.
	inTri := make([]bool, len(ix.Adj))
	for u := int32(0); u < n; u++ {
		for e := fwd[u]; e < ix.Off[u+1]; e++ {
			v := ix.Adj[e]
			// Common forward neighbours w > v of u and v.
			a, b := e+1, fwd[v]
			ae, be := ix.Off[u+1], ix.Off[v+1]
			for a < ae && b < be {
				switch x, y := ix.Adj[a], ix.Adj[b]; {
				case x < y:
					a++
				case x > y:
					b++
				default: // triangle u < v < w = x
					ix.Tri[u]++
					ix.Tri[v]++
					ix.Tri[x]++
					inTri[e], inTri[a], inTri[b] = true, true, true
					a++
					b++
				}
			}
		}
	}
	// T lists: each flagged forward entry u→v puts v in T_u and u in T_v;
	// filling in u order keeps every list sorted (smaller members arrive
	// first, from earlier u; then u's own forward members, ascending).
	ix.TOff = make([]int32, n+1)
	for u := int32(0); u < n; u++ {
		for e := fwd[u]; e < ix.Off[u+1]; e++ {
			if inTri[e] {
				ix.TOff[u+1]++
				ix.TOff[ix.Adj[e]+1]++
			}
		}
	}
	for i := int32(0); i < n; i++ {
		ix.TOff[i+1] += ix.TOff[i]
	}
	ix.T = make([]int32, ix.TOff[n])
	copy(pos, ix.TOff[:n])
	for u := int32(0); u < n; u++ {
		for e := fwd[u]; e < ix.Off[u+1]; e++ {
			if inTri[e] {
				v := ix.Adj[e]
				ix.T[pos[u]] = v
				pos[u]++
				ix.T[pos[v]] = u
				pos[v]++
			}
		}
	}
	return ix
}

// bitsetMaxNodes bounds the bitset method (n²/8 bytes of rows: 128 KiB).
const bitsetMaxNodes = 1024

// triangleBits fills Tri and T from adjacency bitsets: edge (u, v) has
// popcount(row_u & row_v) common neighbours; it lies in a triangle iff
// that is positive, and each triangle through v is met twice among v's
// edges. O(|V|²/64 + |E|·|V|/64) — a few words per edge on small graphs.
func (ix *Index) triangleBits(g *Graph) {
	n := int(ix.N)
	words := (n + 63) / 64
	rows := make([]uint64, n*words)
	for k := 0; k < len(g.Edges); k += 2 {
		u, v := int(g.Edges[k]), int(g.Edges[k+1])
		rows[u*words+v/64] |= 1 << (v % 64)
		rows[v*words+u/64] |= 1 << (u % 64)
	}
	m := len(g.Edges) / 2
	common := make([]int32, m)
	ix.TOff = make([]int32, n+1)
	for e := 0; e < m; e++ {
		u, v := int(g.Edges[2*e]), int(g.Edges[2*e+1])
		ru, rv := rows[u*words:(u+1)*words], rows[v*words:(v+1)*words]
		c := 0
		for w := range ru {
			c += bits.OnesCount64(ru[w] & rv[w])
		}
		common[e] = int32(c)
		if c > 0 {
			ix.Tri[u] += int64(c)
			ix.Tri[v] += int64(c)
			ix.TOff[u+1]++
			ix.TOff[v+1]++
		}
	}
	for v := range ix.Tri {
		ix.Tri[v] /= 2
	}
	for i := 0; i < n; i++ {
		ix.TOff[i+1] += ix.TOff[i]
	}
	// Edges in (u, v) order fill every T list sorted (as in BuildIndex).
	ix.T = make([]int32, ix.TOff[n])
	pos := make([]int32, n)
	copy(pos, ix.TOff[:n])
	for e := 0; e < m; e++ {
		if common[e] > 0 {
			u, v := g.Edges[2*e], g.Edges[2*e+1]
			ix.T[pos[u]] = v
			pos[u]++
			ix.T[pos[v]] = u
			pos[v]++
		}
	}
}

// valid reports whether ix indexes a graph of g's size (a stale or foreign
// index is ignored rather than trusted).
func (ix *Index) valid(g *Graph) bool {
	return ix != nil && ix.N == g.N && len(ix.Adj) == len(g.Edges)
}

// Bytes is the memory the index holds (its slices and its PageRank
// table's per-node slots, not the rankings, which their own cache
// bounds).
func (ix *Index) Bytes() int64 {
	b := int64(4*(len(ix.Off)+len(ix.Adj)+len(ix.TOff)+len(ix.T)) + 8*len(ix.Tri) + 64)
	if t := ix.ppr; t != nil {
		b += int64(4*(len(t.compOf)+len(t.compSize)) + 8*len(t.roots) + 64)
		if l := t.loops.Load(); l != nil {
			b += int64(8 * len(*l))
		}
	}
	return b
}

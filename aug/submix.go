package aug

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
)

// Partners supplies SubMix's partner graph. The loader implements it: the
// partner is drawn uniformly from the whole served set minus the target,
// using r, so the choice is part of the same deterministic stream.
type Partners interface {
	// Partner writes a graph other than target into into; a read it
	// makes stops when ctx is done (Scratch.SetContext).
	Partner(ctx context.Context, target int64, r Rand, into *Graph) error
}

// PPR parameters. Part of the determinism contract.
const (
	// PPRAlpha is the teleport probability α of personalized PageRank.
	PPRAlpha = 0.15
	// PPRTol is the stopping rule: conjugate gradient on
	// (I − (1−α)·D^-1/2·A·D^-1/2)·x = α·e_r stops when the residual's L2
	// norm is at most PPRTol·α, or after PPRMaxIter iterations. The system
	// is symmetric positive definite with condition number ≤ (2−α)/α, so
	// the error shrinks by ≥ 0.55 per iteration: ~25 iterations.
	PPRTol     = 1e-7
	PPRMaxIter = 200
)

// ErrNoPartner: the Partners source returned the target itself.
var ErrNoPartner = errors.New("aug: submix partner is the target graph")

// SubMix is Algorithms 5–6 of the paper: partner G′ from Partners; roots r,
// r′ uniform; k = ceil(U[0, p)·min(|comp(r)|, |comp(r′)|)) ≥ 1; S (and S′)
// the root followed by the k−1 highest personalized-PageRank scores in the
// root's component (ties by node id), or the first k nodes of a BFS from the
// root when that set is not connected; the i-th node of S′ maps to the i-th
// of S; Ē = (edges of G not inside S) ∪ (edges of G′ inside S′, mapped);
// features of S replaced by those of S′; soft label q·y + (1−q)·y′ with
// q = |E1|/|Ē| (G unchanged with its hard label when Ē is empty). |V| and
// the number of connected components are unchanged.
type SubMix struct {
	P        float64 // target ratio p in (0, 1); 0 means 0.4
	Partners Partners
	// Base selects SubMixBase: S and S′ are k uniform random nodes in
	// random order (the paper's ablation; connectivity is not kept).
	Base bool
	// SelfLoops ranks by PageRank on the graph with a self-loop on every
	// node, as the reference implementation does (PyG's GDC, whose default
	// adds them before normalising); the paper's definition has none.
	// The draws are the same; S and S′ may differ.
	SelfLoops bool
}

// Apply implements Op.
func (m SubMix) Apply(in, out *Graph, r Rand, s *Scratch) error {
	p := m.P
	if p == 0 {
		p = 0.4
	}
	if !(p > 0 && p < 1) {
		return fmt.Errorf("aug: submix ratio p = %g not in (0, 1)", p)
	}
	if m.Partners == nil {
		return errors.New("aug: submix needs a partner source")
	}
	g2 := &s.partner
	if err := m.Partners.Partner(s.context(), in.ID, r, g2); err != nil {
		return err
	}
	if g2.ID == in.ID {
		return fmt.Errorf("%w (id %d)", ErrNoPartner, in.ID)
	}
	if !sameFeatures(in, g2) {
		return fmt.Errorf("aug: submix partner %d has features %v×%d (%d columns, edges %d+%d, %d targets), target %d has %v×%d (%d, %d+%d, %d)",
			g2.ID, g2.Dense, g2.Dim, g2.CatCols, g2.EdgeCatCols, g2.EdgeDim, len(g2.Y), in.ID, in.Dense, in.Dim, in.CatCols, in.EdgeCatCols, in.EdgeDim, len(in.Y))
	}
	if in.N == 0 || g2.N == 0 {
		out.CopyFrom(in)
		return nil
	}
	root, root2 := int32(r.IntN(int(in.N))), int32(r.IntN(int(g2.N)))
	if m.Base {
		k := ceilK(r.Float64()*p, int(min(in.N, g2.N)))
		s.set = uniformSet(r, in.N, k, s.set)
		s.set2 = uniformSet(r, g2.N, k, s.set2)
		s.mix(in, g2, out)
		return nil
	}
	a := s.submixSide(in, root, m.SelfLoops, &s.off, &s.adj, &s.comp)
	b := s.submixSide(g2, root2, m.SelfLoops, &s.off2, &s.adj2, &s.comp2)
	k := ceilK(r.Float64()*p, min(a.compLen, b.compLen))
	s.set = s.sample(a, p, k, m.SelfLoops, s.set)
	s.set2 = s.sample(b, p, k, m.SelfLoops, s.set2)
	s.mix(in, g2, out)
	return nil
}

// submixSide is one graph of a draw: its adjacency (the Index's, or built
// into scratch buffers), its root, and the root's component — its size,
// and in BFS order once computed.
type submixSide struct {
	g        *Graph
	root     int32
	off, adj []int32
	table    *pprTable                 // cached rankings, or nil
	slots    []atomic.Pointer[ranking] // the table's, for this PageRank variant
	compLen  int
	comp     *[]int32 // scratch holding the BFS order
	haveComp bool
}

// submixSide prepares one graph of a draw: the Index's adjacency and component
// sizes when it has them (nothing built), else a CSR and a BFS from root
// into the scratch buffers given.
func (s *Scratch) submixSide(g *Graph, root int32, selfLoops bool, off, adj, comp *[]int32) submixSide {
	sd := submixSide{g: g, root: root, comp: comp}
	if ix := g.Index; ix.valid(g) {
		sd.off, sd.adj = ix.Off, ix.Adj // read only: never a scratch buffer
		if t := ix.ppr; t != nil {
			sd.table, sd.slots = t, t.slots(selfLoops)
			sd.compLen = int(t.compSize[t.compOf[root]])
			return sd
		}
	} else {
		*off, *adj = s.buildCSR(g.N, g.Edges, *off, *adj)
		sd.off, sd.adj = *off, *adj
	}
	s.bfsSide(&sd)
	sd.compLen = len(*comp)
	return sd
}

func (s *Scratch) bfsSide(sd *submixSide) {
	if !sd.haveComp {
		size := int(sd.g.N) // unknown: at most every node
		if sd.table != nil {
			size = sd.compLen
		}
		*sd.comp = s.bfs(sd.root, sd.off, sd.adj, sd.g.N, size, *sd.comp)
		sd.haveComp = true
	}
}

// ceilK is k = ceil(u·c), at least 1 (u = U[0, p)).
func ceilK(u float64, c int) int {
	return max(1, min(c, int(math.Ceil(u*float64(c)))))
}

// uniformSet draws k distinct nodes of 0..n-1 in random order (partial
// Fisher–Yates over a reused index array).
func uniformSet(r Rand, n int32, k int, buf []int32) []int32 {
	buf = grow(buf, int(n))
	for i := range buf {
		buf[i] = int32(i)
	}
	for i := 0; i < k; i++ {
		j := i + r.IntN(int(n)-i)
		buf[i], buf[j] = buf[j], buf[i]
	}
	return buf[:k]
}

// bfs returns the component of root in BFS order (neighbours in id order).
// size is the component's size when known (the Index's), else n: the
// search stops once it has found that many nodes, which on a dense graph
// spares scanning most adjacency lists, and changes no order.
func (s *Scratch) bfs(root int32, off, adj []int32, n int32, size int, q []int32) []int32 {
	gen := s.nextGen(int(n))
	q = append(q[:0], root)
	s.stamp[root] = gen
	for h := 0; h < len(q) && len(q) < size; h++ {
		u := q[h]
		for _, w := range adj[off[u]:off[u+1]] {
			if s.stamp[w] != gen {
				s.stamp[w] = gen
				q = append(q, w)
			}
		}
	}
	return q
}

// sample picks S: the root, then the k−1 best-scored other nodes of its
// component; the first k BFS nodes if that set is not connected. The
// ranking comes from the graph's PPRCache when it holds one long enough;
// else it is computed (PageRank, then a sort) and offered to the cache.
func (s *Scratch) sample(sd submixSide, p float64, k int, selfLoops bool, set []int32) []int32 {
	set = set[:0]
	if k == 1 {
		return append(set, sd.root)
	}
	hit := false
	if t := sd.table; t != nil {
		t.cache.draws.Add(1)
		if rk := sd.slots[sd.root].Load(); rk != nil && rk.len() >= k {
			t.cache.hits.Add(1)
			set, hit = rk.appendTo(set, k), true
		}
	}
	if !hit {
		s.bfsSide(&sd)
		l := rankLimit(p, len(*sd.comp))
		s.rank(sd.root, *sd.comp, sd.off, sd.adj, sd.g.N, l, selfLoops)
		if sd.table != nil {
			sd.table.store(sd.slots, sd.root, s.order, l)
		}
		set = append(set, s.order[:k]...)
	}
	if !s.connected(set, sd.off, sd.adj, sd.g.N) {
		s.bfsSide(&sd)
		set = append(set[:0], (*sd.comp)[:k]...)
	}
	return set
}

// rank sets s.order to the first l nodes of root's component ranked: the
// root, then by personalized-PageRank score, highest first, ties by node
// id. Only the l − 1 best are sorted: a selection finds them first.
func (s *Scratch) rank(root int32, comp, off, adj []int32, n int32, l int, selfLoops bool) {
	s.ppr(root, comp, off, adj, n, selfLoops)
	s.rankKeys, s.order = rankOrder(root, comp, s.score, l, s.rankKeys, s.order)
}

// rankOrder appends to order[:0] the root and the l − 1 best other nodes
// of comp by score (keys is scratch).
func rankOrder(root int32, comp []int32, score []float64, l int, keys []rankKey, order []int32) ([]rankKey, []int32) {
	keys = keys[:0]
	for _, u := range comp {
		if u != root {
			keys = append(keys, rankKey{key: descKey(score[u]), id: u})
		}
	}
	top := min(max(l-1, 0), len(keys))
	selectRankKeys(keys, top)
	slices.SortFunc(keys[:top], compareRankKeys)
	order = append(order[:0], root)
	for _, k := range keys[:top] {
		order = append(order, k.id)
	}
	return keys, order
}

// rankKey orders nodes by score, highest first, then by id.
type rankKey struct {
	key uint64 // descKey(score)
	id  int32
}

func compareRankKeys(a, b rankKey) int {
	switch {
	case a.key < b.key:
		return -1
	case a.key > b.key:
		return 1
	}
	return int(a.id - b.id)
}

// descKey maps a score to a key whose unsigned order is the scores'
// descending order (−0 and +0 the same key, as they compare equal).
func descKey(v float64) uint64 {
	if v == 0 {
		v = 0
	}
	b := math.Float64bits(v)
	if b>>63 == 1 {
		b = ^b
	} else {
		b |= 1 << 63
	}
	return ^b
}

// selectRankKeys moves the k smallest keys (by compareRankKeys) into
// keys[:k], in some order: quickselect, median-of-three pivots. Keys are
// distinct (ids are), so the k are well defined.
func selectRankKeys(keys []rankKey, k int) {
	lo, hi := 0, len(keys)
	for hi-lo > 12 && k > lo && k < hi {
		mid := lo + (hi-lo)/2
		a, b, c := keys[lo], keys[mid], keys[hi-1]
		if compareRankKeys(a, b) > 0 {
			a, b = b, a
		}
		if compareRankKeys(b, c) > 0 {
			b = c
			if compareRankKeys(a, b) > 0 {
				b = a
			}
		}
		pivot := b
		// Three-way partition: < pivot, == pivot (one key), > pivot.
		i, j := lo, lo
		for t := lo; t < hi; t++ {
			if c := compareRankKeys(keys[t], pivot); c < 0 {
				keys[t], keys[j] = keys[j], keys[t]
				keys[j], keys[i] = keys[i], keys[j]
				i++
				j++
			} else if c == 0 {
				keys[t], keys[j] = keys[j], keys[t]
				j++
			}
		}
		switch {
		case k <= i:
			hi = i
		case k >= j:
			lo = j
		default:
			return
		}
	}
	if k > lo && k < hi {
		slices.SortFunc(keys[lo:hi], compareRankKeys)
	}
}

// connected reports whether the subgraph induced by set is connected:
// members carry stamp `member` until the BFS from set[0] re-stamps them
// `seen`.
func (s *Scratch) connected(set, off, adj []int32, n int32) bool {
	member := s.nextGen(int(n))
	for _, v := range set {
		s.stamp[v] = member
	}
	seen := s.nextGen(int(n))
	s.stamp[set[0]] = seen
	s.tmp = append(s.tmp[:0], set[0])
	for h := 0; h < len(s.tmp) && len(s.tmp) < len(set); h++ {
		u := s.tmp[h]
		for _, w := range adj[off[u]:off[u+1]] {
			if s.stamp[w] == member {
				s.stamp[w] = seen
				s.tmp = append(s.tmp, w)
			}
		}
	}
	return len(s.tmp) == len(set)
}

// ppr solves (I − (1−α)T)x = α·e_root on the root's component, T =
// D^-1/2·A·D^-1/2, by conjugate gradient, into s.score (indexed by node).
// With selfLoops, T = (D+I)^-1/2·(A+I)·(D+I)^-1/2 (the reference
// implementation's variant: a self-loop on every node, then normalised).
//
// The vectors are held by position in comp (contiguous, no indirection);
// y = D^-1/2·pp alone is held by node, for the neighbour sums to gather.
// Every reduction adds its terms in comp order, so the floats are those
// of the plain node-indexed loops, bit for bit.
func (s *Scratch) ppr(root int32, comp, off, adj []int32, n int32, selfLoops bool) {
	c := len(comp)
	s.score = growF(s.score, int(n))
	s.y = growF(s.y, int(n))
	s.rr, s.pp, s.ap, s.dinv, s.x = growF(s.rr, c), growF(s.pp, c), growF(s.ap, c), growF(s.dinv, c), growF(s.x, c)
	x, rr, pp, ap, dinv, y := s.x[:c], s.rr[:c], s.pp[:c], s.ap[:c], s.dinv[:c], s.y
	// D^-1/2 once per solve (isolated nodes: 0): read twice per node per
	// iteration, a square root each time otherwise.
	// span: each node's adjacency bounds, by position, read every
	// iteration without going through comp and off.
	s.span = grow(s.span, 2*c)
	span := s.span
	for i, u := range comp {
		x[i], rr[i], pp[i] = 0, 0, 0
		dinv[i] = 0
		span[2*i], span[2*i+1] = off[u], off[u+1]
		d := off[u+1] - off[u]
		if selfLoops {
			d++
		}
		if d > 0 {
			dinv[i] = 1 / math.Sqrt(float64(d))
		}
	}
	// comp[0] is the root (BFS order).
	rr[0], pp[0] = PPRAlpha, PPRAlpha
	rs := PPRAlpha * PPRAlpha
	stop := PPRTol * PPRAlpha
	for i, u := range comp {
		y[u] = pp[i] * dinv[i]
	}
	for it := 0; it < PPRMaxIter && math.Sqrt(rs) > stop; it++ {
		// ap = pp − (1−α)·D^-1/2·A·D^-1/2·pp, with y = D^-1/2·pp.
		neighbourSums(span, adj, y, ap)
		if selfLoops {
			for i, u := range comp {
				ap[i] += y[u]
			}
		}
		var pap float64
		for i := range ap {
			ap[i] = pp[i] - (1-PPRAlpha)*dinv[i]*ap[i]
			pap += pp[i] * ap[i]
		}
		a := rs / pap
		var rsNew float64
		for i := range x {
			x[i] += a * pp[i]
			rr[i] -= a * ap[i]
			rsNew += rr[i] * rr[i]
		}
		beta := rsNew / rs
		for i, u := range comp {
			pp[i] = rr[i] + beta*pp[i]
			y[u] = pp[i] * dinv[i]
		}
		rs = rsNew
	}
	for i, u := range comp {
		s.score[u] = x[i]
	}
}

func growF(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n, n+n/4+8)
	}
	return s[:n]
}

// neighbourSums sets sum[i] = Σ y[w] over adj[span[2i]:span[2i+1]] (the
// neighbours of comp[i]), in adjacency order. Each sum is one chain of
// dependent additions, latency-bound; four nodes' chains run interleaved
// so the CPU overlaps them. Every sum still adds its terms in the same
// order, so the result is bit-for-bit that of the plain loop.
func neighbourSums(span, adj []int32, y, sum []float64) {
	i := 0
	for ; i+4 <= len(sum); i += 4 {
		sp := span[2*i : 2*i+8 : 2*i+8]
		a0, a1, a2, a3 := adj[sp[0]:sp[1]:sp[1]], adj[sp[2]:sp[3]:sp[3]], adj[sp[4]:sp[5]:sp[5]], adj[sp[6]:sp[7]:sp[7]]
		m := min(len(a0), len(a1), len(a2), len(a3))
		var s0, s1, s2, s3 float64
		for j := 0; j < m; j++ {
			s0 += y[a0[j]]
			s1 += y[a1[j]]
			s2 += y[a2[j]]
			s3 += y[a3[j]]
		}
		for _, w := range a0[m:] {
			s0 += y[w]
		}
		for _, w := range a1[m:] {
			s1 += y[w]
		}
		for _, w := range a2[m:] {
			s2 += y[w]
		}
		for _, w := range a3[m:] {
			s3 += y[w]
		}
		sum[i], sum[i+1], sum[i+2], sum[i+3] = s0, s1, s2, s3
	}
	for ; i < len(sum); i++ {
		var s float64
		for _, w := range adj[span[2*i]:span[2*i+1]] {
			s += y[w]
		}
		sum[i] = s
	}
}

package aug

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Partners supplies SubMix's partner graph. The loader implements it: the
// partner is drawn uniformly from the whole served set minus the target,
// using r, so the choice is part of the same deterministic stream.
type Partners interface {
	// Partner writes a graph other than target into into.
	Partner(target int64, r Rand, into *Graph) error
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
	if err := m.Partners.Partner(in.ID, r, g2); err != nil {
		return err
	}
	if g2.ID == in.ID {
		return fmt.Errorf("%w (id %d)", ErrNoPartner, in.ID)
	}
	if in.Dense != g2.Dense || in.Dim != g2.Dim {
		return fmt.Errorf("aug: submix partner %d has features %v×%d, target %d has %v×%d", g2.ID, g2.Dense, g2.Dim, in.ID, in.Dense, in.Dim)
	}
	if in.N == 0 || g2.N == 0 {
		out.CopyFrom(in)
		return nil
	}
	root, root2 := int32(r.IntN(int(in.N))), int32(r.IntN(int(g2.N)))
	s.csr(in.N, in.Edges)
	s.off2, s.adj2 = s.buildCSR(g2.N, g2.Edges, s.off2, s.adj2)
	var k int
	if m.Base {
		k = ceilK(r.Float64()*p, int(min(in.N, g2.N)))
		s.set = uniformSet(r, in.N, k, s.set)
		s.set2 = uniformSet(r, g2.N, k, s.set2)
	} else {
		s.comp = s.bfs(root, s.off, s.adj, in.N, s.comp)
		s.comp2 = s.bfs(root2, s.off2, s.adj2, g2.N, s.comp2)
		k = ceilK(r.Float64()*p, min(len(s.comp), len(s.comp2)))
		s.set = s.sample(root, k, s.comp, s.off, s.adj, in.N, s.set)
		s.set2 = s.sample(root2, k, s.comp2, s.off2, s.adj2, g2.N, s.set2)
	}
	s.mix(in, g2, out)
	return nil
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
func (s *Scratch) bfs(root int32, off, adj []int32, n int32, q []int32) []int32 {
	gen := s.nextGen(int(n))
	q = append(q[:0], root)
	s.stamp[root] = gen
	for h := 0; h < len(q); h++ {
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
// component; the first k BFS nodes if that set is not connected.
func (s *Scratch) sample(root int32, k int, comp, off, adj []int32, n int32, set []int32) []int32 {
	set = set[:0]
	if k == 1 {
		return append(set, root)
	}
	s.ppr(root, comp, off, adj, n)
	s.order = append(s.order[:0], comp...)
	score := s.score
	slices.SortFunc(s.order, func(a, b int32) int {
		switch {
		case a == root:
			return -1
		case b == root:
			return 1
		case score[a] > score[b]:
			return -1
		case score[a] < score[b]:
			return 1
		}
		return int(a - b)
	})
	set = append(set, s.order[:k]...)
	if !s.connected(set, off, adj, n) {
		set = append(set[:0], comp[:k]...)
	}
	return set
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
	for h := 0; h < len(s.tmp); h++ {
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
func (s *Scratch) ppr(root int32, comp, off, adj []int32, n int32) {
	s.score = growF(s.score, int(n))
	s.y, s.rr, s.pp, s.ap = growF(s.y, int(n)), growF(s.rr, int(n)), growF(s.pp, int(n)), growF(s.ap, int(n))
	x, rr, pp, ap, y := s.score, s.rr, s.pp, s.ap, s.y
	for _, u := range comp {
		x[u], rr[u], pp[u] = 0, 0, 0
	}
	rr[root], pp[root] = PPRAlpha, PPRAlpha
	rs := PPRAlpha * PPRAlpha
	stop := PPRTol * PPRAlpha
	// D^-1/2 once per solve (isolated nodes: 0): read twice per node per
	// iteration, a square root each time otherwise.
	s.dinv = growF(s.dinv, int(n))
	dinv := s.dinv
	for _, u := range comp {
		dinv[u] = 0
		if d := off[u+1] - off[u]; d > 0 {
			dinv[u] = 1 / math.Sqrt(float64(d))
		}
	}
	for it := 0; it < PPRMaxIter && math.Sqrt(rs) > stop; it++ {
		// ap = pp − (1−α)·D^-1/2·A·D^-1/2·pp
		for _, u := range comp {
			y[u] = pp[u] * dinv[u]
		}
		var pap float64
		for _, u := range comp {
			var sum float64
			for _, w := range adj[off[u]:off[u+1]] {
				sum += y[w]
			}
			ap[u] = pp[u] - (1-PPRAlpha)*dinv[u]*sum
			pap += pp[u] * ap[u]
		}
		a := rs / pap
		var rsNew float64
		for _, u := range comp {
			x[u] += a * pp[u]
			rr[u] -= a * ap[u]
			rsNew += rr[u] * rr[u]
		}
		beta := rsNew / rs
		for _, u := range comp {
			pp[u] = rr[u] + beta*pp[u]
		}
		rs = rsNew
	}
}

func growF(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n, n+n/4+8)
	}
	return s[:n]
}

// mix builds Ē, the features and the soft label from s.set (S ⊆ G) and
// s.set2 (S′ ⊆ G′).
func (s *Scratch) mix(in, g2, out *Graph) {
	n := in.N
	gen := s.nextGen(int(max(n, g2.N)))
	s.pos = grow(s.pos, int(max(n, g2.N)))
	// In G: stamp S. E1 = edges of G not inside S.
	for i, v := range s.set {
		s.stamp[v], s.pos[v] = gen, int32(i)
	}
	out.Edges = out.Edges[:0]
	for k := 0; k < len(in.Edges); k += 2 {
		u, v := in.Edges[k], in.Edges[k+1]
		if s.stamp[u] != gen || s.stamp[v] != gen {
			out.Edges = append(out.Edges, u, v)
		}
	}
	e1 := len(out.Edges) / 2
	// In G′: E2 = edges inside S′, mapped by rank to S.
	gen2 := s.nextGen(int(max(n, g2.N)))
	for i, v := range s.set2 {
		s.stamp[v], s.pos[v] = gen2, int32(i)
	}
	for k := 0; k < len(g2.Edges); k += 2 {
		u, v := g2.Edges[k], g2.Edges[k+1]
		if s.stamp[u] == gen2 && s.stamp[v] == gen2 {
			a, b := s.set[s.pos[u]], s.set[s.pos[v]]
			out.Edges = append(out.Edges, min(a, b), max(a, b))
		}
	}
	total := len(out.Edges) / 2
	if total == 0 {
		s.unchanged++
		out.CopyFrom(in)
		return
	}
	out.ID, out.N, out.Dense, out.Dim = in.ID, n, in.Dense, in.Dim
	s.sortPairs(n, out.Edges)
	out.Label, out.MixLabel = in.Label, g2.Label
	out.Q = float32(e1) / float32(total)
	// Features: S[i] takes S′[i]'s. Positions in S are stamped again for
	// the copy loop below.
	gen3 := s.nextGen(int(max(n, g2.N)))
	for i, v := range s.set {
		s.stamp[v], s.pos[v] = gen3, int32(i)
	}
	if in.Dense {
		d := int(in.Dim)
		out.FeatOff, out.Codes, out.Weights = out.FeatOff[:0], out.Codes[:0], out.Weights[:0]
		out.X = append(out.X[:0], in.X...)
		for i, v := range s.set {
			w := s.set2[i]
			copy(out.X[int(v)*d:int(v+1)*d], g2.X[int(w)*d:int(w+1)*d])
		}
		return
	}
	out.X = out.X[:0]
	out.FeatOff = grow(out.FeatOff, int(n)+1)
	out.Codes, out.Weights = out.Codes[:0], out.Weights[:0]
	for v := int32(0); v < n; v++ {
		out.FeatOff[v] = int32(len(out.Codes))
		src, z := in, v
		if s.stamp[v] == gen3 {
			src, z = g2, s.set2[s.pos[v]]
		}
		out.appendMix(src, z)
	}
	out.FeatOff[n] = int32(len(out.Codes))
}

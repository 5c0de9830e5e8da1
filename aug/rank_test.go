package aug

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// rank's selection then partial sort gives the prefix a full sort by
// (score descending, id) gives — the ranking SubMix has always used —
// whatever the ties, signs and zeros among the scores.
func TestRankPrefixEqualsFullSort(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	pools := [][]float64{
		{0.5, 0.25, 0.25, 0.125, 0, math.Copysign(0, -1), -1e-300, 1e-300, 0.125},
		{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
	}
	for trial := range 400 {
		n := 1 + r.IntN(300)
		score := make([]float64, n)
		for i := range score {
			switch trial % 3 {
			case 0:
				score[i] = r.Float64()
			default:
				p := pools[trial%3-1]
				score[i] = p[r.IntN(len(p))]
			}
		}
		comp := make([]int32, n)
		for i := range comp {
			comp[i] = int32(i)
		}
		r.Shuffle(n, func(i, j int) { comp[i], comp[j] = comp[j], comp[i] })
		root := comp[0]
		want := slices.Clone(comp)
		slices.SortFunc(want, func(a, b int32) int {
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
		for _, l := range []int{1, 2, 1 + r.IntN(n), n} {
			l = min(l, n)
			_, got := rankOrder(root, comp, score, l, nil, nil)
			if !slices.Equal(got, want[:l]) {
				t.Fatalf("trial %d n %d l %d: got %v, want %v", trial, n, l, got, want[:l])
			}
		}
	}
}

// pprDense solves (I − (1−α)T)x = α·e_root by Gaussian elimination on the
// whole graph, T the symmetric normalisation of A (of A + I with
// selfLoops): the definition, for ppr to be checked against.
func pprDense(n int, edges []int32, root int, selfLoops bool) []float64 {
	a := make([][]float64, n)
	for i := range a {
		a[i] = make([]float64, n)
		if selfLoops {
			a[i][i] = 1
		}
	}
	for k := 0; k < len(edges); k += 2 {
		u, v := edges[k], edges[k+1]
		a[u][v], a[v][u] = 1, 1
	}
	deg := make([]float64, n)
	for i := range a {
		for _, x := range a[i] {
			deg[i] += x
		}
	}
	m := make([][]float64, n) // augmented [I − (1−α)T | α e_root]
	for i := range m {
		m[i] = make([]float64, n+1)
		for j := range n {
			t := 0.0
			if a[i][j] != 0 {
				t = a[i][j] / math.Sqrt(deg[i]*deg[j])
			}
			m[i][j] = -(1 - PPRAlpha) * t
		}
		m[i][i]++
	}
	m[root][n] = PPRAlpha
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(m[r][c]) > math.Abs(m[p][c]) {
				p = r
			}
		}
		m[c], m[p] = m[p], m[c]
		for r := range n {
			if r != c && m[r][c] != 0 {
				f := m[r][c] / m[c][c]
				for j := c; j <= n; j++ {
					m[r][j] -= f * m[c][j]
				}
			}
		}
	}
	x := make([]float64, n)
	for i := range x {
		x[i] = m[i][n] / m[i][i]
	}
	return x
}

// ppr agrees with the definition, with and without self-loops, to well
// within the gaps between the scores that decide a ranking; and the two
// variants rank some graph differently (self_loops is not a no-op).
func TestPPRAgainstDense(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	differ := 0
	for trial := range 300 {
		n := 2 + r.IntN(30)
		var edges []int32
		for v := 1; v < n; v++ { // connected: a random tree, then chords
			edges = append(edges, int32(r.IntN(v)), int32(v))
		}
		for range r.IntN(2 * n) {
			u, v := r.IntN(n), r.IntN(n)
			if u != v {
				edges = append(edges, int32(min(u, v)), int32(max(u, v)))
			}
		}
		var s Scratch
		s.sortPairs(int32(n), edges)
		edges = dedupPairs(edges)
		off, adj := s.buildCSR(int32(n), edges, nil, nil)
		root := r.IntN(n)
		comp := s.bfs(int32(root), off, adj, int32(n), n, nil)
		var orders [2][]int32
		for vi, loops := range []bool{false, true} {
			want := pprDense(n, edges, root, loops)
			s.ppr(int32(root), comp, off, adj, int32(n), loops)
			for v := range n {
				if d := math.Abs(s.score[v] - want[v]); d > 1e-6 {
					t.Fatalf("trial %d (self-loops %v) node %d: score %g, definition %g", trial, loops, v, s.score[v], want[v])
				}
			}
			_, orders[vi] = rankOrder(int32(root), comp, s.score, n, nil, nil)
			orders[vi] = slices.Clone(orders[vi])
		}
		if !slices.Equal(orders[0], orders[1]) {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("self-loops never change a ranking")
	}
}

func dedupPairs(e []int32) []int32 {
	var out []int32
	for k := 0; k < len(e); k += 2 {
		if l := len(out); l > 0 && e[k] == out[l-2] && e[k+1] == out[l-1] {
			continue
		}
		out = append(out, e[k], e[k+1])
	}
	return out
}

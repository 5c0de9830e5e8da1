// Package synth writes seeded synthetic graph datasets in TU text format,
// shaped like real ones (same counts, similar degree shape), and
// molecule-shaped OGB graph-property folders in the csv.gz layout (WriteOGB),
// for demos, tests and benchmarks: the project ships no third-party data.
//
// The same (spec, seed) always writes the same bytes. Class labels are tied
// to structure (density or shape differ by class) so a model can learn them.
package synth

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/augloader/augloader/internal/iox"
)

// Shape is the family of graphs a spec draws.
type Shape int

// Shapes.
const (
	// EgoDense: COLLAB-like dense ego-networks, density set by the class.
	EgoDense Shape = iota
	// Threads: REDDIT-BINARY-like sparse discussion trees plus a few
	// cross edges; class 1 is star-like (Q&A), class 0 deeper.
	Threads
	// PowerLaw: one Chung–Lu graph with a power-law degree tail (Reddit).
	PowerLaw
)

// Spec describes a dataset to generate. Totals are met exactly.
type Spec struct {
	Name      string
	Shape     Shape
	Graphs    int
	Nodes     int64
	Edges     int64 // undirected, self-loops excluded
	SelfLoops int64 // extra (i, i) lines, as COLLAB has
	Classes   int
	// ClassShare[c] is the fraction of graphs in class c.
	ClassShare []float64
	MinNodes   int
	MaxNodes   int
}

// Like returns the spec shaped like a published dataset.
func Like(name string) (Spec, error) {
	switch strings.ToLower(name) {
	case "collab":
		return Spec{Name: "COLLAB", Shape: EgoDense, Graphs: 5000, Nodes: 372474, Edges: 12286079, SelfLoops: 2837,
			Classes: 3, ClassShare: []float64{0.52, 0.155, 0.325}, MinNodes: 32, MaxNodes: 492}, nil
	case "reddit-binary":
		return Spec{Name: "REDDIT-BINARY", Shape: Threads, Graphs: 2000, Nodes: 859254, Edges: 995508,
			Classes: 2, ClassShare: []float64{0.5, 0.5}, MinNodes: 6, MaxNodes: 3782}, nil
	case "reddit":
		return Spec{Name: "reddit", Shape: PowerLaw, Graphs: 1, Nodes: 232965, Edges: 11606919,
			Classes: 1, ClassShare: []float64{1}, MinNodes: 232965, MaxNodes: 232965}, nil
	case "malnet":
		// MalNet (Freitas et al., 2021): 1,262,024 function-call graphs of
		// 15,378 nodes and 35,167 edges on average, 47 types; sparse, so
		// drawn as Threads (trees with cross edges). Scale with --graphs.
		share := make([]float64, 47)
		for i := range share {
			share[i] = 1.0 / 47
		}
		return Spec{Name: "MALNET", Shape: Threads, Graphs: 1262024, Nodes: 1262024 * 15378, Edges: 1262024 * 35167,
			Classes: 47, ClassShare: share, MinNodes: 500, MaxNodes: 120000}, nil
	}
	return Spec{}, fmt.Errorf("synth: unknown dataset %q (want COLLAB, REDDIT-BINARY, reddit or malnet)", name)
}

// Scaled keeps the per-graph averages with n graphs (for PowerLaw, n scales
// the single graph's node and edge counts by n/1000 instead, min 1‰).
func (s Spec) Scaled(n int) Spec {
	if s.Shape == PowerLaw {
		f := float64(n) / 1000
		s.Nodes = max(int64(float64(s.Nodes)*f), 100)
		s.Edges = int64(float64(s.Edges) * f)
		s.MinNodes, s.MaxNodes = int(s.Nodes), int(s.Nodes)
		return s
	}
	f := float64(n) / float64(s.Graphs)
	s.Nodes = int64(math.Round(float64(s.Nodes) * f))
	s.Edges = int64(math.Round(float64(s.Edges) * f))
	s.SelfLoops = int64(math.Round(float64(s.SelfLoops) * f))
	s.Graphs = n
	return s
}

// Stats are the totals written.
type Stats struct{ Graphs, Nodes, Edges, SelfLoops int64 }

// Write generates the dataset into the folder out (files out/NAME_*.txt),
// written under a temporary name and renamed when complete.
func Write(ctx context.Context, s Spec, seed uint64, out string, force bool) (Stats, error) {
	return writeFolder(out, force, func() error {
		if s.Graphs < 1 || s.Nodes < int64(s.Graphs) {
			return fmt.Errorf("synth: %d graphs with %d nodes is not a dataset", s.Graphs, s.Nodes)
		}
		return nil
	}, func(dir string) (Stats, error) { return newGen(s, seed).write(ctx, dir) })
}

// writeFolder is every generator's output: it refuses an existing out
// without force, then a spec check says is wrong, then has write fill a
// temporary folder beside out, renamed into place only when complete.
func writeFolder(out string, force bool, check func() error, write func(dir string) (Stats, error)) (Stats, error) {
	if _, err := os.Lstat(out); err == nil && !force {
		return Stats{}, fmt.Errorf("synth: %s exists (use --force to replace it)", out)
	}
	if err := check(); err != nil {
		return Stats{}, err
	}
	td, err := iox.NewTempDir(out)
	if err != nil {
		return Stats{}, fmt.Errorf("synth: %w", err)
	}
	defer td.Abort() // a no-op once committed
	st, err := write(td.Path)
	if err != nil {
		return st, err
	}
	if err := td.Commit(); err != nil {
		return st, fmt.Errorf("synth: %w", err)
	}
	return st, nil
}

// atLeastOne checks a spec's graph count.
func atLeastOne(graphs int) func() error {
	return func() error {
		if graphs < 1 {
			return fmt.Errorf("synth: %d graphs is not a dataset", graphs)
		}
		return nil
	}
}

type gen struct {
	s   Spec
	rng *rand.Rand
}

func newGen(s Spec, seed uint64) *gen {
	// The stream constant keeps synth draws apart from any other use of seed.
	return &gen{s: s, rng: rand.New(rand.NewPCG(seed, 0x73796e7468))}
}

// sizes draws per-graph node counts summing exactly to s.Nodes.
func (g *gen) sizes() []int {
	s, r := g.s, g.rng
	n := make([]int, s.Graphs)
	if s.Graphs == 1 {
		n[0] = int(s.Nodes)
		return n
	}
	mean := float64(s.Nodes) / float64(s.Graphs)
	for i := range n {
		var v float64
		switch s.Shape {
		case EgoDense: // min plus an exponential tail
			v = float64(s.MinNodes) + r.ExpFloat64()*(mean-float64(s.MinNodes))
		default: // log-normal, heavy tail
			v = math.Exp(math.Log(mean*0.55) + 1.0*r.NormFloat64())
		}
		n[i] = min(max(int(v), s.MinNodes), s.MaxNodes)
	}
	fixSum(r, n, s.Nodes, func(int) int { return s.MinNodes }, func(int) int { return s.MaxNodes })
	return n
}

// fixSum moves the total of v to want by ±1 steps on random entries within
// [lo(i), hi(i)], scaling first when far off.
func fixSum(r *rand.Rand, v []int, want int64, lo, hi func(int) int) {
	var sum int64
	for _, x := range v {
		sum += int64(x)
	}
	if sum > 0 && (float64(sum) > 1.02*float64(want) || float64(sum) < 0.98*float64(want)) {
		f := float64(want) / float64(sum)
		for i := range v {
			v[i] = min(max(int(float64(v[i])*f), lo(i)), hi(i))
		}
		sum = 0
		for _, x := range v {
			sum += int64(x)
		}
	}
	for tries := 0; sum != want && tries < 1<<30; tries++ {
		i := r.IntN(len(v))
		step := 1
		if sum > want {
			step = -1
		}
		if d := (want - sum) / int64(len(v)); d > 1 || d < -1 {
			step = int(d)
		}
		nv := min(max(v[i]+step, lo(i)), hi(i))
		sum += int64(nv - v[i])
		v[i] = nv
	}
}

func (g *gen) classes() []int {
	lab := make([]int, g.s.Graphs)
	for i := range lab {
		u, acc := g.rng.Float64(), 0.0
		for c, p := range g.s.ClassShare {
			acc += p
			if u < acc || c == len(g.s.ClassShare)-1 {
				lab[i] = c
				break
			}
		}
	}
	return lab
}

// edgeCounts draws per-graph undirected edge counts summing to s.Edges, each
// within [n-1, n(n-1)/2] so that every graph can be connected and simple.
func (g *gen) edgeCounts(n, lab []int) []int {
	s := g.s
	m := make([]int, len(n))
	lo := func(i int) int { return n[i] - 1 }
	hi := func(i int) int { return n[i] * (n[i] - 1) / 2 }
	for i := range m {
		var v float64
		switch s.Shape {
		case EgoDense:
			dens := []float64{0.9, 0.35, 0.6}[lab[i]%3]
			v = dens * (0.75 + 0.5*g.rng.Float64()) * float64(hi(i))
		default:
			v = float64(n[i]) * float64(s.Edges) / float64(s.Nodes) * (0.8 + 0.4*g.rng.Float64())
		}
		m[i] = min(max(int(v), lo(i)), hi(i))
	}
	fixSum(g.rng, m, s.Edges, lo, hi)
	return m
}

// Generate draws every graph of the spec in order and calls fn with its id,
// class and sorted adjacency lists (valid until fn returns). Write uses it;
// benchmarks use it to build graphs in memory.
func Generate(ctx context.Context, s Spec, seed uint64, fn func(id, class int, adj [][]int32) error) error {
	g := newGen(s, seed)
	return g.each(ctx, func(id int, n []int, lab []int, b *builder) error { return fn(id, lab[id], b.adj) })
}

func (g *gen) each(ctx context.Context, fn func(id int, n, lab []int, b *builder) error) error {
	s := g.s
	n := g.sizes()
	lab := g.classes()
	var m []int
	if s.Shape == PowerLaw {
		m = []int{int(s.Edges)}
	} else {
		m = g.edgeCounts(n, lab)
	}
	var b builder
	for gi := range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch s.Shape {
		case EgoDense:
			b.dense(g.rng, n[gi], m[gi])
		case Threads:
			b.thread(g.rng, n[gi], m[gi], lab[gi] == 1)
		case PowerLaw:
			b.powerLaw(g.rng, n[gi], m[gi])
		}
		if err := fn(gi, n, lab, &b); err != nil {
			return err
		}
	}
	return nil
}

// write generates every graph and writes the TU files into dir.
func (g *gen) write(ctx context.Context, dir string) (Stats, error) {
	s := g.s
	var st Stats
	path := func(suffix string) string { return filepath.Join(dir, s.Name+suffix) }
	fa, err := os.Create(path("_A.txt"))
	if err != nil {
		return st, err
	}
	defer fa.Close()
	wa := bufio.NewWriterSize(fa, 1<<20)
	var ind, lbl, line []byte
	loopsLeft := s.SelfLoops
	var base int64
	err = g.each(ctx, func(gi int, n, lab []int, b *builder) error {
		// Self-loops go to the first graphs, one each, as in COLLAB.
		if loopsLeft > 0 {
			v := int64(g.rng.IntN(n[gi]))
			line = appendPair(line[:0], base+v+1, base+v+1)
			wa.Write(line)
			loopsLeft--
			st.SelfLoops++
		}
		for u := range b.adj {
			for _, v := range b.adj[u] {
				line = appendPair(line[:0], base+int64(u)+1, base+int64(v)+1)
				if _, err := wa.Write(line); err != nil {
					return err
				}
				if int32(u) < v {
					st.Edges++
				}
			}
		}
		for range n[gi] {
			ind = strconv.AppendInt(ind, int64(gi+1), 10)
			ind = append(ind, '\n')
		}
		lbl = strconv.AppendInt(lbl, int64(lab[gi]), 10)
		lbl = append(lbl, '\n')
		base += int64(n[gi])
		st.Graphs++
		return nil
	})
	if err != nil {
		return st, err
	}
	st.Nodes = base
	if err := wa.Flush(); err != nil {
		return st, err
	}
	if err := fa.Sync(); err != nil {
		return st, err
	}
	if err := iox.WriteFileAtomic(path("_graph_indicator.txt"), ind, 0o644); err != nil {
		return st, err
	}
	if err := iox.WriteFileAtomic(path("_graph_labels.txt"), lbl, 0o644); err != nil {
		return st, err
	}
	readme := fmt.Sprintf("Synthetic %s-shaped dataset written by augloader's shardconv synth.\n"+
		"Not real data. graphs=%d nodes=%d edges=%d self_loops=%d classes=%d\n",
		s.Name, st.Graphs, st.Nodes, st.Edges, st.SelfLoops, s.Classes)
	return st, os.WriteFile(filepath.Join(dir, "README.txt"), []byte(readme), 0o644)
}

func appendPair(b []byte, u, v int64) []byte {
	b = strconv.AppendInt(b, u, 10)
	b = append(b, ',', ' ')
	b = strconv.AppendInt(b, v, 10)
	return append(b, '\n')
}

// builder holds one graph's sorted adjacency lists, reused between graphs.
type builder struct {
	adj  [][]int32
	bits []uint64
}

func (b *builder) reset(n int) {
	if cap(b.adj) < n {
		b.adj = make([][]int32, n)
	}
	b.adj = b.adj[:n]
	for i := range b.adj {
		b.adj[i] = b.adj[i][:0]
	}
}

func (b *builder) fromBits(n int) {
	b.reset(n)
	for u := 0; u < n; u++ {
		for v := 0; v < n; v++ {
			if p := u*n + v; b.bits[p>>6]&(1<<(p&63)) != 0 {
				b.adj[u] = append(b.adj[u], int32(v))
			}
		}
	}
}

func (b *builder) setBit(n, u, v int, on bool) bool {
	p, q := u*n+v, v*n+u
	was := b.bits[p>>6]&(1<<(p&63)) != 0
	if on {
		b.bits[p>>6] |= 1 << (p & 63)
		b.bits[q>>6] |= 1 << (q & 63)
	} else {
		b.bits[p>>6] &^= 1 << (p & 63)
		b.bits[q>>6] &^= 1 << (q & 63)
	}
	return was
}

// dense draws a connected graph with exactly m edges: a random spanning tree
// plus random pairs, or, when m is over half of all pairs, the complete graph
// minus random non-tree pairs.
func (b *builder) dense(r *rand.Rand, n, m int) {
	words := (n*n + 63) / 64
	b.bits = slices.Grow(b.bits[:0], words)[:words]
	clear(b.bits)
	perm := r.Perm(n)
	tree := make([][2]int, 0, n-1)
	for i := 1; i < n; i++ {
		u, v := perm[i], perm[r.IntN(i)]
		tree = append(tree, [2]int{u, v})
	}
	all := n * (n - 1) / 2
	if m <= all/2 {
		for _, e := range tree {
			b.setBit(n, e[0], e[1], true)
		}
		for have := n - 1; have < m; {
			u, v := r.IntN(n), r.IntN(n)
			if u != v && !b.setBit(n, u, v, true) {
				have++
			}
		}
	} else {
		for u := 0; u < n; u++ {
			for v := u + 1; v < n; v++ {
				b.setBit(n, u, v, true)
			}
		}
		keep := make([]uint64, len(b.bits))
		for _, e := range tree {
			p, q := e[0]*n+e[1], e[1]*n+e[0]
			keep[p>>6] |= 1 << (p & 63)
			keep[q>>6] |= 1 << (q & 63)
		}
		for have := all; have > m; {
			u, v := r.IntN(n), r.IntN(n)
			if p := u*n + v; u != v && keep[p>>6]&(1<<(p&63)) == 0 && b.setBit(n, u, v, false) {
				have--
			}
		}
	}
	b.fromBits(n)
}

// thread draws a tree by attachment (to the root with high probability when
// star-like, else in proportion to degree) plus m−(n−1) random cross edges.
func (b *builder) thread(r *rand.Rand, n, m int, starLike bool) {
	b.reset(n)
	ends := make([]int32, 0, 2*m) // endpoint list: degree-proportional draws
	seen := make(map[uint64]struct{}, m)
	add := func(u, v int32) bool {
		if u == v {
			return false
		}
		k := uint64(min(u, v))<<32 | uint64(max(u, v))
		if _, ok := seen[k]; ok {
			return false
		}
		seen[k] = struct{}{}
		b.adj[u] = append(b.adj[u], v)
		b.adj[v] = append(b.adj[v], u)
		ends = append(ends, u, v)
		return true
	}
	for i := 1; i < n; i++ {
		var p int32
		switch {
		case starLike && r.Float64() < 0.7:
			p = 0
		case len(ends) > 0 && r.Float64() < 0.8:
			p = ends[r.IntN(len(ends))]
		default:
			p = int32(r.IntN(i))
		}
		add(int32(i), p)
	}
	for have := n - 1; have < m; {
		if add(int32(r.IntN(n)), ends[r.IntN(len(ends))]) {
			have++
		}
	}
	for u := range b.adj {
		slices.Sort(b.adj[u])
	}
}

// powerLaw draws a Chung–Lu graph: endpoints chosen with probability
// proportional to w_i = (i + i0)^(-1/(γ−1)), γ = 2.3, duplicates and loops
// rejected, exactly m edges.
func (b *builder) powerLaw(r *rand.Rand, n, m int) {
	cdf := make([]float64, n)
	var acc float64
	for i := range cdf {
		acc += math.Pow(float64(i)+10, -1/1.3)
		cdf[i] = acc
	}
	draw := func() int { i, _ := slices.BinarySearch(cdf, r.Float64()*acc); return min(i, n-1) }
	keys := make([]uint64, 0, m+m/8)
	for len(keys) < m {
		need := m - len(keys)
		for range need + need/16 + 64 {
			u, v := draw(), draw()
			if u != v {
				keys = append(keys, uint64(min(u, v))<<32|uint64(max(u, v)))
			}
		}
		slices.Sort(keys)
		keys = slices.Compact(keys)
	}
	// Drop the surplus at random, then rebuild the adjacency.
	for len(keys) > m {
		i := r.IntN(len(keys))
		keys[i] = keys[len(keys)-1]
		keys = keys[:len(keys)-1]
	}
	slices.Sort(keys)
	b.reset(n)
	for _, k := range keys {
		u, v := int32(k>>32), int32(k)
		b.adj[u] = append(b.adj[u], v)
		b.adj[v] = append(b.adj[v], u)
	}
	for u := range b.adj {
		slices.Sort(b.adj[u])
	}
}

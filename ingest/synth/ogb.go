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

	"github.com/klauspost/compress/gzip"
)

// MolSpec describes a synthetic molecule set written as an OGB
// graph-property folder in the csv.gz layout (what every OGB download
// ships): tree-like graphs with a few rings, OGB's nine atom and three bond
// feature columns with OGB's vocabulary sizes and skewed code frequencies,
// and Tasks binary targets with a share missing. Not chemistry: a stand-in
// of the right shape for benchmarks and tests.
type MolSpec struct {
	Name      string
	Graphs    int
	MeanNodes float64 // mean atoms a molecule (a log-normal, 2..MaxNodes)
	MaxNodes  int
	// Rings is the mean count of ring closures drawn beyond a spanning
	// tree; those that would not fit (past the last atom, a fifth bond)
	// are skipped, so bonds average atoms − 1 + about 0.7·Rings.
	Rings    float64
	Tasks    int
	Missing  float64 // share of labels missing (an empty field)
	Positive float64 // share of present labels that are 1
}

// LikeOGB returns the spec shaped like an OGB molecule set: ogbg-molpcba
// (437,929 molecules, about 26.0 atoms and 28.1 bonds each, 128 binary
// tasks, most labels missing, few positive) or ogbg-molhiv (41,127
// molecules, 25.5 atoms, 27.5 bonds, one task, 3.5% positive).
func LikeOGB(name string) (MolSpec, bool) {
	switch strings.ToLower(name) {
	case "ogbg-molpcba":
		return MolSpec{Name: "ogbg_molpcba", Graphs: 437929, MeanNodes: 26.0, MaxNodes: 332, Rings: 4.4,
			Tasks: 128, Missing: 0.6, Positive: 0.02}, true
	case "ogbg-molhiv":
		return MolSpec{Name: "ogbg_molhiv", Graphs: 41127, MeanNodes: 25.5, MaxNodes: 222, Rings: 4.2,
			Tasks: 1, Missing: 0, Positive: 0.035}, true
	}
	return MolSpec{}, false
}

// WriteOGB generates the set into the folder out (raw/*.csv.gz and
// split/scaffold/*.csv.gz, an 80/10/10 split), written under a temporary
// name and renamed when complete. The same (spec, seed) writes the same
// bytes. Each file is compressed on a goroutine of its own.
func WriteOGB(ctx context.Context, s MolSpec, seed uint64, out string, force bool) (Stats, error) {
	return writeFolder(out, force, atLeastOne(s.Graphs), func(dir string) (Stats, error) { return writeMolecules(ctx, s, seed, dir) })
}

// gzFile is one csv.gz file written by its own goroutine: buf fills on
// the generator's side and is handed over whole.
type gzFile struct {
	buf  []byte
	ch   chan []byte
	done chan error
}

const gzChunk = 1 << 20

func newGzFile(path string) (*gzFile, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	g := &gzFile{ch: make(chan []byte, 4), done: make(chan error, 1)}
	go func() {
		bw := bufio.NewWriterSize(f, 1<<20)
		zw := gzip.NewWriter(bw)
		var werr error
		for b := range g.ch {
			if werr == nil {
				_, werr = zw.Write(b)
			}
		}
		for _, step := range []func() error{zw.Close, bw.Flush, f.Sync, f.Close} {
			if err := step(); werr == nil {
				werr = err
			}
		}
		g.done <- werr
	}()
	return g, nil
}

func (g *gzFile) flush(force bool) {
	if len(g.buf) >= gzChunk || (force && len(g.buf) > 0) {
		g.ch <- g.buf
		g.buf = make([]byte, 0, gzChunk+4096)
	}
}

func (g *gzFile) close() error {
	g.flush(true)
	close(g.ch)
	return <-g.done
}

func writeMolecules(ctx context.Context, s MolSpec, seed uint64, dir string) (st Stats, err error) {
	names := []string{"edge", "edge-feat", "node-feat", "num-node-list", "num-edge-list", "graph-label"}
	files := make([]*gzFile, len(names))
	for i, n := range names {
		if files[i], err = newGzFile(filepath.Join(dir, "raw", n+".csv.gz")); err != nil {
			for _, f := range files[:i] {
				f.close()
			}
			return st, err
		}
	}
	defer func() {
		for _, f := range files {
			if cerr := f.close(); err == nil {
				err = cerr
			}
		}
	}()
	edgeF, edgeFeatF, nodeFeatF, nodeCountF, edgeCountF, labelF := files[0], files[1], files[2], files[3], files[4], files[5]
	rng := rand.New(rand.NewPCG(seed, 0x6f67626d6f6c)) // "ogbmol": apart from the TU generator's stream
	mu := math.Log(s.MeanNodes) - 0.35*0.35/2
	var (
		parent []int32
		deg    []int32
		edges  [][2]int32
	)
	for gi := range s.Graphs {
		if gi&4095 == 0 && ctx.Err() != nil {
			return st, ctx.Err()
		}
		n := int(math.Round(math.Exp(mu + 0.35*rng.NormFloat64())))
		n = min(max(n, 2), s.MaxNodes)
		// A spanning tree, chain-like (a parent among the last four atoms),
		// then rings closing six-cycles where the tree allows.
		parent, deg, edges = parent[:0], deg[:0], edges[:0]
		for range n {
			deg = append(deg, 0)
		}
		for v := 1; v < n; v++ {
			p := v - 1
			if rng.Float64() < 0.3 {
				p = max(0, v-1-rng.IntN(4))
			}
			edges = append(edges, [2]int32{int32(p), int32(v)})
			deg[p]++
			deg[v]++
		}
		rings := poisson(rng, s.Rings)
		tree := len(edges)
		for range rings {
			u := rng.IntN(n)
			v := u + 5
			if v >= n || deg[u] >= 4 || deg[v] >= 4 || slices.Contains(edges[tree:], [2]int32{int32(u), int32(v)}) {
				continue
			}
			edges = append(edges, [2]int32{int32(u), int32(v)})
			deg[u]++
			deg[v]++
		}
		for _, e := range edges {
			edgeF.buf = appendRow(edgeF.buf, int64(e[0]), int64(e[1]))
			edgeFeatF.buf = appendRow(edgeFeatF.buf, pick(rng, bondTypes), 0, int64(rng.IntN(2)))
		}
		for v := range n {
			nodeFeatF.buf = appendRow(nodeFeatF.buf, pick(rng, atomNums), int64(rng.IntN(10)/9), int64(min(deg[v], 11)),
				5, int64(rng.IntN(4)), 0, int64(1+rng.IntN(3)), int64(rng.IntN(2)), int64(rng.IntN(2)))
		}
		nodeCountF.buf = appendRow(nodeCountF.buf, int64(n))
		edgeCountF.buf = appendRow(edgeCountF.buf, int64(len(edges)))
		for t := range s.Tasks {
			if t > 0 {
				labelF.buf = append(labelF.buf, ',')
			}
			switch r := rng.Float64(); {
			case r < s.Missing:
			case r < s.Missing+(1-s.Missing)*s.Positive:
				labelF.buf = append(labelF.buf, '1')
			default:
				labelF.buf = append(labelF.buf, '0')
			}
		}
		labelF.buf = append(labelF.buf, '\n')
		for _, f := range files {
			f.flush(false)
		}
		st.Graphs++
		st.Nodes += int64(n)
		st.Edges += int64(len(edges))
	}
	// The scaffold split: 80/10/10 of a seeded permutation.
	if err := writeSplit(dir, "scaffold", rng.Perm(s.Graphs)); err != nil {
		return st, err
	}
	return st, writeReadme(dir, fmt.Sprintf("Synthetic %s-shaped OGB graph-property folder written by augloader's shardconv synth.\n"+
		"Not real molecules. graphs=%d atoms=%d bonds=%d tasks=%d missing=%.2f positive=%.3f\n",
		s.Name, st.Graphs, st.Nodes, st.Edges, s.Tasks, s.Missing, s.Positive))
}

// writeSplit writes split/NAME/{train,valid,test}.csv.gz: the first 80%,
// the next 10% and the last 10% of perm.
func writeSplit(dir, name string, perm []int) error {
	n := len(perm)
	cut1, cut2 := n*8/10, n*9/10
	for _, part := range []struct {
		name string
		ids  []int
	}{{"train", perm[:cut1]}, {"valid", perm[cut1:cut2]}, {"test", perm[cut2:]}} {
		f, err := newGzFile(filepath.Join(dir, "split", name, part.name+".csv.gz"))
		if err != nil {
			return err
		}
		for _, id := range part.ids {
			f.buf = appendRow(f.buf, int64(id))
			f.flush(false)
		}
		if err := f.close(); err != nil {
			return err
		}
	}
	return nil
}

// writeReadme writes README.txt, and RELEASE_v1.txt: what an OGB download
// carries beside its files (OGB's loaders ask whether to update a folder
// without it).
func writeReadme(dir, readme string) error {
	if err := os.WriteFile(filepath.Join(dir, "README.txt"), []byte(readme), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "RELEASE_v1.txt"), []byte("synthetic\n"), 0o644)
}

// Skewed code frequencies (code, weight): carbon, nitrogen, oxygen, ...;
// single, double, aromatic bonds. Every column's codes stay within OGB's
// vocabularies (ogb.utils.features: atoms 119, 5, 12, 12, 10, 6, 6, 2, 2;
// bonds 5, 6, 2).
var (
	atomNums  = [][2]float64{{5, 0.72}, {6, 0.11}, {7, 0.12}, {15, 0.02}, {8, 0.015}, {16, 0.015}}
	bondTypes = [][2]float64{{0, 0.6}, {1, 0.1}, {3, 0.3}}
)

func pick(rng *rand.Rand, w [][2]float64) int64 {
	r := rng.Float64()
	for _, cw := range w {
		if r < cw[1] {
			return int64(cw[0])
		}
		r -= cw[1]
	}
	return int64(w[0][0])
}

func poisson(rng *rand.Rand, lambda float64) int {
	l, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

func appendRow(b []byte, vals ...int64) []byte {
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, v, 10)
	}
	return append(b, '\n')
}

// Scaled keeps the per-molecule distributions with n molecules.
func (s MolSpec) Scaled(n int) MolSpec {
	s.Graphs = n
	return s
}

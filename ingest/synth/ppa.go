package synth

import (
	"archive/zip"
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/augloader/augloader/internal/iox"
)

// PPASpec describes a synthetic set shaped like ogbg-ppa, written as an
// OGB graph-property folder in DatasetSaver's npz layout (binary: a
// multi-GB set writes at disk speed, where csv.gz text would take hours):
// graphs of MeanNodes nodes (50..300) with about MeanEdges undirected edges
// each, EdgeDim float edge features (association scores in [0, 1], most
// 0), no node features, and one of Classes classes. Not biology: a stand-in
// of the right shape for the larger-than-memory benchmarks.
type PPASpec struct {
	Name                 string
	Graphs               int
	MeanNodes, MeanEdges float64
	EdgeDim, Classes     int
}

// LikePPA returns the spec shaped like ogbg-ppa (158,100 graphs, about
// 243 nodes and 2,266 edges each, 7 float edge features, 37 classes).
func LikePPA(name string) (PPASpec, bool) {
	if strings.ToLower(name) != "ogbg-ppa" {
		return PPASpec{}, false
	}
	return PPASpec{Name: "ogbg_ppa", Graphs: 158100, MeanNodes: 243.2, MeanEdges: 2266.1, EdgeDim: 7, Classes: 37}, true
}

// Scaled returns the spec with n graphs.
func (s PPASpec) Scaled(n int) PPASpec {
	if n > 0 {
		s.Graphs = n
	}
	return s
}

// ppaGraph draws graph gi's node and edge counts (from its own stream,
// so a later pass draws its edges without the earlier ones).
func (s PPASpec) ppaGraph(seed uint64, gi int) (n, m int, rng *rand.Rand) {
	rng = rand.New(rand.NewPCG(seed, 0x707061<<32|uint64(gi))) // "ppa"
	n = int(math.Round(math.Exp(math.Log(s.MeanNodes) - 0.3*0.3/2 + 0.3*rng.NormFloat64())))
	n = min(max(n, 50), 300)
	dens := s.MeanEdges / (s.MeanNodes * (s.MeanNodes - 1) / 2)
	m = int(math.Round(float64(n*(n-1)/2) * dens * math.Exp(0.25*rng.NormFloat64()-0.25*0.25/2)))
	m = min(max(m, n-1), n*(n-1)/2)
	return n, m, rng
}

// WritePPA generates the set into out (raw/data.npz, raw/graph-label.npz,
// split/species/{train,valid,test}.csv.gz, an 80/10/10 split), under a
// temporary name renamed when complete; memory stays at a few arrays of one
// int per graph whatever the size. The same (spec, seed) writes the same bytes.
func WritePPA(ctx context.Context, s PPASpec, seed uint64, out string, force bool) (Stats, error) {
	return writeFolder(out, force, atLeastOne(s.Graphs), func(dir string) (Stats, error) { return writePPA(ctx, s, seed, dir) })
}

func writePPA(ctx context.Context, s PPASpec, seed uint64, dir string) (Stats, error) {
	st := Stats{Graphs: int64(s.Graphs)}
	nodes := make([]int64, s.Graphs)
	edges := make([]int64, s.Graphs)
	var total int64
	for gi := range s.Graphs {
		n, m, _ := s.ppaGraph(seed, gi)
		nodes[gi], edges[gi] = int64(n), int64(m)
		total += int64(m)
		st.Nodes += int64(n)
	}
	st.Edges = total
	if err := os.MkdirAll(filepath.Join(dir, "raw"), 0o755); err != nil {
		return st, err
	}
	z, err := newNpz(filepath.Join(dir, "raw", "data.npz"))
	if err != nil {
		return st, err
	}
	defer z.abort()
	if err := z.ints("num_nodes_list", nodes); err != nil {
		return st, err
	}
	if err := z.ints("num_edges_list", edges); err != nil {
		return st, err
	}
	// edge_index (2, E) in Fortran order: the pairs (u, v) one after the
	// other, as smiles2graph's transpose saves it; each edge once, u < v.
	w, err := z.array("edge_index", "<i8", true, 2, total)
	if err != nil {
		return st, err
	}
	var seen []uint64
	var pair [16]byte
	for gi := range s.Graphs {
		if gi&1023 == 0 && ctx.Err() != nil {
			return st, ctx.Err()
		}
		n, m, rng := s.ppaGraph(seed, gi)
		words := (n*n + 63) / 64
		if cap(seen) < words {
			seen = make([]uint64, words)
		}
		seen = seen[:words]
		clear(seen)
		for k := 0; k < m; {
			u, v := rng.IntN(n), rng.IntN(n)
			if u == v {
				continue
			}
			u, v = min(u, v), max(u, v)
			bit := u*n + v
			if seen[bit/64]&(1<<(bit%64)) != 0 {
				continue
			}
			seen[bit/64] |= 1 << (bit % 64)
			binary.LittleEndian.PutUint64(pair[0:], uint64(u))
			binary.LittleEndian.PutUint64(pair[8:], uint64(v))
			if _, err := w.Write(pair[:]); err != nil {
				return st, err
			}
			k++
		}
	}
	// edge_feat (E, EdgeDim) float32: each score 0 with probability 0.7,
	// else uniform in (0, 1] to three decimals.
	if w, err = z.array("edge_feat", "<f4", false, total, int64(s.EdgeDim)); err != nil {
		return st, err
	}
	frng := rand.New(rand.NewPCG(seed, 0x70706166)) // "ppaf"
	var f [4]byte
	for range total * int64(s.EdgeDim) {
		v := float32(0)
		if frng.Float64() < 0.3 {
			v = float32(math.Ceil(frng.Float64()*1000) / 1000)
		}
		binary.LittleEndian.PutUint32(f[:], math.Float32bits(v))
		if _, err := w.Write(f[:]); err != nil {
			return st, err
		}
	}
	if err := z.close(); err != nil {
		return st, err
	}
	lz, err := newNpz(filepath.Join(dir, "raw", "graph-label.npz"))
	if err != nil {
		return st, err
	}
	defer lz.abort()
	lrng := rand.New(rand.NewPCG(seed, 0x7070616c)) // "ppal"
	labels := make([]int64, s.Graphs)
	for i := range labels {
		labels[i] = int64(lrng.IntN(s.Classes))
	}
	if w, err = lz.array("graph_label", "<i8", false, int64(s.Graphs), 1); err != nil {
		return st, err
	}
	for _, l := range labels {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(l))
		if _, err := w.Write(b[:]); err != nil {
			return st, err
		}
	}
	if err := lz.close(); err != nil {
		return st, err
	}
	if err := writeSplit(dir, "species", lrng.Perm(s.Graphs)); err != nil {
		return st, err
	}
	return st, writeReadme(dir, fmt.Sprintf("Synthetic %s-shaped OGB graph-property folder (npz layout) written by augloader's shardconv synth.\n"+
		"Not real protein graphs. graphs=%d nodes=%d edges=%d edge_dim=%d classes=%d\n", s.Name, st.Graphs, st.Nodes, st.Edges, s.EdgeDim, s.Classes))
}

// npz writes a zip of .npy arrays, stored (as numpy.savez does), each
// streamed: its shape is given before its elements.
type npz struct {
	f   *os.File
	bw  *bufio.Writer
	zw  *zip.Writer
	cur *bufio.Writer // the array being written
}

// flushCur ends the array being written.
func (z *npz) flushCur() error {
	if z.cur == nil {
		return nil
	}
	err := z.cur.Flush()
	z.cur = nil
	return err
}

func newNpz(path string) (*npz, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	return &npz{f: f, bw: bw, zw: zip.NewWriter(bw)}, nil
}

// array starts array name of numpy type descr and shape (rows, cols); the
// caller writes its elements in the order the layout says.
func (z *npz) array(name, descr string, fortran bool, rows, cols int64) (*bufio.Writer, error) {
	if err := z.flushCur(); err != nil {
		return nil, err
	}
	w, err := z.zw.CreateHeader(&zip.FileHeader{Name: name + ".npy", Method: zip.Store})
	if err != nil {
		return nil, err
	}
	order := "False"
	if fortran {
		order = "True"
	}
	shape := fmt.Sprintf("(%d,)", rows)
	if cols > 0 {
		shape = fmt.Sprintf("(%d, %d)", rows, cols)
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr, order, shape)
	pad := 64 - (10+len(dict)+1)%64
	if pad == 64 {
		pad = 0
	}
	hdr := dict + strings.Repeat(" ", pad) + "\n"
	var pre [10]byte
	copy(pre[:], "\x93NUMPY\x01\x00")
	binary.LittleEndian.PutUint16(pre[8:], uint16(len(hdr)))
	if _, err := w.Write(pre[:]); err != nil {
		return nil, err
	}
	if _, err := w.Write([]byte(hdr)); err != nil {
		return nil, err
	}
	z.cur = bufio.NewWriterSize(w, 256<<10)
	return z.cur, nil
}

// ints writes a one-dimensional int64 array.
func (z *npz) ints(name string, vals []int64) error {
	w, err := z.array(name, "<i8", false, int64(len(vals)), 0)
	if err != nil {
		return err
	}
	var b [8]byte
	for _, v := range vals {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		if _, err := w.Write(b[:]); err != nil {
			return err
		}
	}
	return z.flushCur()
}

func (z *npz) close() error {
	err := iox.SyncClose(z.f, z.flushCur, z.zw.Close, z.bw.Flush)
	z.f = nil
	return err
}

func (z *npz) abort() {
	if z.f != nil {
		z.f.Close()
	}
}

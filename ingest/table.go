package ingest

import (
	"slices"
	"strconv"

	"github.com/augloader/augloader/shard"
)

// Table is what a text-format reader (TU, GIN) loads before it streams the
// edges, O(nodes): the graphs' sizes and labels and the nodes' features.
// An Emitter builds each canonical graph from it and the graph's entries.
type Table struct {
	Name      string
	NumGraphs int
	NumNodes  int64
	// GraphStart[g] is the first global (0-based) node of graph g; len G+1.
	GraphStart []int64
	// Labels[g] is graph g's class, 0..Classes-1; LabelMap[c] its raw value.
	Labels   []int32
	LabelMap []string

	FeatureKind shard.FeatureKind
	FeatureDim  int
	LabelMin    int64     // raw node label of code 0 (FeatureLabels)
	Codes       []int32   // per global node (FeatureLabels); nil for degree
	X           []float32 // NumNodes*FeatureDim (FeatureAttributes)

	HasEdgeLabels bool
	EdgeLabelMin  int64
	EdgeLabelDim  int
}

// Meta describes the table's dataset.
func (t *Table) Meta() Meta {
	m := Meta{Name: t.Name, Graphs: t.NumGraphs, Nodes: t.NumNodes, LabelMap: t.LabelMap,
		FeatureKind: t.FeatureKind, FeatureDim: t.FeatureDim, LabelMin: t.LabelMin}
	if t.HasEdgeLabels {
		m.EdgeLabelDim = t.EdgeLabelDim
	}
	return m
}

// SetGraphLabels remaps raw graph labels to classes 0..C-1 in sorted order
// of the raw values (PyG's TUDataset convention).
func (t *Table) SetGraphLabels(raw []int64) {
	distinct := slices.Clone(raw)
	slices.Sort(distinct)
	distinct = slices.Compact(distinct)
	t.LabelMap = make([]string, len(distinct))
	for i, v := range distinct {
		t.LabelMap[i] = strconv.FormatInt(v, 10)
	}
	t.Labels = make([]int32, len(raw))
	for i, v := range raw {
		c, _ := slices.BinarySearch(distinct, v)
		t.Labels[i] = int32(c)
	}
}

// SetNodeLabels makes each node's raw label its one-hot code (raw − min,
// PyG's convention).
func (t *Table) SetNodeLabels(format, file string, raw []int64) error {
	lo, hi := slices.Min(raw), slices.Max(raw)
	if hi-lo >= 1<<24 {
		return Errorf(format, file, 0, 0, "node labels span %d..%d: too wide for a one-hot feature", lo, hi)
	}
	t.FeatureKind, t.FeatureDim, t.LabelMin = shard.FeatureLabels, int(hi-lo+1), lo
	t.Codes = make([]int32, len(raw))
	for i, v := range raw {
		t.Codes[i] = int32(v - lo)
	}
	return nil
}

// GraphCodes returns the feature codes of graph g (FeatureLabels), a slice
// of the dataset's array.
func (t *Table) GraphCodes(g int) []int32 {
	if t.Codes == nil {
		return nil
	}
	return t.Codes[t.GraphStart[g]:t.GraphStart[g+1]]
}

// GraphX returns the attribute rows of graph g (FeatureAttributes).
func (t *Table) GraphX(g int) []float32 {
	if t.X == nil {
		return nil
	}
	return t.X[t.GraphStart[g]*int64(t.FeatureDim) : t.GraphStart[g+1]*int64(t.FeatureDim)]
}

// Emitter turns a table's graphs' raw entries into canonical graphs and
// hands them to Fn, counting in St what it dropped.
type Emitter struct {
	T  *Table
	Fn func(*shard.Graph) error
	St *Stats
	c  Canon
	g  shard.Graph
}

// Emit builds graph g from its entries (and their edge labels) and calls Fn.
func (e *Emitter) Emit(g int, keys []Entry, labels []int32) error {
	n := e.T.GraphStart[g+1] - e.T.GraphStart[g]
	edges, elab := e.c.Build(int32(n), keys, labels, e.St)
	e.g = shard.Graph{
		ID: int64(g), Label: e.T.Labels[g], NumNodes: int32(n),
		Edges: edges, Codes: e.T.GraphCodes(g), X: e.T.GraphX(g), EdgeLabels: elab,
	}
	return e.Fn(&e.g)
}

// EmitBuffered groups all entries by graph with a stable counting sort.
func (e *Emitter) EmitBuffered(gs []int32, keys []Entry, labels []int32, hasLabels bool) error {
	ng := e.T.NumGraphs
	start := make([]int, ng+1)
	for _, g := range gs {
		start[g+1]++
	}
	for g := 0; g < ng; g++ {
		start[g+1] += start[g]
	}
	sk := make([]Entry, len(keys))
	var sl []int32
	if hasLabels {
		sl = make([]int32, len(labels))
	}
	pos := append([]int(nil), start[:ng]...)
	for i, g := range gs {
		sk[pos[g]] = keys[i]
		if hasLabels {
			sl[pos[g]] = labels[i]
		}
		pos[g]++
	}
	for g := 0; g < ng; g++ {
		var lab []int32
		if hasLabels {
			lab = sl[start[g]:start[g+1]]
		}
		if err := e.Emit(g, sk[start[g]:start[g+1]], lab); err != nil {
			return err
		}
	}
	return nil
}

package shard

// What reading a page checks: the schema, offsets, edges in range,
// codes in their vocabularies, and the sizes the manifest promised.

import (
	"fmt"
	"math"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// expectedSchema is the schema the manifest's shards must have.
func expectedSchema(man *Manifest) *arrow.Schema {
	if man.FormatVersion >= FormatV4 {
		return SchemaV4(man.Dataset, man.Structures)
	}
	if man.FormatVersion >= FormatV3 {
		return SchemaV3(man.Dataset, man.NodeFeatures, man.EdgeFeatures, man.Task)
	}
	return Schema(man.Dataset, man.Features.Kind, man.Features.Dim, man.HasEdgeLabels)
}

func checkSchema(s *arrow.Schema, man *Manifest) error {
	want := expectedSchema(man)
	if !s.Equal(want) {
		return fmt.Errorf("columns %v, want %v", s, want)
	}
	md := s.Metadata()
	if v := md.FindKey(MetaFormatVersion); v < 0 || md.Values()[v] != strconv.Itoa(int(man.FormatVersion)) {
		return fmt.Errorf("metadata %s missing or not %d", MetaFormatVersion, man.FormatVersion)
	}
	kvs := [][2]string{{MetaFeatureKind, string(man.Features.Kind)}, {MetaFeatureDim, strconv.Itoa(man.Features.Dim)}}
	if man.FormatVersion >= FormatV3 {
		kvs = kvs[:1]
	}
	for _, kv := range kvs {
		if v := md.FindKey(kv[0]); v < 0 || md.Values()[v] != kv[1] {
			return fmt.Errorf("metadata %s missing or not %q", kv[0], kv[1])
		}
	}
	return nil
}

// codesOf views a list column's values as stored codes.
func codesOf(l *array.List) Codes {
	switch v := l.ListValues().(type) {
	case *array.Uint8:
		return Codes{U8: nonNil(v.Uint8Values())}
	case *array.Uint16:
		return Codes{U16: nonNil(v.Uint16Values())}
	case *array.Int32:
		return Codes{I32: nonNil(v.Int32Values())}
	}
	return Codes{}
}

// nonNil keeps an empty column's codes non-nil (which one is set says the
// width).
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// viewBatchV3 takes typed slices of a format 3 record batch, by column
// name (schema already checked).
func viewBatchV3(rec arrow.RecordBatch) batch {
	var b batch
	col := func(name string) arrow.Array {
		if idx := rec.Schema().FieldIndices(name); len(idx) == 1 {
			return rec.Column(idx[0])
		}
		return nil
	}
	b.ids = col(ColGraphID).(*array.Int64).Int64Values()
	b.numNodes = col(ColNumNodes).(*array.Int32).Int32Values()
	el := col(ColEdges).(*array.List)
	b.edgeOff, b.edges = el.Offsets(), el.ListValues().(*array.Int32).Int32Values()
	if c := col(ColLabel); c != nil {
		b.labels = c.(*array.Int32).Int32Values()
	}
	if c := col(ColTargets); c != nil {
		b.tgtOff, b.targets = floatList(c)
	}
	if c := col(ColXCat); c != nil {
		l := c.(*array.List)
		b.ncOff, b.nodeCat = l.Offsets(), codesOf(l)
	}
	if c := col(ColX); c != nil {
		b.featOff, b.x = floatList(c)
	}
	if c := col(ColEdgeCat); c != nil {
		l := c.(*array.List)
		b.ecOff, b.edgeCat = l.Offsets(), codesOf(l)
	}
	if c := col(ColEdgeX); c != nil {
		b.exOff, b.edgeX = floatList(c)
	}
	return b
}

// floatList is a list<float32> column's offsets and values.
func floatList(c arrow.Array) ([]int32, []float32) {
	l := c.(*array.List)
	return l.Offsets(), l.ListValues().(*array.Float32).Float32Values()
}

// checkBatchV3 is checkBatch for format 3: every list's length against
// the graph's nodes and edges, codes within their column's vocabulary,
// targets finite or NaN.
func checkBatchV3(b *batch, man *Manifest, first, want int64, full bool) error {
	n := len(b.ids)
	if int64(n) != want {
		return fmt.Errorf("%d rows, manifest says %d", n, want)
	}
	if len(b.numNodes) != n || (b.labels != nil && len(b.labels) != n) {
		return fmt.Errorf("column lengths differ")
	}
	if err := checkOffsets(ColEdges, b.edgeOff, n, len(b.edges)); err != nil {
		return err
	}
	type list struct {
		name string
		off  []int32
		vals int
		per  int // values per node (nodes) or per edge (!nodes) or per graph
		unit string
	}
	nc, ec := man.NodeFeatures.Cols(), man.EdgeFeatures.Cols()
	lists := []list{
		{ColTargets, b.tgtOff, len(b.targets), man.Task.Targets, "graph"},
		{ColXCat, b.ncOff, b.nodeCat.Len(), nc, "node"},
		{ColX, b.featOff, len(b.x), man.NodeFeatures.DenseDim(), "node"},
		{ColEdgeCat, b.ecOff, b.edgeCat.Len(), ec, "edge"},
		{ColEdgeX, b.exOff, len(b.edgeX), man.EdgeFeatures.DenseDim(), "edge"},
	}
	for _, l := range lists {
		if l.off != nil {
			if err := checkOffsets(l.name, l.off, n, l.vals); err != nil {
				return err
			}
		}
	}
	nv, ev := man.NodeFeatures.Vocabs(), man.EdgeFeatures.Vocabs()
	for r := 0; r < n; r++ {
		id := man.IDAt(first + int64(r))
		if b.ids[r] != id {
			return fmt.Errorf("row %d: graph_id %d, want %d", r, b.ids[r], id)
		}
		nn := b.numNodes[r]
		if nn < 0 {
			return fmt.Errorf("graph %d: num_nodes %d", id, nn)
		}
		if b.labels != nil && (b.labels[r] < 0 || int(b.labels[r]) >= man.Classes) {
			return fmt.Errorf("graph %d: label %d out of range 0..%d", id, b.labels[r], man.Classes-1)
		}
		e := b.edges[b.edgeOff[r]:b.edgeOff[r+1]]
		if err := checkEdges(id, e, nn, full); err != nil {
			return err
		}
		ne := int64(len(e) / 2)
		for _, l := range lists {
			if l.off == nil {
				continue
			}
			count := int64(1)
			switch l.unit {
			case "node":
				count = int64(nn)
			case "edge":
				count = ne
			}
			if got := int64(l.off[r+1] - l.off[r]); got != count*int64(l.per) {
				return fmt.Errorf("graph %d: %d %s values for %d %ss × %d", id, got, l.name, count, l.unit, l.per)
			}
		}
		for _, c := range []struct {
			codes Codes
			off   []int32
			vocab []int32
			name  string
		}{{b.nodeCat, b.ncOff, nv, ColXCat}, {b.edgeCat, b.ecOff, ev, ColEdgeCat}} {
			if c.off == nil || len(c.vocab) == 0 {
				continue
			}
			f := len(c.vocab)
			for k := c.off[r]; k < c.off[r+1]; k++ {
				if v := c.codes.At(int(k)); v < 0 || v >= c.vocab[int(k-c.off[r])%f] {
					return fmt.Errorf("graph %d: %s code %d out of its column's vocabulary %d", id, c.name, v, c.vocab[int(k-c.off[r])%f])
				}
			}
		}
		if b.tgtOff != nil {
			for _, t := range b.targets[b.tgtOff[r]:b.tgtOff[r+1]] {
				if math.IsInf(float64(t), 0) {
					return fmt.Errorf("graph %d: target %g", id, t)
				}
			}
		}
	}
	return nil
}

// checkEdges checks one graph's edge pairs: 0 <= u < v < nn, and with full
// sorted and unique.
func checkEdges(id int64, e []int32, nn int32, full bool) error {
	if len(e)%2 != 0 {
		return fmt.Errorf("graph %d: odd number of edge ids", id)
	}
	for k := 0; k < len(e); k += 2 {
		u, v := e[k], e[k+1]
		if u < 0 || v >= nn || u >= v {
			return fmt.Errorf("graph %d: edge %d (%d, %d) not 0 <= u < v < %d", id, k/2, u, v, nn)
		}
		if full && k > 0 && (e[k-2] > u || (e[k-2] == u && e[k-1] >= v)) {
			return fmt.Errorf("graph %d: edge %d (%d, %d) not after (%d, %d): edges must be sorted and unique", id, k/2, u, v, e[k-2], e[k-1])
		}
	}
	return nil
}

// viewAndCheck views and checks one batch. Once checkBatch passes, every
// later access through Graph is within proven bounds.
func viewAndCheck(rec arrow.RecordBatch, man *Manifest, first, want int64, full bool) (b batch, err error) {
	if man.FormatVersion >= FormatV3 {
		for i := 0; i < int(rec.NumCols()); i++ {
			if rec.Column(i).NullN() != 0 {
				return b, fmt.Errorf("column %s has nulls", rec.ColumnName(i))
			}
		}
		if man.FormatVersion >= FormatV4 {
			b = viewBatchV4(rec)
			return b, checkBatchV4(&b, man, first, want)
		}
		b = viewBatchV3(rec)
		return b, checkBatchV3(&b, man, first, want, full)
	}
	if b, err = viewBatch(rec, man); err != nil {
		return b, err
	}
	return b, checkBatch(&b, man, first, want, full)
}

// viewBatch takes typed slices of a record batch (schema already checked).
func viewBatch(rec arrow.RecordBatch, man *Manifest) (batch, error) {
	var b batch
	for i := 0; i < int(rec.NumCols()); i++ {
		if rec.Column(i).NullN() != 0 {
			return b, fmt.Errorf("column %s has nulls", rec.ColumnName(i))
		}
	}
	b.ids = rec.Column(0).(*array.Int64).Int64Values()
	b.labels = rec.Column(1).(*array.Int32).Int32Values()
	b.numNodes = rec.Column(2).(*array.Int32).Int32Values()
	el := rec.Column(3).(*array.List)
	b.edgeOff, b.edges = el.Offsets(), el.ListValues().(*array.Int32).Int32Values()
	fl := rec.Column(4).(*array.List)
	b.featOff = fl.Offsets()
	if man.Features.Kind.Categorical() {
		b.codes = fl.ListValues().(*array.Int32).Int32Values()
	} else {
		b.x = fl.ListValues().(*array.Float32).Float32Values()
	}
	if man.HasEdgeLabels {
		ll := rec.Column(5).(*array.List)
		b.elOff, b.edgeLabels = ll.Offsets(), ll.ListValues().(*array.Int32).Int32Values()
	}
	return b, nil
}

func checkOffsets(name string, off []int32, n, nvals int) error {
	if len(off) != n+1 || off[0] < 0 || int(off[n]) > nvals {
		return fmt.Errorf("column %s: offsets do not fit %d values", name, nvals)
	}
	for i := 0; i < n; i++ {
		if off[i+1] < off[i] {
			return fmt.Errorf("column %s: offsets decrease at row %d", name, i)
		}
	}
	return nil
}

// checkBatch validates a batch's structure. It is what makes every later
// look-up safe: lengths, id order, and every node id and code in range.
func checkBatch(b *batch, man *Manifest, first, want int64, full bool) error {
	n := len(b.ids)
	if int64(n) != want {
		return fmt.Errorf("%d rows, manifest says %d", n, want)
	}
	if len(b.labels) != n || len(b.numNodes) != n {
		return fmt.Errorf("column lengths differ")
	}
	if err := checkOffsets(ColEdges, b.edgeOff, n, len(b.edges)); err != nil {
		return err
	}
	nfeat := len(b.codes)
	if b.codes == nil {
		nfeat = len(b.x)
	}
	if err := checkOffsets("features", b.featOff, n, nfeat); err != nil {
		return err
	}
	if man.HasEdgeLabels {
		if err := checkOffsets(ColEdgeLabel, b.elOff, n, len(b.edgeLabels)); err != nil {
			return err
		}
	}
	dim := int32(man.Features.Dim)
	for r := 0; r < n; r++ {
		id := man.IDAt(first + int64(r))
		if b.ids[r] != id {
			return fmt.Errorf("row %d: graph_id %d, want %d", r, b.ids[r], id)
		}
		if b.labels[r] < 0 || int(b.labels[r]) >= man.Classes {
			return fmt.Errorf("graph %d: label %d out of range 0..%d", id, b.labels[r], man.Classes-1)
		}
		nn := b.numNodes[r]
		if nn < 0 {
			return fmt.Errorf("graph %d: num_nodes %d", id, nn)
		}
		e := b.edges[b.edgeOff[r]:b.edgeOff[r+1]]
		if len(e)%2 != 0 {
			return fmt.Errorf("graph %d: odd number of edge ids", id)
		}
		for k := 0; k < len(e); k += 2 {
			u, v := e[k], e[k+1]
			if u < 0 || v >= nn || u >= v {
				return fmt.Errorf("graph %d: edge %d (%d, %d) not 0 <= u < v < %d", id, k/2, u, v, nn)
			}
			if full && k > 0 && (e[k-2] > u || (e[k-2] == u && e[k-1] >= v)) {
				return fmt.Errorf("graph %d: edge %d (%d, %d) not after (%d, %d): edges must be sorted and unique", id, k/2, u, v, e[k-2], e[k-1])
			}
		}
		fl := b.featOff[r+1] - b.featOff[r]
		if b.codes != nil {
			if fl != nn {
				return fmt.Errorf("graph %d: %d feature codes for %d nodes", id, fl, nn)
			}
			for _, c := range b.codes[b.featOff[r]:b.featOff[r+1]] {
				if c < 0 || c >= dim {
					return fmt.Errorf("graph %d: feature code %d out of range 0..%d", id, c, dim-1)
				}
			}
		} else if int64(fl) != int64(nn)*int64(dim) {
			return fmt.Errorf("graph %d: %d feature values for %d nodes × dim %d", id, fl, nn, dim)
		}
		if man.HasEdgeLabels {
			if got := b.elOff[r+1] - b.elOff[r]; int(got) != len(e)/2 {
				return fmt.Errorf("graph %d: %d edge labels for %d edges", id, got, len(e)/2)
			}
			for _, c := range b.edgeLabels[b.elOff[r]:b.elOff[r+1]] {
				if c < 0 || int(c) >= man.EdgeLabelDim {
					return fmt.Errorf("graph %d: edge label %d out of range 0..%d", id, c, man.EdgeLabelDim-1)
				}
			}
		}
	}
	return nil
}

// checkSizes compares a shard's graphs, from graph id first on, with the
// graph-size index.
func checkSizes(gs *GraphSizes, first int64, batches []batch, sw *sizesWriter) error {
	id := first
	for bi := range batches {
		b := &batches[bi]
		for row := range b.ids {
			g := Graph{NumNodes: b.numNodes[row], Edges: b.edges[b.edgeOff[row]:b.edgeOff[row+1]]}
			if b.v4 != nil {
				structureOf(&g, b, row) // directed pairs: out-degree
			}
			sw.measure(&g)
			if gs.Nodes[id] != g.NumNodes || int(gs.Edges[id]) != len(g.Edges)/2 || gs.MaxDegree[id] != sw.maxDeg {
				return corrupt(GraphSizesName, fmt.Sprintf("graph %d", id), "%d nodes, %d edges, largest degree %d; its shard has %d, %d, %d",
					gs.Nodes[id], gs.Edges[id], gs.MaxDegree[id], g.NumNodes, len(g.Edges)/2, sw.maxDeg)
			}
			id++
		}
	}
	return nil
}

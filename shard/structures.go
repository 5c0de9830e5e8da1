package shard

// Format 4: 3D atomistic structures (docs/format.md, "Version 4").

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/augloader/augloader/internal/arrowx"
)

// Format 4's columns (besides graph_id, num_nodes — the atoms — and edges,
// the directed neighbour pairs).
const (
	ColShifts    = "shifts"
	ColNumbers   = "numbers"
	ColPositions = "positions"
	ColCell      = "cell"
	ColPBC       = "pbc"
	// ColPropPrefix names a property's column: "prop." + its name.
	ColPropPrefix = "prop."
)

// Structures describes a format 4 folder: the neighbour list its shards
// hold and the properties each structure carries (Manifest.Structures).
type Structures struct {
	// Cutoff (Å) of the stored neighbour list.
	Cutoff float64 `json:"cutoff"`
	// Neighbours is the list's convention: "ase" (ASE, matscipy, vesin,
	// MACE: d < cutoff, coincident atoms kept) or "fairchem" (d ≤ cutoff,
	// d ≥ 1e-8, MaxNeighbors with its tolerance, or Strict).
	Neighbours   string `json:"neighbours"`
	MaxNeighbors int    `json:"max_neighbors,omitempty"`
	Strict       bool   `json:"strict,omitempty"`
	// Units are ASE's, written out: {"length": "Å", "energy": "eV"}.
	Units map[string]string `json:"units"`
	// Elements are the atomic numbers the set holds, sorted (the default
	// z-table a model's one-hot node attributes are taken over).
	Elements []int `json:"elements"`
	// Properties are what structures carry besides positions, numbers,
	// cell and pbc, in column order.
	Properties []Property `json:"properties"`
}

// Property is one named float64 array of every structure: Size values
// per structure (Per "structure") or per atom (Per "atom"); a structure
// without it stores none (Missing counts them).
type Property struct {
	Name    string `json:"name"`
	Per     string `json:"per"`
	Size    int    `json:"size"`
	Missing int64  `json:"missing"`
}

// Per-structure and per-atom properties.
const (
	PerStructure = "structure"
	PerAtom      = "atom"
)

// FeatureStructures is format 4's feature kind: Manifest.Structures says
// what a structure carries.
const FeatureStructures FeatureKind = "structures"

// Units are the units every format 4 folder states.
func Units() map[string]string { return map[string]string{"length": "Å", "energy": "eV"} }

// Prop is the index of property name in the manifest's list, or -1.
func (s *Structures) Prop(name string) int {
	if s == nil {
		return -1
	}
	return slices.IndexFunc(s.Properties, func(p Property) bool { return p.Name == name })
}

func (s *Structures) validate() error {
	fail := func(field, format string, args ...any) error {
		return corrupt(ManifestName, "structures."+field, format, args...)
	}
	if !(s.Cutoff > 0) || math.IsInf(s.Cutoff, 0) {
		return fail("cutoff", "%v is not a positive number of Å", s.Cutoff)
	}
	switch s.Neighbours {
	case "ase":
		if s.MaxNeighbors != 0 || s.Strict {
			return fail("max_neighbors", "only the fairchem convention caps neighbours")
		}
	case "fairchem":
		if s.MaxNeighbors < 0 {
			return fail("max_neighbors", "%d", s.MaxNeighbors)
		}
	default:
		return fail("neighbours", "%q, want ase or fairchem", s.Neighbours)
	}
	if len(s.Units) != 2 || s.Units["length"] != "Å" || s.Units["energy"] != "eV" {
		return fail("units", "%v, want length Å and energy eV", s.Units)
	}
	for i, z := range s.Elements {
		if z < 1 || z > 118 || (i > 0 && z <= s.Elements[i-1]) {
			return fail("elements", "%v: want sorted distinct atomic numbers 1..118", s.Elements)
		}
	}
	seen := map[string]bool{}
	for _, p := range s.Properties {
		if p.Name == "" || strings.ContainsAny(p.Name, "\x00\n") || seen[p.Name] {
			return fail("properties", "name %q empty, twice or with control characters", p.Name)
		}
		seen[p.Name] = true
		if (p.Per != PerStructure && p.Per != PerAtom) || p.Size < 1 || p.Size > 1<<16 || p.Missing < 0 {
			return fail("properties", "%s: per %q, size %d, missing %d", p.Name, p.Per, p.Size, p.Missing)
		}
	}
	return nil
}

// SchemaV4 returns the Arrow schema of format 4: graph_id, num_nodes (the
// atoms), edges (directed pairs i, j), shifts (int8, 3 per edge), numbers
// (uint8, atomic numbers), positions (float64, 3 per atom, Å), cell
// (float64, 9: the rows), pbc (uint8: bit k for axis k), then one
// list<float64> per property, "prop." and its name.
func SchemaV4(dataset string, s *Structures) *arrow.Schema {
	list := func(t arrow.DataType) arrow.DataType { return arrow.ListOfNonNullable(t) }
	f64 := arrow.PrimitiveTypes.Float64
	fields := []arrow.Field{
		{Name: ColGraphID, Type: arrow.PrimitiveTypes.Int64},
		{Name: ColNumNodes, Type: arrow.PrimitiveTypes.Int32},
		{Name: ColEdges, Type: list(arrow.PrimitiveTypes.Int32)},
		{Name: ColShifts, Type: list(arrow.PrimitiveTypes.Int8)},
		{Name: ColNumbers, Type: list(arrow.PrimitiveTypes.Uint8)},
		{Name: ColPositions, Type: list(f64)},
		{Name: ColCell, Type: list(f64)},
		{Name: ColPBC, Type: arrow.PrimitiveTypes.Uint8},
	}
	for _, p := range s.Properties {
		fields = append(fields, arrow.Field{Name: ColPropPrefix + p.Name, Type: list(f64)})
	}
	md := arrow.NewMetadata(
		[]string{MetaFormatVersion, MetaDataset, MetaFeatureKind},
		[]string{fmt.Sprint(int(FormatV4)), dataset, string(FeatureStructures)},
	)
	return arrow.NewSchema(fields, &md)
}

// v4Buf is a format 4 batch's own columns while it is filled.
type v4Buf struct {
	shifts    []int8
	numbers   []uint8
	positions []float64
	cells     []float64
	pbc       []uint8
	shOff     []int32 // shifts: 3 per edge
	atOff     []int32 // numbers: 1 per atom (positions: 3 per atom)
	posOff    []int32
	cellOff   []int32
	props     [][]float64
	propOff   [][]int32
}

func (v *v4Buf) reset(nprops int) {
	v.shifts, v.numbers, v.positions, v.cells, v.pbc = v.shifts[:0], v.numbers[:0], v.positions[:0], v.cells[:0], v.pbc[:0]
	v.shOff, v.atOff = append(v.shOff[:0], 0), append(v.atOff[:0], 0)
	v.posOff, v.cellOff = append(v.posOff[:0], 0), append(v.cellOff[:0], 0)
	if len(v.props) != nprops {
		v.props, v.propOff = make([][]float64, nprops), make([][]int32, nprops)
	}
	for k := range v.props {
		v.props[k] = v.props[k][:0]
		v.propOff[k] = append(v.propOff[k][:0], 0)
	}
}

// appendV4 is Append for format 4: g carries Numbers, Positions, Cell,
// PBC, the directed Edges with their Shifts, and Props in the manifest's
// order (an empty slice: missing).
func (w *Writer) appendV4(g *Graph) error {
	n, m := int(g.NumNodes), g.NumEdges()
	fail := func(format string, args ...any) error {
		return fmt.Errorf("shard: structure %d: %s", g.ID, fmt.Sprintf(format, args...))
	}
	props := w.opts.Structures.Properties
	switch {
	case len(g.Numbers) != n || len(g.Positions) != 3*n:
		return fail("%d atomic numbers and %d position values for %d atoms", len(g.Numbers), len(g.Positions), n)
	case len(g.Cell) != 9 || g.PBC > 7:
		return fail("%d cell values, pbc %d", len(g.Cell), g.PBC)
	case len(g.Shifts) != 3*m:
		return fail("%d shift values for %d edges", len(g.Shifts), m)
	case len(g.Props) != len(props):
		return fail("%d properties, the folder has %d", len(g.Props), len(props))
	}
	for k, v := range g.Edges {
		if v < 0 || int(v) >= n {
			return fail("edge %d: atom %d of %d", k/2, v, n)
		}
	}
	for i, z := range g.Numbers {
		if z < 1 || z > 118 {
			return fail("atom %d: atomic number %d", i, z)
		}
	}
	vals := len(g.Edges) + len(g.Shifts)/4 + n + 3*n + 9
	for k, p := range props {
		want := p.Size
		if p.Per == PerAtom {
			want *= n
		}
		if l := len(g.Props[k]); l != 0 && l != want {
			return fail("property %s: %d values, want %d (%s × %d)", p.Name, l, want, p.Per, p.Size)
		}
		vals += len(g.Props[k])
	}
	b := w.b
	if len(b.ids) > 0 && (len(b.ids) >= w.opts.BatchGraphs || b.values+vals > w.opts.BatchValues) {
		if err := w.flushBatch(); err != nil {
			return err
		}
		b = w.b
	}
	v := &b.v4
	if len(v.propOff) != len(props) || len(b.ids) == 0 {
		v.reset(len(props))
	}
	if int64(len(b.edgeVals))+int64(len(g.Edges)) > 1<<31-1 || int64(len(v.positions))+int64(len(g.Positions)) > 1<<31-1 {
		return fail("too large for one record batch")
	}
	b.ids = append(b.ids, g.ID)
	b.nnodes = append(b.nnodes, g.NumNodes)
	b.edgeVals = appendDoubling(b.edgeVals, g.Edges)
	b.edgeOff = append(b.edgeOff, int32(len(b.edgeVals)))
	v.shifts = appendDoubling(v.shifts, g.Shifts)
	v.shOff = append(v.shOff, int32(len(v.shifts)))
	v.numbers = appendDoubling(v.numbers, g.Numbers)
	v.atOff = append(v.atOff, int32(len(v.numbers)))
	v.positions = appendDoubling(v.positions, g.Positions)
	v.posOff = append(v.posOff, int32(len(v.positions)))
	v.cells = append(v.cells, g.Cell...)
	v.cellOff = append(v.cellOff, int32(len(v.cells)))
	v.pbc = append(v.pbc, g.PBC)
	for k := range props {
		if len(g.Props[k]) == 0 {
			w.propMissing[k]++
		}
		v.props[k] = appendDoubling(v.props[k], g.Props[k])
		v.propOff[k] = append(v.propOff[k], int32(len(v.props[k])))
	}
	for _, z := range g.Numbers {
		w.elements[z] = true
	}
	w.counted(b, vals, n, m)
	return nil
}

// recordV4 wraps a format 4 batch's slices as Arrow arrays.
func (w *Writer) recordV4(b *batchBuf) arrow.RecordBatch {
	n := len(b.ids)
	v := &b.v4
	if len(v.atOff) != n+1 {
		v.reset(len(w.opts.Structures.Properties)) // an empty batch is never written; keeps offsets whole
	}
	f64 := arrow.PrimitiveTypes.Float64
	cols := []arrow.Array{
		arrowx.Primitive(arrow.PrimitiveTypes.Int64, n, arrow.Int64Traits.CastToBytes(b.ids)),
		arrowx.Primitive(arrow.PrimitiveTypes.Int32, n, arrow.Int32Traits.CastToBytes(b.nnodes)),
		arrowx.List(arrow.PrimitiveTypes.Int32, b.edgeOff, len(b.edgeVals), arrow.Int32Traits.CastToBytes(b.edgeVals)),
		arrowx.List(arrow.PrimitiveTypes.Int8, v.shOff, len(v.shifts), arrow.Int8Traits.CastToBytes(v.shifts)),
		arrowx.List(arrow.PrimitiveTypes.Uint8, v.atOff, len(v.numbers), v.numbers),
		arrowx.List(f64, v.posOff, len(v.positions), arrow.Float64Traits.CastToBytes(v.positions)),
		arrowx.List(f64, v.cellOff, len(v.cells), arrow.Float64Traits.CastToBytes(v.cells)),
		arrowx.Primitive(arrow.PrimitiveTypes.Uint8, n, v.pbc),
	}
	for k := range w.opts.Structures.Properties {
		cols = append(cols, arrowx.List(f64, v.propOff[k], len(v.props[k]), arrow.Float64Traits.CastToBytes(v.props[k])))
	}
	return arrowx.Record(w.schema, n, cols)
}

// batchV4 is a decoded format 4 batch's own columns.
type batchV4 struct {
	shifts    []int8
	numbers   []uint8
	positions []float64
	cells     []float64
	pbc       []uint8
	shOff     []int32
	atOff     []int32
	posOff    []int32
	cellOff   []int32
	props     [][]float64
	propOff   [][]int32
}

// viewBatchV4 takes typed slices of a format 4 record batch (schema
// already checked: the columns are in SchemaV4's order).
func viewBatchV4(rec arrow.RecordBatch) batch {
	var b batch
	b.ids = rec.Column(0).(*array.Int64).Int64Values()
	b.numNodes = rec.Column(1).(*array.Int32).Int32Values()
	el := rec.Column(2).(*array.List)
	b.edgeOff, b.edges = el.Offsets(), el.ListValues().(*array.Int32).Int32Values()
	v := &batchV4{}
	sl := rec.Column(3).(*array.List)
	v.shOff, v.shifts = sl.Offsets(), sl.ListValues().(*array.Int8).Int8Values()
	nl := rec.Column(4).(*array.List)
	v.atOff, v.numbers = nl.Offsets(), nl.ListValues().(*array.Uint8).Uint8Values()
	v.posOff, v.positions = f64List(rec.Column(5))
	v.cellOff, v.cells = f64List(rec.Column(6))
	v.pbc = rec.Column(7).(*array.Uint8).Uint8Values()
	for c := 8; c < int(rec.NumCols()); c++ {
		off, vals := f64List(rec.Column(c))
		v.propOff, v.props = append(v.propOff, off), append(v.props, vals)
	}
	b.v4 = v
	return b
}

func f64List(c arrow.Array) ([]int32, []float64) {
	l := c.(*array.List)
	return l.Offsets(), l.ListValues().(*array.Float64).Float64Values()
}

// checkBatchV4 is checkBatch for format 4: every list's length against
// the structure's atoms and edges, atom ids in range, atomic numbers
// 1..118, positions and a periodic axis's cell vector finite, shifts zero
// along non-periodic axes, properties of their declared sizes.
func checkBatchV4(b *batch, man *Manifest, first, want int64) error {
	n := len(b.ids)
	if int64(n) != want {
		return fmt.Errorf("%d rows, manifest says %d", n, want)
	}
	v := b.v4
	props := man.Structures.Properties
	if len(b.numNodes) != n || len(v.pbc) != n || len(v.props) != len(props) {
		return fmt.Errorf("column lengths differ")
	}
	for _, l := range []struct {
		name string
		off  []int32
		vals int
	}{{ColEdges, b.edgeOff, len(b.edges)}, {ColShifts, v.shOff, len(v.shifts)}, {ColNumbers, v.atOff, len(v.numbers)},
		{ColPositions, v.posOff, len(v.positions)}, {ColCell, v.cellOff, len(v.cells)}} {
		if err := checkOffsets(l.name, l.off, n, l.vals); err != nil {
			return err
		}
	}
	for k, p := range props {
		if err := checkOffsets(ColPropPrefix+p.Name, v.propOff[k], n, len(v.props[k])); err != nil {
			return err
		}
	}
	for r := range n {
		id := man.IDAt(first + int64(r))
		if b.ids[r] != id {
			return fmt.Errorf("row %d: graph_id %d, want %d", r, b.ids[r], id)
		}
		nn := b.numNodes[r]
		e := b.edges[b.edgeOff[r]:b.edgeOff[r+1]]
		pbc := v.pbc[r]
		switch {
		case nn < 1:
			return fmt.Errorf("structure %d: %d atoms", id, nn)
		case len(e)%2 != 0:
			return fmt.Errorf("structure %d: odd number of edge ids", id)
		case v.shOff[r+1]-v.shOff[r] != int32(len(e)/2*3):
			return fmt.Errorf("structure %d: %d shift values for %d edges", id, v.shOff[r+1]-v.shOff[r], len(e)/2)
		case v.atOff[r+1]-v.atOff[r] != nn || v.posOff[r+1]-v.posOff[r] != 3*nn:
			return fmt.Errorf("structure %d: %d atomic numbers and %d position values for %d atoms", id, v.atOff[r+1]-v.atOff[r], v.posOff[r+1]-v.posOff[r], nn)
		case v.cellOff[r+1]-v.cellOff[r] != 9:
			return fmt.Errorf("structure %d: %d cell values", id, v.cellOff[r+1]-v.cellOff[r])
		case pbc > 7:
			return fmt.Errorf("structure %d: pbc %d", id, pbc)
		}
		for k, a := range e {
			if a < 0 || a >= nn {
				return fmt.Errorf("structure %d: edge %d: atom %d of %d", id, k/2, a, nn)
			}
		}
		sh := v.shifts[v.shOff[r]:v.shOff[r+1]]
		for k, s := range sh {
			if s != 0 && pbc&(1<<(k%3)) == 0 {
				return fmt.Errorf("structure %d: edge %d shifts %d cells along axis %d, which is not periodic", id, k/3, s, k%3)
			}
		}
		for i, z := range v.numbers[v.atOff[r]:v.atOff[r+1]] {
			if z < 1 || z > 118 {
				return fmt.Errorf("structure %d: atom %d: atomic number %d", id, i, z)
			}
		}
		for i, x := range v.positions[v.posOff[r]:v.posOff[r+1]] {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("structure %d: atom %d: position %v", id, i/3, x)
			}
		}
		cell := v.cells[v.cellOff[r]:v.cellOff[r+1]]
		for k, x := range cell {
			if pbc&(1<<(k/3)) != 0 && (math.IsNaN(x) || math.IsInf(x, 0)) {
				return fmt.Errorf("structure %d: cell vector %d (periodic) holds %v", id, k/3, x)
			}
		}
		for k, p := range props {
			got := v.propOff[k][r+1] - v.propOff[k][r]
			want := int32(p.Size)
			if p.Per == PerAtom {
				want *= nn
			}
			if got != 0 && got != want {
				return fmt.Errorf("structure %d: property %s: %d values, want %d", id, p.Name, got, want)
			}
		}
	}
	return nil
}

// structureOf fills g's format 4 fields from row row of b.
func structureOf(g *Graph, b *batch, row int) {
	v := b.v4
	g.Shifts = v.shifts[v.shOff[row]:v.shOff[row+1]]
	g.Numbers = v.numbers[v.atOff[row]:v.atOff[row+1]]
	g.Positions = v.positions[v.posOff[row]:v.posOff[row+1]]
	g.Cell = v.cells[v.cellOff[row]:v.cellOff[row+1]]
	g.PBC = v.pbc[row]
	if len(v.props) > 0 {
		g.Props = make([][]float64, len(v.props))
		for k := range v.props {
			g.Props[k] = v.props[k][v.propOff[k][row]:v.propOff[k][row+1]]
		}
	}
}

// subsetV4 copies rows of a format 4 batch's own columns.
func (v *batchV4) subset(rows []int, bytes *int64) *batchV4 {
	n := &batchV4{}
	n.shOff, n.shifts = gather(v.shOff, v.shifts, rows, bytes)
	n.atOff, n.numbers = gather(v.atOff, v.numbers, rows, bytes)
	n.posOff, n.positions = gather(v.posOff, v.positions, rows, bytes)
	n.cellOff, n.cells = gather(v.cellOff, v.cells, rows, bytes)
	n.pbc = make([]uint8, len(rows))
	for i, r := range rows {
		n.pbc[i] = v.pbc[r]
	}
	*bytes += int64(len(rows))
	for k := range v.props {
		off, vals := gather(v.propOff[k], v.props[k], rows, bytes)
		n.propOff, n.props = append(n.propOff, off), append(n.props, vals)
	}
	return n
}

package shard

// A graph as the writer takes it and the reader gives it.

// Graph is one graph as the format stores it. Edges holds each undirected
// edge once as a pair (u, v) of local node ids with u < v, pairs sorted; Codes
// (categorical kinds) has NumNodes entries, X (attributes, or format 3's
// float block) NumNodes*dim.
type Graph struct {
	ID         int64
	Label      int32
	NumNodes   int32
	Edges      []int32
	Codes      []int32
	X          []float32
	EdgeLabels []int32

	// Format 3: NumNodes×columns categorical codes, node-major; edge
	// features aligned with Edges' pairs (NumEdges()×columns codes,
	// NumEdges()×dense floats); T float targets (NaN: missing) when the
	// task is not a class.
	NodeCat Codes
	EdgeCat Codes
	EdgeX   []float32
	Targets []float32

	// Format 4 (structures): Edges are the directed neighbour pairs (i, j)
	// and Shifts their cell shifts (3 per edge); atomic numbers, positions
	// (3 per atom, Å), the cell's rows (9, Å), the periodic axes (bit k:
	// axis k), and the manifest's properties in its order (an empty slice:
	// this structure has none).
	Numbers   []uint8
	Positions []float64
	Cell      []float64
	PBC       uint8
	Shifts    []int8
	Props     [][]float64
}

// IsStructure reports whether g is a format 4 structure.
func (g *Graph) IsStructure() bool { return g.Positions != nil || g.Numbers != nil }

// Codes is a block of categorical codes as stored: at most one of U8, U16
// and I32 holds them (a Writer is given I32; a Reader returns the stored
// width's, aliasing its buffers).
type Codes struct {
	U8  []uint8
	U16 []uint16
	I32 []int32
}

// Len is the number of codes.
func (c Codes) Len() int { return len(c.U8) + len(c.U16) + len(c.I32) }

// At is code i.
func (c Codes) At(i int) int32 {
	switch {
	case c.U8 != nil:
		return int32(c.U8[i])
	case c.U16 != nil:
		return int32(c.U16[i])
	}
	return c.I32[i]
}

// AppendTo appends the codes to dst as int32.
func (c Codes) AppendTo(dst []int32) []int32 {
	switch {
	case c.U8 != nil:
		for _, v := range c.U8 {
			dst = append(dst, int32(v))
		}
	case c.U16 != nil:
		for _, v := range c.U16 {
			dst = append(dst, int32(v))
		}
	default:
		dst = append(dst, c.I32...)
	}
	return dst
}

// NumEdges is the number of undirected edges.
func (g *Graph) NumEdges() int { return len(g.Edges) / 2 }

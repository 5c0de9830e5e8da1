package ogb

// The graphs of an OGB dataset, read row by row from its files.

import (
	"context"
	"math"
	"slices"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/shard"
)

// Graphs implements ingest.Dataset.
func (d *Dataset) Graphs(ctx context.Context, _ ingest.ReadOptions, fn func(*shard.Graph) error) (ingest.Stats, error) {
	var st ingest.Stats
	edgesIn, err := d.cursor(nil, fileEdges, d.totalEdges, "edges")
	if err != nil {
		return st, err
	}
	defer edgesIn.close()
	var nodeIn, edgeIn, labelIn *cursor
	for _, c := range []struct {
		cols  *columns
		cu    **cursor
		total int64
		what  string
	}{{&d.node, &nodeIn, d.totalNodes, "nodes"}, {&d.edge, &edgeIn, d.totalEdges, "edges"}} {
		if c.cols.Present {
			if *c.cu, err = d.cursor(c.cols, c.cols.file, c.total, c.what); err != nil {
				return st, err
			}
			defer (*c.cu).close()
		}
	}
	if d.task != shard.TaskClass {
		if labelIn, err = d.cursor(nil, fileLabels, int64(len(d.nodes)), "graphs"); err != nil {
			return st, err
		}
		defer labelIn.close()
	}
	var (
		g      shard.Graph
		canon  ingest.Canon
		keys   []ingest.Entry
		rows   []int32
		lines  []int32 // per listing kept: its row among the graph's
		ecodes []int32 // per listing kept
		ex     []float32
	)
	for gi := range d.nodes {
		if gi&1023 == 0 && ctx.Err() != nil {
			return st, ctx.Err()
		}
		n, m := d.nodes[gi], d.edges[gi]
		g = shard.Graph{ID: int64(gi), NumNodes: n, NodeCat: shard.Codes{I32: g.NodeCat.I32[:0]}, X: g.X[:0],
			EdgeCat: shard.Codes{I32: g.EdgeCat.I32[:0]}, EdgeX: g.EdgeX[:0], Targets: g.Targets[:0], Edges: g.Edges[:0]}
		if nodeIn != nil {
			for range n {
				if err := nodeIn.next(d.node.Width, false); err != nil {
					return st, err
				}
				if err := d.take(nodeIn, &g.NodeCat.I32, &g.X); err != nil {
					return st, err
				}
			}
		}
		keys, lines, ecodes, ex = keys[:0], lines[:0], ecodes[:0], ex[:0]
		nCodes, nX := d.edge.Split()
		if edgeIn == nil {
			nCodes, nX = 0, 0
		}
		// Row i of ecodes and ex is listing i's features (self-loops
		// dropped with theirs); lines[i] its row among the graph's, which
		// the edge files hold from line firstLine on.
		conflict := func(edgeFile string, firstLine int64) func(u, v, r, r0 int32) error {
			return func(u, v, r, r0 int32) error {
				return formatErr(edgeFile, firstLine+int64(r), 0, "graph %d: edge (%d, %d) has other features than on line %d, where it is listed first: an undirected edge has one set of features",
					gi, u, v, firstLine+int64(r0))
			}
		}
		compactAt := ingest.CompactMin
		for k := range m {
			if err := edgesIn.next(2, false); err != nil {
				return st, err
			}
			st.DirectedEntries++
			u, v := edgesIn.r.vals[0], edgesIn.r.vals[1]
			if !edgesIn.r.ints {
				file, line := edgesIn.src.where()
				return st, formatErr(file, line, 0, "edge (%v, %v): node ids are integers", u, v)
			}
			if u < 0 || v < 0 || u >= float64(n) || v >= float64(n) {
				file, line := edgesIn.src.where()
				return st, formatErr(file, line, 0, "edge (%v, %v) is not in graph %d's nodes 0..%d (node ids are local to each graph)", u, v, gi, n-1)
			}
			if edgeIn != nil {
				if err := edgeIn.next(d.edge.Width, false); err != nil {
					return st, err
				}
				if err := d.take(edgeIn, &ecodes, &ex); err != nil {
					return st, err
				}
			}
			if u == v {
				st.SelfLoops++
				ecodes, ex = ecodes[:len(keys)*nCodes], ex[:len(keys)*nX]
				continue
			}
			keys = append(keys, ingest.Pack(int64(u), int64(v)))
			lines = append(lines, int32(k))
			if len(keys) >= compactAt {
				// A graph listing its edges many times over holds each
				// once (and each direction once): memory follows its
				// edges, not its rows.
				file, line := edgesIn.src.where()
				if edgeIn != nil {
					file, line = edgeIn.src.where()
				}
				var err error
				keys, lines, ecodes, ex, err = ingest.CompactListings(keys, lines, ecodes, nCodes, ex, nX, &st, conflict(file, line-int64(k)))
				if err != nil {
					return st, err
				}
				compactAt = max(ingest.CompactMin, 2*len(keys))
			}
		}
		rows = rows[:0]
		for i := range keys {
			rows = append(rows, int32(i))
		}
		edges, first := canon.Build(n, keys, rows, &st)
		g.Edges = append(g.Edges, edges...)
		if edgeIn != nil {
			file, line := edgeIn.src.where()
			line0 := conflict(file, line-int64(m-1))
			err := ingest.EdgeFeatures(&g, keys, rows, first, ecodes, nCodes, ex, nX, func(u, v, r, r0 int32) error {
				return line0(u, v, lines[r], lines[r0])
			})
			if err != nil {
				return st, err
			}
		}
		if err := d.label(&g, gi, labelIn); err != nil {
			return st, err
		}
		if err := fn(&g); err != nil {
			return st, err
		}
	}
	for _, cu := range []*cursor{edgesIn, nodeIn, edgeIn, labelIn} {
		if err := cu.end(); err != nil {
			return st, err
		}
	}
	return st, nil
}

// take appends a feature row to codes or floats, checking the guessed
// kind and code width; a contradiction corrects the guess and asks for a
// reread.
func (d *Dataset) take(cu *cursor, codes *[]int32, floats *[]float32) error {
	c := cu.c
	if c.Floats {
		for _, v := range cu.r.vals {
			*floats = append(*floats, float32(v))
		}
		return nil
	}
	if !cu.r.ints {
		c.Floats = true
		return ingest.ErrReread
	}
	for i, v := range cu.r.vals {
		switch {
		case v < 0:
			file, line := cu.src.where()
			return formatErr(file, line, i+1, "negative code %v in an integer (categorical) column", v)
		case v > math.MaxInt32-1:
			file, line := cu.src.where()
			return formatErr(file, line, i+1, "code %v out of range", v)
		case int64(v)+1 >= 1<<(8*c.Code) && c.Code < 4: // the vocabulary size, the fill's code, must fit too
			c.Code = shard.WidthFor(int64(v) + 1) // room for the reserved fill code
			return ingest.ErrReread
		}
		*codes = append(*codes, int32(v))
	}
	return nil
}

// label sets graph gi's label or targets.
func (d *Dataset) label(g *shard.Graph, gi int, cu *cursor) error {
	if d.task == shard.TaskClass {
		c, _ := slices.BinarySearch(d.classes, d.labels[gi])
		g.Label = int32(c)
		return nil
	}
	if err := cu.next(d.targets, true); err != nil {
		return err
	}
	for _, v := range cu.r.vals {
		if d.task == shard.TaskBinary && v != 0 && v != 1 && !math.IsNaN(v) {
			if d.asked == shard.TaskBinary {
				file, line := cu.src.where()
				return formatErr(file, line, 0, "--task binary needs targets of 0, 1 or missing; this row has %v", v)
			}
			d.task = shard.TaskRegression
			return ingest.ErrReread
		}
		g.Targets = append(g.Targets, float32(v))
	}
	return nil
}

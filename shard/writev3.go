package shard

import (
	"fmt"
	"math"
)

// appendV3 is Append for format 3.
func (w *Writer) appendV3(g *Graph) error {
	n, m := int(g.NumNodes), g.NumEdges()
	fail := func(format string, args ...any) error {
		return fmt.Errorf("shard: graph %d: %s", g.ID, fmt.Sprintf(format, args...))
	}
	task := w.opts.Task
	switch {
	case task.Floats() && len(g.Targets) != task.Targets:
		return fail("%d targets, want %d", len(g.Targets), task.Targets)
	case !task.Floats() && g.Label < 0:
		return fail("class %d", g.Label)
	case g.NodeCat.Len() != n*w.node.Cols() || g.NodeCat.U8 != nil || g.NodeCat.U16 != nil:
		return fail("%d node codes (as int32) for %d nodes × %d columns", g.NodeCat.Len(), n, w.node.Cols())
	case len(g.X) != n*w.node.DenseDim():
		return fail("%d node feature values for %d nodes × %d", len(g.X), n, w.node.DenseDim())
	case g.EdgeCat.Len() != m*w.edge.Cols() || g.EdgeCat.U8 != nil || g.EdgeCat.U16 != nil:
		return fail("%d edge codes (as int32) for %d edges × %d columns", g.EdgeCat.Len(), m, w.edge.Cols())
	case len(g.EdgeX) != m*w.edge.DenseDim():
		return fail("%d edge feature values for %d edges × %d", len(g.EdgeX), m, w.edge.DenseDim())
	}
	for _, c := range []struct {
		cols  *Columns
		codes []int32
	}{{w.node, g.NodeCat.I32}, {w.edge, g.EdgeCat.I32}} {
		if c.cols.Cols() == 0 {
			continue
		}
		limit := int32(min(int64(1)<<(8*c.cols.Width), 1<<31-1))
		f := len(c.cols.Categorical)
		for i, v := range c.codes {
			if v < 0 {
				return fail("code %d in column %d (%s)", v, i%f, c.cols.Categorical[i%f].Name)
			}
			if v >= limit {
				return fmt.Errorf("%w: graph %d: code %d in column %s, width %d", ErrCodeWidth, g.ID, v, c.cols.Categorical[i%f].Name, c.cols.Width)
			}
			if col := &c.cols.Categorical[i%f]; int(v) >= col.Vocab {
				col.Vocab = int(v) + 1
			}
		}
	}
	for _, t := range g.Targets {
		if math.IsNaN(float64(t)) {
			w.missing++
		} else if math.IsInf(float64(t), 0) {
			return fail("target %g", t)
		}
	}
	vals := len(g.Edges) + g.NodeCat.Len() + len(g.X) + g.EdgeCat.Len() + len(g.EdgeX) + len(g.Targets)
	b := w.b
	if len(b.ids) > 0 && (len(b.ids) >= w.opts.BatchGraphs || b.values+vals > w.opts.BatchValues) {
		if err := w.flushBatch(); err != nil {
			return err
		}
		b = w.b
	}
	if int64(len(b.edgeVals))+int64(len(g.Edges)) > 1<<31-1 || int64(len(b.nodeCat))+int64(g.NodeCat.Len()) > 1<<31-1 ||
		int64(len(b.xVals))+int64(len(g.X)) > 1<<31-1 || int64(len(b.edgeCat))+int64(g.EdgeCat.Len()) > 1<<31-1 {
		return fail("too large for one record batch")
	}
	b.ids = append(b.ids, g.ID)
	b.labels = append(b.labels, g.Label)
	b.nnodes = append(b.nnodes, g.NumNodes)
	b.edgeVals = appendDoubling(b.edgeVals, g.Edges)
	b.edgeOff = append(b.edgeOff, int32(len(b.edgeVals)))
	b.targets = append(b.targets, g.Targets...)
	b.tgtOff = append(b.tgtOff, int32(len(b.targets)))
	b.nodeCat = appendDoubling(b.nodeCat, g.NodeCat.I32)
	b.ncOff = append(b.ncOff, int32(len(b.nodeCat)))
	b.xVals = appendDoubling(b.xVals, g.X)
	b.featOff = append(b.featOff, int32(len(b.xVals)))
	b.edgeCat = appendDoubling(b.edgeCat, g.EdgeCat.I32)
	b.ecOff = append(b.ecOff, int32(len(b.edgeCat)))
	b.edgeX = appendDoubling(b.edgeX, g.EdgeX)
	b.exOff = append(b.exOff, int32(len(b.edgeX)))
	w.counted(b, vals, n, m)
	w.stats.IsolatedNodes += w.isolated(g)
	return nil
}

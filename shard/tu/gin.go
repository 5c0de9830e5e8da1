package tu

import (
	"context"
	"io"
	"slices"
	"strconv"

	"github.com/augloader/augloader/shard"
)

// The GIN text format (Xu et al., "How Powerful are Graph Neural
// Networks?", and the many forks of its code), one NAME.txt:
//
//	N                         graphs
//	n l                       per graph: its node count and label, then n lines:
//	t m v1 … vm [a1 … ad]     node tag, neighbour count, neighbours (0-based
//	                          within the graph), optional attributes
//
// Read with TUDataset's conventions: graph labels remapped to 0..C-1 in
// sorted order; tags are node labels (one-hot of tag − min); edges made
// undirected with self-loops and duplicates dropped and counted. With
// --features auto a file whose tags are all equal (the social datasets:
// COLLAB, IMDB, REDDIT store 0) gets degree features, as a TU dataset
// without node labels does. Two passes: Load reads sizes, labels and tags
// (O(nodes)); Graphs streams the neighbour lists graph by graph.

// loadGIN is Load's first pass over a GIN file.
func (d *Dataset) loadGIN(mode FeatureMode) error {
	file := d.src.FileName(ginKey)
	rc, err := d.src.Open(ginKey)
	if err != nil {
		return err
	}
	defer rc.Close()
	l := newLineReader(rc, file)
	ng, err := l.nextInt()
	if err == io.EOF {
		return formatErr(file, 0, 0, "empty file")
	}
	if err != nil {
		return err
	}
	if ng < 1 || ng > 1<<31-1 {
		return formatErr(file, 1, 1, "%d graphs", ng)
	}
	hint := min(ng, 1<<16) // the count is the file's word, not yet its content
	d.GraphStart = make([]int64, 1, hint+1)
	rawLabels := make([]int64, 0, hint)
	var tags []int64
	attrDim := -1
	for g := int64(0); g < ng; g++ {
		b, err := l.next()
		if err == io.EOF {
			return formatErr(file, l.line, 0, "the file ends after %d of its %d graphs", g, ng)
		}
		if err != nil {
			return err
		}
		n, i, err := l.parseInt(b, 0, 1)
		if err != nil {
			return err
		}
		lab, i, err := l.parseInt(b, i, 2)
		if err != nil {
			return err
		}
		if err := l.expectEnd(b, i, 2); err != nil {
			return err
		}
		if n < 1 || n > shard.MaxNodesPerGraph {
			return formatErr(file, l.line, 1, "graph %d has %d nodes", g+1, n)
		}
		rawLabels = append(rawLabels, lab)
		for v := int64(0); v < n; v++ {
			b, err := l.next()
			if err == io.EOF {
				return formatErr(file, l.line, 0, "graph %d ends after %d of its %d nodes", g+1, v, n)
			}
			if err != nil {
				return err
			}
			tag, i, err := l.parseInt(b, 0, 1)
			if err != nil {
				return err
			}
			m, i, err := l.parseInt(b, i, 2)
			if err != nil {
				return err
			}
			if m < 0 || m > n {
				return formatErr(file, l.line, 2, "node %d of graph %d lists %d neighbours (the graph has %d nodes)", v, g+1, m, n)
			}
			for k := int64(0); k < m; k++ {
				var u int64
				if u, i, err = l.parseInt(b, i, int(3+k)); err != nil {
					return err
				}
				if u < 0 || u >= n {
					return formatErr(file, l.line, int(3+k), "neighbour %d out of range 0..%d", u, n-1)
				}
			}
			// What follows the neighbours is the node's attributes.
			var attrs []float32
			for {
				for i < len(b) && isSpace(b[i]) {
					i++
				}
				if i >= len(b) {
					break
				}
				f := fieldText(b, i)
				x, err := strconv.ParseFloat(string(f), 32)
				if err != nil {
					return formatErr(file, l.line, int(3+m)+len(attrs), "%q is not a number", f)
				}
				attrs = append(attrs, float32(x))
				i += len(f)
			}
			switch {
			case attrDim < 0:
				attrDim = len(attrs)
			case len(attrs) != attrDim:
				return formatErr(file, l.line, 0, "%d attributes, the first node has %d", len(attrs), attrDim)
			}
			tags = append(tags, tag)
			if mode == FeaturesAttributes {
				d.X = append(d.X, attrs...)
			}
		}
		d.GraphStart = append(d.GraphStart, d.GraphStart[g]+n)
	}
	if _, err := l.next(); err != io.EOF {
		if err != nil {
			return err
		}
		return formatErr(file, l.line, 0, "more lines after the %d graphs the file announces", ng)
	}
	d.NumGraphs, d.NumNodes = int(ng), d.GraphStart[ng]
	d.setGraphLabels(rawLabels)
	if mode == FeaturesAuto {
		mode = FeaturesDegree
		if slices.Min(tags) != slices.Max(tags) {
			mode = FeaturesLabels
		}
	}
	switch mode {
	case FeaturesLabels:
		return d.setNodeLabels(file, tags)
	case FeaturesAttributes:
		if attrDim < 1 {
			return formatErr(file, 0, 0, "no node attributes: --features attributes needs them")
		}
		d.FeatureKind, d.FeatureDim = shard.FeatureAttributes, attrDim
	case FeaturesDegree:
		d.FeatureKind = shard.FeatureDegree
	default:
		return formatErr(file, 0, 0, "unknown features %q", mode)
	}
	return nil
}

// graphsGIN is Graphs for a GIN file: the second pass, one graph at a time.
func (d *Dataset) graphsGIN(ctx context.Context, fn func(*shard.Graph) error) (EdgeStats, error) {
	var st EdgeStats
	file := d.src.FileName(ginKey)
	rc, err := d.src.Open(ginKey)
	if err != nil {
		return st, err
	}
	defer rc.Close()
	l := newLineReader(rc, file)
	if _, err := l.next(); err != nil { // the graph count, checked by Load
		return st, err
	}
	e := emitter{d: d, fn: fn, st: &st}
	var keys []entry
	for g := 0; g < d.NumGraphs; g++ {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		if _, err := l.next(); err != nil { // n l
			return st, formatErr(file, l.line, 0, "the file changed while it was read: %v", err)
		}
		keys = keys[:0]
		n := d.GraphStart[g+1] - d.GraphStart[g]
		for v := int64(0); v < n; v++ {
			b, err := l.next()
			if err != nil {
				return st, formatErr(file, l.line, 0, "the file changed while it was read: %v", err)
			}
			_, i, _ := l.parseInt(b, 0, 1)
			m, i, err := l.parseInt(b, i, 2)
			if err != nil {
				return st, err
			}
			for k := int64(0); k < m; k++ {
				var u int64
				if u, i, err = l.parseInt(b, i, int(3+k)); err != nil {
					return st, err
				}
				if u < 0 || u >= n {
					return st, formatErr(file, l.line, int(3+k), "neighbour %d out of range 0..%d", u, n-1)
				}
				st.DirectedEntries++
				if u == v {
					st.SelfLoops++
					continue
				}
				keys = append(keys, pack(v, u))
			}
		}
		if err := e.emit(g, keys, nil); err != nil {
			return st, err
		}
	}
	return st, nil
}

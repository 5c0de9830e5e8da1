package loader

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/internal/arrowx"
	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/wire"
)

// schemaInfo is what a stream of the served set says about its batches
// (wire.SchemaInfo) for req.
func (s *Source) schemaInfo(req wire.Request) wire.SchemaInfo {
	ds := s.ds
	lay := &ds.lay
	si := wire.SchemaInfo{Dataset: ds.man.Dataset, FeatureKind: string(ds.man.Features.Kind),
		Dense: lay.NodeDense > 0, FeatureDim: max(lay.OneHot, lay.NodeDense), Classes: lay.Classes,
		Epoch: req.Epoch, Rank: req.Rank, World: req.World,
		NodeVocab: ds.nodeVocab, EdgeVocab: ds.edgeVocab, EdgeDense: lay.EdgeDense,
		Targets: lay.Targets, Task: string(lay.Task)}
	if ds.fill != nil {
		// A fill code is at most its vocabulary's size, which
		// wire.CodeWidth counts as a code: codes are as wide as it needs.
		si.EdgeFill, si.EdgeFillX = ds.fill.Codes, ds.fill.X
	}
	return si
}

// collator accumulates one batch's columns. Its slices back the record
// batch it builds without a copy, so a collator is reused (reset) only
// after that batch's sink has returned: Stream's sender puts it back in the
// Loader's pool, and later batches append into capacity earlier ones grew.
type collator struct {
	lay                   *shard.Layout
	nodeWidth, edgeWidth  int // code widths of x_cat and edge_cat
	ids                   []int64
	nnodes, y, ymix       []int32
	yq                    []float32
	policy                []string
	padded                []bool
	srcOff                []int32
	edges                 aug.Coalesced // edge_src, edge_dst
	featOff, xnode, xcode []int32
	xw, x                 []float32
	base                  int32 // nodes so far: batch-global id offset

	// Batch schema 2's columns: codes stored at their width, offsets in
	// values.
	edgeIDs                []int32 // scratch: each directed edge's undirected edge
	xcat, ecat             []byte
	catOff, ecatOff, exOff []int32
	ex, targets            []float32
	tgtOff                 []int32

	st structCollator // a structure batch's columns

	// lent is the transport's room this batch's edges are written into
	// (EdgeLender), and ownSrc, ownDst the collator's own edge buffers,
	// kept meanwhile.
	lent           loan
	ownSrc, ownDst []int32
}

func (c *collator) reset(lay *shard.Layout, nodeWidth, edgeWidth int) {
	c.lay, c.nodeWidth, c.edgeWidth, c.base = lay, nodeWidth, edgeWidth, 0
	c.ids = c.ids[:0]
	c.nnodes, c.y, c.ymix = c.nnodes[:0], c.y[:0], c.ymix[:0]
	c.yq = c.yq[:0]
	clear(c.policy) // drop the strings' references
	c.policy = c.policy[:0]
	c.padded = c.padded[:0]
	c.srcOff = append(c.srcOff[:0], 0)
	c.edges.Reset()
	c.featOff = append(c.featOff[:0], 0)
	c.xnode, c.xcode = c.xnode[:0], c.xcode[:0]
	c.xw, c.x = c.xw[:0], c.x[:0]
	c.xcat, c.ecat, c.ex, c.targets = c.xcat[:0], c.ecat[:0], c.ex[:0], c.targets[:0]
	c.catOff = append(c.catOff[:0], 0)
	c.ecatOff = append(c.ecatOff[:0], 0)
	c.exOff = append(c.exOff[:0], 0)
	c.tgtOff = append(c.tgtOff[:0], 0)
}

// add appends one augmented graph. fused says its edges are already in
// c.edges (aug.CoalescedApplier, at base c.base); otherwise they are
// expanded from g.Edges, with each direction's features.
func (c *collator) add(g *aug.Graph, policy string, padded, fused bool) {
	c.ids = append(c.ids, g.ID)
	c.nnodes = append(c.nnodes, g.N)
	c.y = append(c.y, g.Label)
	c.ymix = append(c.ymix, g.MixLabel)
	c.yq = append(c.yq, g.Q)
	c.policy = append(c.policy, policy)
	c.padded = append(c.padded, padded)

	lay := c.lay
	switch {
	case fused:
	case lay.EdgeFeatures():
		// Both directions of an edge carry its features.
		c.edgeIDs = c.edges.AppendIDs(g, c.base, c.edgeIDs[:0])
		kc, kd := int(g.EdgeCatCols), int(g.EdgeDim)
		for _, e := range c.edgeIDs {
			if kc > 0 {
				c.ecat = arrowx.AppendCodes(c.ecat, g.EdgeCat[int(e)*kc:(int(e)+1)*kc], c.edgeWidth)
			}
			c.ex = append(c.ex, g.EdgeX[int(e)*kd:(int(e)+1)*kd]...)
		}
		c.ecatOff = append(c.ecatOff, int32(len(c.ecat)/c.edgeWidth))
		c.exOff = append(c.exOff, int32(len(c.ex)))
	default:
		c.edges.Append(g, c.base)
	}
	c.srcOff = append(c.srcOff, int32(c.edges.Len()))

	switch {
	case lay.OneHot > 0:
		for v := int32(0); v < g.N; v++ {
			for k := g.FeatOff[v]; k < g.FeatOff[v+1]; k++ {
				c.xnode = append(c.xnode, c.base+v)
			}
		}
		c.xcode = append(c.xcode, g.Codes...)
		c.xw = append(c.xw, g.Weights...)
		c.featOff = append(c.featOff, int32(len(c.xcode)))
	case lay.NodeDense > 0:
		c.x = append(c.x, g.X...)
		c.featOff = append(c.featOff, int32(len(c.x)))
	}
	if len(lay.NodeCat) > 0 {
		c.xcat = arrowx.AppendCodes(c.xcat, g.NodeCat, c.nodeWidth)
		c.catOff = append(c.catOff, int32(len(c.xcat)/c.nodeWidth))
	}
	if lay.Targets > 0 {
		c.targets = append(c.targets, g.Y...)
		c.tgtOff = append(c.tgtOff, int32(len(c.targets)))
	}
	c.base += g.N
}

// record wraps the columns as an Arrow record batch without copying the
// numeric data, in the order of wire.BatchSchema.
func (c *collator) record(schema *arrow.Schema, mem memory.Allocator) arrow.RecordBatch {
	n := len(c.ids)
	lay := c.lay
	if c.edges.DeferSrc {
		c.lentSrc()
	}
	i32 := arrow.PrimitiveTypes.Int32
	f32 := arrow.PrimitiveTypes.Float32
	cols := []arrow.Array{
		arrowx.Primitive(arrow.PrimitiveTypes.Int64, n, arrow.Int64Traits.CastToBytes(c.ids)),
		arrowx.Primitive(i32, n, arrow.Int32Traits.CastToBytes(c.nnodes)),
		arrowx.List(i32, c.srcOff, c.edges.Len(), arrow.Int32Traits.CastToBytes(c.edges.Src)),
		arrowx.List(i32, c.srcOff, c.edges.Len(), arrow.Int32Traits.CastToBytes(c.edges.Dst)),
	}
	if len(lay.NodeCat) > 0 {
		cols = append(cols, arrowx.List(arrowx.CodeType(c.nodeWidth), c.catOff, len(c.xcat)/c.nodeWidth, c.xcat))
	}
	switch {
	case lay.NodeDense > 0:
		cols = append(cols, arrowx.List(f32, c.featOff, len(c.x), arrow.Float32Traits.CastToBytes(c.x)))
	case lay.OneHot > 0:
		cols = append(cols,
			arrowx.List(i32, c.featOff, len(c.xnode), arrow.Int32Traits.CastToBytes(c.xnode)),
			arrowx.List(i32, c.featOff, len(c.xcode), arrow.Int32Traits.CastToBytes(c.xcode)),
			arrowx.List(f32, c.featOff, len(c.xw), arrow.Float32Traits.CastToBytes(c.xw)))
	}
	if len(lay.EdgeCat) > 0 {
		cols = append(cols, arrowx.List(arrowx.CodeType(c.edgeWidth), c.ecatOff, len(c.ecat)/c.edgeWidth, c.ecat))
	}
	if lay.EdgeDense > 0 {
		cols = append(cols, arrowx.List(f32, c.exOff, len(c.ex), arrow.Float32Traits.CastToBytes(c.ex)))
	}
	if lay.Targets > 0 {
		cols = append(cols, arrowx.List(f32, c.tgtOff, len(c.targets), arrow.Float32Traits.CastToBytes(c.targets)))
	} else {
		cols = append(cols,
			arrowx.Primitive(i32, n, arrow.Int32Traits.CastToBytes(c.y)),
			arrowx.Primitive(i32, n, arrow.Int32Traits.CastToBytes(c.ymix)),
			arrowx.Primitive(f32, n, arrow.Float32Traits.CastToBytes(c.yq)))
	}
	sb := array.NewStringBuilder(mem)
	sb.AppendValues(c.policy, nil)
	cols = append(cols, sb.NewArray())
	sb.Release()
	cols = append(cols, arrowx.Bools(mem, c.padded))
	return arrowx.Record(schema, n, cols)
}

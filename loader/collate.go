package loader

import (
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/internal/arrowx"
	"github.com/augloader/augloader/shard"
)

// Batch columns (docs/protocol.md, "Batch schema"). One row per graph;
// every list column's values flatten, without a loop over graphs, into
// the PyG batch: edge_src/edge_dst → edge_index (both directions,
// batch-global node ids, coalesced per graph), num_nodes → ptr and batch,
// x_node/x_code/x_weight → the sparse one-hot features (or x, dense).
const (
	ColGraphID  = "graph_id"
	ColNumNodes = "num_nodes"
	ColEdgeSrc  = "edge_src"
	ColEdgeDst  = "edge_dst"
	ColXNode    = "x_node"
	ColXCode    = "x_code"
	ColXWeight  = "x_weight"
	ColX        = "x"
	ColY        = "y"
	ColYMix     = "y_mix"
	ColYQ       = "y_q"
	ColPolicy   = "policy"
	ColPadded   = "padded"

	// ProtocolVersion is the batch schema's version (schema metadata).
	ProtocolVersion = 1
)

// BatchSchema is the schema of every record batch for a dataset.
func BatchSchema(man *shard.Manifest, req Request) *arrow.Schema {
	i32 := arrow.PrimitiveTypes.Int32
	list := func(t arrow.DataType) arrow.DataType { return arrow.ListOfNonNullable(t) }
	fields := []arrow.Field{
		{Name: ColGraphID, Type: arrow.PrimitiveTypes.Int64},
		{Name: ColNumNodes, Type: i32},
		{Name: ColEdgeSrc, Type: list(i32)},
		{Name: ColEdgeDst, Type: list(i32)},
	}
	if man.Features.Kind.Categorical() {
		fields = append(fields,
			arrow.Field{Name: ColXNode, Type: list(i32)},
			arrow.Field{Name: ColXCode, Type: list(i32)},
			arrow.Field{Name: ColXWeight, Type: list(arrow.PrimitiveTypes.Float32)})
	} else {
		fields = append(fields, arrow.Field{Name: ColX, Type: list(arrow.PrimitiveTypes.Float32)})
	}
	fields = append(fields,
		arrow.Field{Name: ColY, Type: i32},
		arrow.Field{Name: ColYMix, Type: i32},
		arrow.Field{Name: ColYQ, Type: arrow.PrimitiveTypes.Float32},
		arrow.Field{Name: ColPolicy, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: ColPadded, Type: arrow.FixedWidthTypes.Boolean},
	)
	md := arrow.NewMetadata(
		[]string{"augloader.protocol_version", "augloader.dataset", "augloader.feature_kind", "augloader.feature_dim",
			"augloader.classes", "augloader.epoch", "augloader.rank", "augloader.world"},
		[]string{strconv.Itoa(ProtocolVersion), man.Dataset, string(man.Features.Kind), strconv.Itoa(man.Features.Dim),
			strconv.Itoa(man.Classes), strconv.FormatUint(req.Epoch, 10), strconv.Itoa(req.Rank), strconv.Itoa(req.World)},
	)
	return arrow.NewSchema(fields, &md)
}

// collator accumulates one batch's columns. Its slices back the record
// batch it builds without a copy, so a collator is reused (reset) only
// after that batch's sink has returned: Stream's sender puts it back in the
// Loader's pool, and later batches append into capacity earlier ones grew.
type collator struct {
	dense                 bool
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
}

func (c *collator) reset(dense bool) {
	c.dense, c.base = dense, 0
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
}

// add appends one augmented graph. fused says its edges are already in
// c.edges (aug.CoalescedApplier, at base c.base); otherwise they are
// expanded from g.Edges.
func (c *collator) add(g *aug.Graph, policy string, padded, fused bool) {
	c.ids = append(c.ids, g.ID)
	c.nnodes = append(c.nnodes, g.N)
	c.y = append(c.y, g.Label)
	c.ymix = append(c.ymix, g.MixLabel)
	c.yq = append(c.yq, g.Q)
	c.policy = append(c.policy, policy)
	c.padded = append(c.padded, padded)

	if !fused {
		c.edges.Append(g, c.base)
	}
	c.srcOff = append(c.srcOff, int32(c.edges.Len()))

	if c.dense {
		c.x = append(c.x, g.X...)
		c.featOff = append(c.featOff, int32(len(c.x)))
	} else {
		for v := int32(0); v < g.N; v++ {
			for k := g.FeatOff[v]; k < g.FeatOff[v+1]; k++ {
				c.xnode = append(c.xnode, c.base+v)
			}
		}
		c.xcode = append(c.xcode, g.Codes...)
		c.xw = append(c.xw, g.Weights...)
		c.featOff = append(c.featOff, int32(len(c.xcode)))
	}
	c.base += g.N
}

// record wraps the columns as an Arrow record batch without copying the
// numeric data.
func (c *collator) record(schema *arrow.Schema, mem memory.Allocator) arrow.RecordBatch {
	n := len(c.ids)
	i32 := arrow.PrimitiveTypes.Int32
	f32 := arrow.PrimitiveTypes.Float32
	cols := []arrow.Array{
		arrowx.Primitive(arrow.PrimitiveTypes.Int64, n, arrow.Int64Traits.CastToBytes(c.ids)),
		arrowx.Primitive(i32, n, arrow.Int32Traits.CastToBytes(c.nnodes)),
		arrowx.List(i32, c.srcOff, c.edges.Len(), arrow.Int32Traits.CastToBytes(c.edges.Src)),
		arrowx.List(i32, c.srcOff, c.edges.Len(), arrow.Int32Traits.CastToBytes(c.edges.Dst)),
	}
	if c.dense {
		cols = append(cols, arrowx.List(f32, c.featOff, len(c.x), arrow.Float32Traits.CastToBytes(c.x)))
	} else {
		cols = append(cols,
			arrowx.List(i32, c.featOff, len(c.xnode), arrow.Int32Traits.CastToBytes(c.xnode)),
			arrowx.List(i32, c.featOff, len(c.xcode), arrow.Int32Traits.CastToBytes(c.xcode)),
			arrowx.List(f32, c.featOff, len(c.xw), arrow.Float32Traits.CastToBytes(c.xw)))
	}
	cols = append(cols,
		arrowx.Primitive(i32, n, arrow.Int32Traits.CastToBytes(c.y)),
		arrowx.Primitive(i32, n, arrow.Int32Traits.CastToBytes(c.ymix)),
		arrowx.Primitive(f32, n, arrow.Float32Traits.CastToBytes(c.yq)))
	sb := array.NewStringBuilder(mem)
	sb.AppendValues(c.policy, nil)
	cols = append(cols, sb.NewArray())
	sb.Release()
	bb := array.NewBooleanBuilder(mem)
	bb.AppendValues(c.padded, nil)
	cols = append(cols, bb.NewArray())
	bb.Release()
	rec := array.NewRecordBatch(schema, cols, int64(n))
	for _, col := range cols {
		col.Release()
	}
	return rec
}

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

// BatchSchema is the schema of every record batch the loader builds for
// req: wire's batch columns, with the dataset's feature encoding.
func BatchSchema(man *shard.Manifest, req wire.Request) *arrow.Schema {
	return wire.BatchSchema(wire.SchemaInfo{Dataset: man.Dataset, FeatureKind: string(man.Features.Kind),
		Dense: !man.Features.Kind.Categorical(), FeatureDim: man.Features.Dim, Classes: man.Classes, Epoch: req.Epoch, Rank: req.Rank, World: req.World})
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

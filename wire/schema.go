package wire

import (
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
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
)

// SchemaVersion is the batch schema's version (schema metadata
// MetaProtocolVersion).
const SchemaVersion = 1

// Schema-metadata keys of every served stream.
const (
	MetaProtocolVersion = "augloader.protocol_version"
	MetaDataset         = "augloader.dataset"
	MetaFeatureKind     = "augloader.feature_kind"
	MetaFeatureDim      = "augloader.feature_dim"
	MetaClasses         = "augloader.classes"
	MetaEpoch           = "augloader.epoch"
	MetaRank            = "augloader.rank"
	MetaWorld           = "augloader.world"
)

// SchemaInfo is what a stream's schema says besides its columns.
type SchemaInfo struct {
	Dataset string
	// FeatureKind is the shards' feature kind (shard.FeatureKind), as the
	// metadata says it; Dense says whether the features are a dense
	// float block (the x column) rather than sparse one-hot mixes of
	// codes (x_node, x_code, x_weight).
	FeatureKind string
	Dense       bool
	FeatureDim  int
	Classes     int
	Epoch       uint64
	Rank, World int
}

// BatchSchema is the schema of every record batch of a stream.
func BatchSchema(s SchemaInfo) *arrow.Schema {
	i32 := arrow.PrimitiveTypes.Int32
	list := func(t arrow.DataType) arrow.DataType { return arrow.ListOfNonNullable(t) }
	fields := []arrow.Field{
		{Name: ColGraphID, Type: arrow.PrimitiveTypes.Int64},
		{Name: ColNumNodes, Type: i32},
		{Name: ColEdgeSrc, Type: list(i32)},
		{Name: ColEdgeDst, Type: list(i32)},
	}
	if s.Dense {
		fields = append(fields, arrow.Field{Name: ColX, Type: list(arrow.PrimitiveTypes.Float32)})
	} else {
		fields = append(fields,
			arrow.Field{Name: ColXNode, Type: list(i32)},
			arrow.Field{Name: ColXCode, Type: list(i32)},
			arrow.Field{Name: ColXWeight, Type: list(arrow.PrimitiveTypes.Float32)})
	}
	fields = append(fields,
		arrow.Field{Name: ColY, Type: i32},
		arrow.Field{Name: ColYMix, Type: i32},
		arrow.Field{Name: ColYQ, Type: arrow.PrimitiveTypes.Float32},
		arrow.Field{Name: ColPolicy, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: ColPadded, Type: arrow.FixedWidthTypes.Boolean},
	)
	md := arrow.NewMetadata(
		[]string{MetaProtocolVersion, MetaDataset, MetaFeatureKind, MetaFeatureDim,
			MetaClasses, MetaEpoch, MetaRank, MetaWorld},
		[]string{strconv.Itoa(SchemaVersion), s.Dataset, s.FeatureKind, strconv.Itoa(s.FeatureDim),
			strconv.Itoa(s.Classes), strconv.FormatUint(s.Epoch, 10), strconv.Itoa(s.Rank), strconv.Itoa(s.World)},
	)
	return arrow.NewSchema(fields, &md)
}

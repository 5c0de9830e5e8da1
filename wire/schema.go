package wire

import (
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/augloader/augloader/internal/arrowx"
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
	// Batch schema 2: categorical node columns (N × columns codes,
	// node-major), edge features aligned with edge_src/edge_dst (2E ×
	// columns codes, 2E × dense floats), float targets (T per graph,
	// NaN: missing) in place of y, y_mix and y_q.
	ColXCat    = "x_cat"
	ColEdgeCat = "edge_cat"
	ColEdgeX   = "edge_x"
	ColTargets = "targets"
)

// SchemaVersion is the newest batch schema version (schema metadata
// MetaProtocolVersion): 2 adds the columns of molecule and OGB data. A
// stream without them says 1 and is byte for byte what it was.
const SchemaVersion = 2

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
	// Batch schema 2 (each only in a stream with the columns it
	// describes): the task (class, binary, regression) and target count;
	// the node and edge columns' vocabulary sizes (comma-separated) and
	// float widths; the edge fill's codes and value.
	MetaTask      = "augloader.task"
	MetaTargets   = "augloader.targets"
	MetaNodeVocab = "augloader.node_vocab"
	MetaNodeDense = "augloader.node_dense"
	MetaEdgeVocab = "augloader.edge_vocab"
	MetaEdgeDense = "augloader.edge_dense"
	MetaEdgeFill  = "augloader.edge_fill"
	MetaEdgeFillX = "augloader.edge_fill_value"
	// MetaTwins, only in a twin stream, is the copies of each graph a
	// record batch holds (rows twin-major: twin t's graphs are rows
	// t·n … t·n+n−1 of a batch of k·n rows).
	MetaTwins = "augloader.twins"
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

	// Batch schema 2. NodeVocab: the categorical node columns' vocabulary
	// sizes (x_cat; codes CodeWidth bytes wide: the narrowest holding
	// every vocabulary size, so the fill's reserved code too); EdgeVocab
	// and EdgeDense the edge columns (edge_cat, edge_x), EdgeFill and
	// EdgeFillX the fill; Targets > 0 for float targets (Task binary or
	// regression).
	NodeVocab []int32
	EdgeVocab []int32
	EdgeDense int
	EdgeFill  []int32
	EdgeFillX float32
	Targets   int
	Task      string
	// Twins > 0: a twin stream of that many copies (MetaTwins).
	Twins int
}

// V2 reports whether the stream is batch schema 2: it has schema 2's
// columns, or its shards are format 3 (feature kind "columns": a float
// node block alone or no node features at all is told by schema 2's
// metadata, which schema 1 cannot say).
func (s SchemaInfo) V2() bool {
	return len(s.NodeVocab) > 0 || len(s.EdgeVocab) > 0 || s.EdgeDense > 0 || s.Targets > 0 ||
		(s.Task != "" && s.Task != "class") || s.FeatureKind == "columns"
}

// CodeWidth is the bytes of a code (1, 2 or 4) that holds codes 0..max of
// vocabs (the fill's reserved code is a vocabulary's size); the column's
// Arrow type is arrowx.CodeType of it.
func CodeWidth(vocabs []int32) int {
	m := int32(0)
	for _, v := range vocabs {
		m = max(m, v)
	}
	return arrowx.CodeWidth(int64(m))
}

func joinInts(v []int32) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.Itoa(int(x))
	}
	return strings.Join(parts, ",")
}

// Copies reports how many copies of each graph a stream's record batches
// hold: its MetaTwins, or 1 (a plain stream, or a value that is not a
// count from 2 to MaxTwins).
func Copies(s *arrow.Schema) int {
	if s == nil {
		return 1
	}
	md := s.Metadata()
	if i := md.FindKey(MetaTwins); i >= 0 {
		if k, err := strconv.Atoi(md.Values()[i]); err == nil && k >= 2 && k <= MaxTwins {
			return k
		}
	}
	return 1
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
	f32 := arrow.PrimitiveTypes.Float32
	switch {
	case len(s.NodeVocab) > 0:
		fields = append(fields, arrow.Field{Name: ColXCat, Type: list(arrowx.CodeType(CodeWidth(s.NodeVocab)))})
		if s.Dense {
			fields = append(fields, arrow.Field{Name: ColX, Type: list(f32)})
		}
	case s.Dense:
		fields = append(fields, arrow.Field{Name: ColX, Type: list(f32)})
	case !s.V2() || s.FeatureDim > 0:
		// Formats 1 and 2's one-hot codes (a format 3 set without node
		// features has no node column).
		fields = append(fields,
			arrow.Field{Name: ColXNode, Type: list(i32)},
			arrow.Field{Name: ColXCode, Type: list(i32)},
			arrow.Field{Name: ColXWeight, Type: list(f32)})
	}
	if len(s.EdgeVocab) > 0 {
		fields = append(fields, arrow.Field{Name: ColEdgeCat, Type: list(arrowx.CodeType(CodeWidth(s.EdgeVocab)))})
	}
	if s.EdgeDense > 0 {
		fields = append(fields, arrow.Field{Name: ColEdgeX, Type: list(f32)})
	}
	if s.Targets > 0 {
		fields = append(fields, arrow.Field{Name: ColTargets, Type: list(f32)})
	} else {
		fields = append(fields,
			arrow.Field{Name: ColY, Type: i32},
			arrow.Field{Name: ColYMix, Type: i32},
			arrow.Field{Name: ColYQ, Type: f32})
	}
	fields = append(fields,
		arrow.Field{Name: ColPolicy, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: ColPadded, Type: arrow.FixedWidthTypes.Boolean},
	)
	version := 1
	if s.V2() {
		version = 2
	}
	keys := []string{MetaProtocolVersion, MetaDataset, MetaFeatureKind, MetaFeatureDim,
		MetaClasses, MetaEpoch, MetaRank, MetaWorld}
	vals := []string{strconv.Itoa(version), s.Dataset, s.FeatureKind, strconv.Itoa(s.FeatureDim),
		strconv.Itoa(s.Classes), strconv.FormatUint(s.Epoch, 10), strconv.Itoa(s.Rank), strconv.Itoa(s.World)}
	if s.V2() {
		task := s.Task
		if task == "" {
			task = "class"
		}
		keys = append(keys, MetaTask, MetaTargets, MetaNodeVocab, MetaNodeDense, MetaEdgeVocab, MetaEdgeDense, MetaEdgeFill, MetaEdgeFillX)
		nodeDense := 0
		if s.Dense {
			nodeDense = s.FeatureDim
		}
		vals = append(vals, task, strconv.Itoa(s.Targets), joinInts(s.NodeVocab), strconv.Itoa(nodeDense),
			joinInts(s.EdgeVocab), strconv.Itoa(s.EdgeDense), joinInts(s.EdgeFill),
			strconv.FormatFloat(float64(s.EdgeFillX), 'g', -1, 32))
	}
	if s.Twins > 0 {
		keys = append(keys, MetaTwins)
		vals = append(vals, strconv.Itoa(s.Twins))
	}
	md := arrow.NewMetadata(keys, vals)
	return arrow.NewSchema(fields, &md)
}

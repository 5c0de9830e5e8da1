// Package shard defines, writes, reads and verifies augloader's on-disk
// dataset format: a folder of Arrow IPC *file* shards, one row per graph,
// plus a manifest.json that carries the dataset statistics, the label and
// feature maps, and a CRC-32C per shard (Arrow IPC has no data checksums).
// A shard's record batches are its pages: the unit a reader reads, checks
// and caches.
//
// The byte-level specification is docs/format.md; the constants in this file
// are part of the format and change only together with that document.
//
// Usage (Example in example_test.go, compiled and run by go test): a
// Writer appends graphs in id order and Finish renames the folder into
// place; Open verifies every shard's checksum and Reader.Graph returns a
// zero-copy view of one graph.
//
// Under a cache limit (WithCacheLimit) Open reads only the manifest and
// pages are read on demand into a page cache (shard/internal/pagecache):
// Pin holds a graph's page while its slices are read. A stream that knows
// its batches hands their graphs over once (Schedule), then pins for a
// batch and releases, charging what it built from a graph (Charge); the
// cache derives reading ahead, eviction by next use, compaction and
// cooling from that future. A shard file is read through once, on first need,
// to check its CRC-32C and note each page's; every page read after that
// checks the page's own CRC-32C, and every page decoded is checked as at
// Open (check.go: schema, offsets, edges in range, codes in their
// vocabularies, sizes the manifest promised). A damaged page is an error
// naming its shard, never other bytes.
//
// A Reader is safe for concurrent use by many goroutines once Open returns.
// A Writer is not.
package shard

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/augloader/augloader/internal/arrowx"
)

// FormatVersion numbers the shard format. These constants are part of the
// format: a reader accepts MinSupportedVersion..CurrentVersion and refuses
// anything newer with ErrVersion.
type FormatVersion int

const (
	// FormatV1 is the first format: one row per graph with the columns
	// graph_id, label, num_nodes, edges, and x_code (categorical features)
	// or x (dense float32 features), optionally edge_label; whole-file
	// CRC-32C per shard in the manifest.
	FormatV1 FormatVersion = 1
	// FormatV2 seals the manifest: its "checksum" is the SHA-256 of its
	// own content (internal/jsonseal), so an edited label map, name or
	// count is refused by Open and Verify. Shards are as in V1.
	FormatV2 FormatVersion = 2
	// FormatV3 carries what molecule and OGB datasets need: any number of
	// categorical node feature columns (x_cat, codes stored in the
	// narrowest of uint8, uint16 or int32 that holds them) and/or a float
	// block (x); edge features likewise (edge_cat, edge_x), aligned with
	// edges; and a class or T float targets per graph (targets, NaN where
	// missing), the manifest saying which (Task). The writer writes V3 only
	// for what V2 cannot hold, so TU datasets' shards are unchanged.
	FormatV3 FormatVersion = 3
	// FormatV4 holds 3D atomistic structures (shard/structures.go): per
	// structure its atoms' numbers and positions, the cell and pbc, the
	// directed neighbour list under the manifest's cutoff with each edge's
	// cell shift, and named float64 properties (energy, forces, stress,
	// ...), the manifest's structures key saying which.
	FormatV4 FormatVersion = 4

	// CurrentVersion is the newest version this code reads and writes.
	CurrentVersion = FormatV4
	// MinSupportedVersion is the oldest format this code reads.
	MinSupportedVersion = FormatV1
)

// Names and limits that are part of the format.
const (
	// ManifestName is the manifest's file name inside a shard folder.
	ManifestName = "manifest.json"
	// FormatName is the value of the manifest's "format" key.
	FormatName = "augloader-shards"
	// ShardPattern names shard files by their index.
	ShardPattern = "shard-%05d.arrow"
	// generationShardPattern names them in a folder with a generation
	// (Manifest.Generation): index, then generation.
	generationShardPattern = "shard-%05d.%s.arrow"

	// MaxManifestBytes caps how much of a manifest is read.
	MaxManifestBytes = 64 << 20
	// MaxBatchBodyBytes caps one record batch body (Arrow's own default is
	// 256 MiB); the writer never produces bodies near it.
	MaxBatchBodyBytes = 1 << 30
	// MaxNodesPerGraph bounds num_nodes so that local ids fit int32.
	MaxNodesPerGraph = 1<<31 - 1

	// Schema metadata keys.
	MetaFormatVersion = "augloader.format_version"
	MetaDataset       = "augloader.dataset"
	MetaFeatureKind   = "augloader.feature_kind"
	MetaFeatureDim    = "augloader.feature_dim"
)

// Column names, in schema order.
const (
	ColGraphID   = "graph_id"
	ColLabel     = "label"
	ColNumNodes  = "num_nodes"
	ColEdges     = "edges"
	ColXCode     = "x_code"
	ColX         = "x"
	ColEdgeLabel = "edge_label"
	// Format 3.
	ColXCat    = "x_cat"
	ColEdgeCat = "edge_cat"
	ColEdgeX   = "edge_x"
	ColTargets = "targets"
)

// FeatureKind says how node features are encoded.
type FeatureKind string

const (
	// FeatureLabels: one int32 code per node, code = raw node label − min
	// label (PyG's one-hot of the node label); dim = max − min + 1.
	FeatureLabels FeatureKind = "labels"
	// FeatureDegree: one int32 code per node, the index of the node's degree
	// in the sorted distinct degrees of the whole dataset (the GIN convention).
	FeatureDegree FeatureKind = "degree"
	// FeatureAttributes: dim float32 values per node from DS_node_attributes.
	FeatureAttributes FeatureKind = "attributes"
	// FeatureColumns (format 3): Manifest.NodeFeatures says what a node
	// carries (categorical columns and/or a float block, maybe nothing).
	FeatureColumns FeatureKind = "columns"
)

// Categorical reports whether features are stored as one code per node
// (formats 1 and 2: a one-hot of that code).
func (k FeatureKind) Categorical() bool { return k == FeatureLabels || k == FeatureDegree }

// Valid reports whether k is a kind this format knows.
func (k FeatureKind) Valid() bool {
	return k == FeatureLabels || k == FeatureDegree || k == FeatureAttributes || k == FeatureColumns || k == FeatureStructures
}

// Columns describe format 3's node (or edge) features: categorical
// columns, each of codes 0..Vocab-1, stored Width bytes a code, node-major
// (node v's codes are v·len(Categorical) … (v+1)·len(Categorical)−1); and a
// float block of Dense values per node. Either may be absent.
type Columns struct {
	Categorical []Column `json:"categorical,omitempty"`
	// Width is a stored code's bytes: 1 (uint8), 2 (uint16) or 4 (int32),
	// the narrowest that holds every column's codes.
	Width int `json:"width,omitempty"`
	Dense int `json:"dense,omitempty"`
}

// Column is one categorical column.
type Column struct {
	Name  string `json:"name"`
	Vocab int    `json:"vocab"` // codes 0..Vocab-1
}

// Cols is the number of categorical columns.
func (c *Columns) Cols() int {
	if c == nil {
		return 0
	}
	return len(c.Categorical)
}

// DenseDim is the float block's width (0 when c is nil).
func (c *Columns) DenseDim() int {
	if c == nil {
		return 0
	}
	return c.Dense
}

// Vocabs lists the columns' vocabulary sizes.
func (c *Columns) Vocabs() []int32 {
	if c == nil {
		return nil
	}
	out := make([]int32, len(c.Categorical))
	for i, col := range c.Categorical {
		out[i] = int32(col.Vocab)
	}
	return out
}

// WidthFor is the narrowest code width (1, 2 or 4 bytes) holding codes
// 0..maxCode: a Columns' Width.
func WidthFor(maxCode int64) int { return arrowx.CodeWidth(maxCode) }

// TaskKind says what a format 3 dataset's graph labels are.
type TaskKind string

// Task kinds.
const (
	// TaskClass: one class per graph (label, as in formats 1 and 2).
	TaskClass TaskKind = "class"
	// TaskBinary: T binary targets per graph (0 or 1, NaN: missing), the
	// OGB multi-task molecule sets.
	TaskBinary TaskKind = "binary"
	// TaskRegression: T real targets per graph (NaN: missing).
	TaskRegression TaskKind = "regression"
	// TaskStructures: a format 4 folder's layout (Layout): structures
	// whose labels are their properties, not a task of this kind's.
	TaskStructures TaskKind = "structures"
)

// Task is a format 3 dataset's label kind.
type Task struct {
	Kind    TaskKind `json:"kind"`
	Targets int      `json:"targets,omitempty"` // T (binary, regression)
	// Names of the targets, when the input gives them.
	Names []string `json:"names,omitempty"`
	// Missing counts the NaN targets of the whole dataset.
	Missing int64 `json:"missing,omitempty"`
}

// Floats reports whether the task's labels are float targets.
func (t *Task) Floats() bool { return t != nil && (t.Kind == TaskBinary || t.Kind == TaskRegression) }

// Compression names a body codec.
type Compression string

// Codecs a shard may use (Arrow IPC body compression).
const (
	CompressZstd Compression = "zstd"
	CompressLZ4  Compression = "lz4"
	CompressNone Compression = "none"
)

// ParseCompression accepts zstd, lz4 or none.
func ParseCompression(s string) (Compression, error) {
	switch c := Compression(s); c {
	case CompressZstd, CompressLZ4, CompressNone:
		return c, nil
	}
	return "", fmt.Errorf("shard: unknown compression %q (want zstd, lz4 or none)", s)
}

// Schema returns the Arrow schema of formats 1 and 2 for the given
// features.
func Schema(dataset string, kind FeatureKind, dim int, edgeLabels bool) *arrow.Schema {
	fields := []arrow.Field{
		{Name: ColGraphID, Type: arrow.PrimitiveTypes.Int64},
		{Name: ColLabel, Type: arrow.PrimitiveTypes.Int32},
		{Name: ColNumNodes, Type: arrow.PrimitiveTypes.Int32},
		{Name: ColEdges, Type: arrow.ListOfNonNullable(arrow.PrimitiveTypes.Int32)},
	}
	if kind.Categorical() {
		fields = append(fields, arrow.Field{Name: ColXCode, Type: arrow.ListOfNonNullable(arrow.PrimitiveTypes.Int32)})
	} else {
		fields = append(fields, arrow.Field{Name: ColX, Type: arrow.ListOfNonNullable(arrow.PrimitiveTypes.Float32)})
	}
	if edgeLabels {
		fields = append(fields, arrow.Field{Name: ColEdgeLabel, Type: arrow.ListOfNonNullable(arrow.PrimitiveTypes.Int32)})
	}
	md := arrow.NewMetadata(
		[]string{MetaFormatVersion, MetaDataset, MetaFeatureKind, MetaFeatureDim},
		[]string{fmt.Sprint(int(FormatV2)), dataset, string(kind), fmt.Sprint(dim)},
	)
	return arrow.NewSchema(fields, &md)
}

// SchemaV3 returns the Arrow schema of format 3: graph_id; label (a class
// task) or targets (T float32, NaN: missing); num_nodes; edges; then, each
// only when present, x_cat, x, edge_cat, edge_x.
func SchemaV3(dataset string, node, edge *Columns, task *Task) *arrow.Schema {
	list := func(t arrow.DataType) arrow.DataType { return arrow.ListOfNonNullable(t) }
	fields := []arrow.Field{{Name: ColGraphID, Type: arrow.PrimitiveTypes.Int64}}
	if task.Floats() {
		fields = append(fields, arrow.Field{Name: ColTargets, Type: list(arrow.PrimitiveTypes.Float32)})
	} else {
		fields = append(fields, arrow.Field{Name: ColLabel, Type: arrow.PrimitiveTypes.Int32})
	}
	fields = append(fields,
		arrow.Field{Name: ColNumNodes, Type: arrow.PrimitiveTypes.Int32},
		arrow.Field{Name: ColEdges, Type: list(arrow.PrimitiveTypes.Int32)})
	if node.Cols() > 0 {
		fields = append(fields, arrow.Field{Name: ColXCat, Type: list(arrowx.CodeType(node.Width))})
	}
	if node.DenseDim() > 0 {
		fields = append(fields, arrow.Field{Name: ColX, Type: list(arrow.PrimitiveTypes.Float32)})
	}
	if edge.Cols() > 0 {
		fields = append(fields, arrow.Field{Name: ColEdgeCat, Type: list(arrowx.CodeType(edge.Width))})
	}
	if edge.DenseDim() > 0 {
		fields = append(fields, arrow.Field{Name: ColEdgeX, Type: list(arrow.PrimitiveTypes.Float32)})
	}
	md := arrow.NewMetadata(
		[]string{MetaFormatVersion, MetaDataset, MetaFeatureKind},
		[]string{fmt.Sprint(int(FormatV3)), dataset, string(FeatureColumns)},
	)
	return arrow.NewSchema(fields, &md)
}

// Errors. Every corruption a reader or verifier finds wraps ErrCorrupt, so
// callers test one category with errors.Is; *CorruptionError says where.
var (
	ErrCorrupt  = errors.New("shard: corrupt")
	ErrVersion  = errors.New("shard: unsupported format version")
	ErrNotFound = errors.New("shard: graph not found")
	ErrExists   = errors.New("shard: output exists")
	// ErrCodeWidth: a categorical code does not fit the width the writer
	// was given (a converter then writes again with a wider one).
	ErrCodeWidth = errors.New("shard: code wider than the column width")
)

// CorruptionError names the shard (or manifest) and the field that is wrong.
type CorruptionError struct {
	File   string // shard file or manifest.json
	Field  string // column, key or "checksum", "size", ...
	Detail string
}

func (e *CorruptionError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("shard: corrupt %s: %s", e.File, e.Detail)
	}
	return fmt.Sprintf("shard: corrupt %s: %s: %s", e.File, e.Field, e.Detail)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Unwrap() error { return ErrCorrupt }

func corrupt(file, field, format string, args ...any) error {
	return &CorruptionError{File: file, Field: field, Detail: fmt.Sprintf(format, args...)}
}

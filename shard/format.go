// Package shard defines, writes, reads and verifies augloader's on-disk
// dataset format: a folder of Arrow IPC *file* shards, one row per graph,
// plus a manifest.json that carries the dataset statistics, the label and
// feature maps, and a CRC-32C per shard (Arrow IPC has no data checksums).
//
// The byte-level specification is docs/format.md; the constants in this file
// are part of the format and change only together with that document.
//
// Usage (Example in example_test.go, compiled and run by go test): a
// Writer appends graphs in id order and Finish renames the folder into
// place; Open verifies every shard's checksum and Reader.Graph returns a
// zero-copy view of one graph.
//
// A Reader is safe for concurrent use by many goroutines once Open returns.
// A Writer is not.
package shard

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
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

	// CurrentVersion is what this code writes.
	CurrentVersion = FormatV2
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
)

// Categorical reports whether features are stored as one code per node.
func (k FeatureKind) Categorical() bool { return k == FeatureLabels || k == FeatureDegree }

// Valid reports whether k is a kind this format knows.
func (k FeatureKind) Valid() bool {
	return k == FeatureLabels || k == FeatureDegree || k == FeatureAttributes
}

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

// Schema returns the Arrow schema of format v1 for the given features.
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
		[]string{fmt.Sprint(int(CurrentVersion)), dataset, string(kind), fmt.Sprint(dim)},
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

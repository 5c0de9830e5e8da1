package shard

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/augloader/augloader/internal/jsonseal"
)

// Manifest is manifest.json: everything a reader needs besides the shards.
// Its JSON form is part of the format (docs/format.md).
type Manifest struct {
	Format        string        `json:"format"`
	FormatVersion FormatVersion `json:"format_version"`
	ToolVersion   string        `json:"tool_version"`
	Dataset       string        `json:"dataset"`
	Stats         Stats         `json:"stats"`
	Classes       int           `json:"classes"`
	// LabelMap[c] is the raw graph label that class c stands for.
	LabelMap []string `json:"label_map"`
	Features Features `json:"features"`
	// HasEdgeLabels says the shards carry an edge_label column.
	HasEdgeLabels bool        `json:"has_edge_labels"`
	EdgeLabelDim  int         `json:"edge_label_dim,omitempty"`
	Compression   Compression `json:"compression"`
	Shards        []ShardInfo `json:"shards"`
	Sources       []Source    `json:"sources"`
	// Checksum seals the manifest (FormatV2 on): "sha256:" and the hex
	// SHA-256 of its canonical JSON without this field (internal/jsonseal).
	Checksum string `json:"checksum,omitempty"`
}

// ChecksumField implements jsonseal.Sealed.
func (m *Manifest) ChecksumField() *string { return &m.Checksum }

// Stats are dataset totals after the PyG conventions.
type Stats struct {
	Graphs int64 `json:"graphs"`
	Nodes  int64 `json:"nodes"`
	// Edges counts undirected edges, each once.
	Edges int64 `json:"edges"`
	// DirectedEntries is the number of lines in DS_A.txt.
	DirectedEntries       int64 `json:"directed_entries"`
	SelfLoopsDropped      int64 `json:"self_loops_dropped"`
	DuplicateEdgesDropped int64 `json:"duplicate_edges_dropped"`
	// AsymmetricEdges counts undirected edges listed in one direction only
	// (they are kept: the graph is made undirected).
	AsymmetricEdges int64 `json:"asymmetric_edges"`
	IsolatedNodes   int64 `json:"isolated_nodes"`
	MaxNodes        int64 `json:"max_nodes"`
	MaxEdges        int64 `json:"max_edges"`
}

// Features describes the node feature encoding.
type Features struct {
	Kind FeatureKind `json:"kind"`
	Dim  int         `json:"dim"`
	// LabelMin is the raw node label of code 0 (kind "labels").
	LabelMin int64 `json:"label_min,omitempty"`
	// Degrees[c] is the degree that code c stands for (kind "degree").
	Degrees []int32 `json:"degrees,omitempty"`
}

// ShardInfo describes one shard file.
type ShardInfo struct {
	File       string `json:"file"`
	FirstGraph int64  `json:"first_graph"`
	NumGraphs  int64  `json:"num_graphs"`
	Nodes      int64  `json:"nodes"`
	Edges      int64  `json:"edges"`
	Bytes      int64  `json:"bytes"`
	// CRC32C is the Castagnoli CRC of the whole file, 8 lowercase hex digits.
	CRC32C string `json:"crc32c"`
	// Batches lists the graph count of each record batch, in order.
	Batches []int64 `json:"batches"`
}

// Source is one input file and its SHA-256.
type Source struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// ReadManifest reads and validates dir/manifest.json.
func ReadManifest(dir string) (*Manifest, error) {
	m, _, err := readManifest(dir)
	return m, err
}

// readManifest also returns the SHA-256 of the file's bytes.
func readManifest(dir string) (*Manifest, string, error) {
	path := filepath.Join(dir, ManifestName)
	f, err := os.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("shard: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxManifestBytes+1))
	if err != nil {
		return nil, "", fmt.Errorf("shard: read %s: %w", path, err)
	}
	if len(data) > MaxManifestBytes {
		return nil, "", corrupt(ManifestName, "", "larger than %d bytes", MaxManifestBytes)
	}
	m, err := ParseManifest(data)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(data)
	return m, hex.EncodeToString(sum[:]), nil
}

// ParseManifest decodes and validates a manifest. It never panics on any
// input; every inconsistency is a *CorruptionError or ErrVersion.
func ParseManifest(data []byte) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		// A newer writer may add keys; report the version first if we can.
		var probe struct {
			FormatVersion FormatVersion `json:"format_version"`
		}
		if json.Unmarshal(data, &probe) == nil && probe.FormatVersion > CurrentVersion {
			return nil, fmt.Errorf("%w: manifest is version %d, this build reads %d..%d",
				ErrVersion, probe.FormatVersion, MinSupportedVersion, CurrentVersion)
		}
		return nil, corrupt(ManifestName, "", "invalid JSON: %v", err)
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	if m.FormatVersion >= FormatV2 {
		if err := jsonseal.Check(&m); err != nil {
			return nil, corrupt(ManifestName, "checksum", "%v", err)
		}
	} else if m.Checksum != "" {
		return nil, corrupt(ManifestName, "checksum", "a version 1 manifest has no checksum")
	}
	return &m, nil
}

func (m *Manifest) validate() error {
	if m.Format != FormatName {
		return corrupt(ManifestName, "format", "%q, want %q", m.Format, FormatName)
	}
	if m.FormatVersion > CurrentVersion || m.FormatVersion < MinSupportedVersion {
		return fmt.Errorf("%w: manifest is version %d, this build reads %d..%d",
			ErrVersion, m.FormatVersion, MinSupportedVersion, CurrentVersion)
	}

	if !m.Features.Kind.Valid() {
		return corrupt(ManifestName, "features.kind", "unknown kind %q", m.Features.Kind)
	}
	if m.Features.Dim < 1 {
		return corrupt(ManifestName, "features.dim", "%d is not positive", m.Features.Dim)
	}
	if m.Features.Kind == FeatureDegree && len(m.Features.Degrees) != m.Features.Dim {
		return corrupt(ManifestName, "features.degrees", "%d entries for dim %d", len(m.Features.Degrees), m.Features.Dim)
	}
	if m.Classes < 1 || len(m.LabelMap) != m.Classes {
		return corrupt(ManifestName, "label_map", "%d entries for %d classes", len(m.LabelMap), m.Classes)
	}
	if _, err := ParseCompression(string(m.Compression)); err != nil {
		return corrupt(ManifestName, "compression", "%v", err)
	}
	var next, nodes, edges int64
	for i, s := range m.Shards {
		if s.File != fmt.Sprintf(ShardPattern, i) {
			return corrupt(ManifestName, "shards", "shard %d is named %q, want %q", i, s.File, fmt.Sprintf(ShardPattern, i))
		}
		if s.FirstGraph != next || s.NumGraphs < 1 {
			return corrupt(ManifestName, "shards", "%s covers graphs [%d,+%d), want to start at %d", s.File, s.FirstGraph, s.NumGraphs, next)
		}
		var inBatches int64
		for _, b := range s.Batches {
			if b < 1 {
				return corrupt(ManifestName, "shards", "%s has an empty batch", s.File)
			}
			inBatches += b
		}
		if inBatches != s.NumGraphs {
			return corrupt(ManifestName, "shards", "%s batches hold %d graphs, want %d", s.File, inBatches, s.NumGraphs)
		}
		if len(s.CRC32C) != 8 {
			return corrupt(ManifestName, "shards", "%s crc32c %q is not 8 hex digits", s.File, s.CRC32C)
		}
		next += s.NumGraphs
		nodes += s.Nodes
		edges += s.Edges
	}
	if next != m.Stats.Graphs || nodes != m.Stats.Nodes || edges != m.Stats.Edges {
		return corrupt(ManifestName, "stats", "shards hold %d graphs, %d nodes, %d edges; stats say %d, %d, %d",
			next, nodes, edges, m.Stats.Graphs, m.Stats.Nodes, m.Stats.Edges)
	}
	if m.Stats.Graphs < 1 {
		return corrupt(ManifestName, "stats", "empty dataset")
	}
	return nil
}

// Encode returns the manifest as indented JSON with a final newline,
// sealed (Checksum set) from FormatV2 on.
func (m *Manifest) Encode() ([]byte, error) {
	if m.FormatVersion >= FormatV2 {
		return jsonseal.Seal(m)
	}
	m.Checksum = ""
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

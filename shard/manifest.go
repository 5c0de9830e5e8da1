package shard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

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
	HasEdgeLabels bool `json:"has_edge_labels"`
	EdgeLabelDim  int  `json:"edge_label_dim,omitempty"`
	// Format 3: what nodes and edges carry (Features.Kind is then
	// FeatureColumns), and what the graph labels are.
	NodeFeatures *Columns `json:"node_features,omitempty"`
	EdgeFeatures *Columns `json:"edge_features,omitempty"`
	Task         *Task    `json:"task,omitempty"`
	// Format 4: what structures carry and the neighbour list stored.
	Structures  *Structures `json:"structures,omitempty"`
	Compression Compression `json:"compression"`
	// Order is how graphs are stored: absent for id order, "random:SEED"
	// for a seeded random order (order.go; shards then count positions).
	Order string `json:"order,omitempty"`
	// Generation, when set (16 lowercase hex digits), is in the name of
	// every shard file and of the graph-size index (ShardFile,
	// GraphSizesFile): a folder replaced in object storage puts its new
	// files beside the old ones under new names, then swaps the manifest
	// (docs/format.md, "Generations"). Absent for a local folder.
	Generation string      `json:"generation,omitempty"`
	Shards     []ShardInfo `json:"shards"`
	Sources    []Source    `json:"sources"`
	// Files are the files the converter wrote beside the shards (a split
	// of the input), sealed with the folder so that a folder and its
	// files change together (docs/format.md, "Files beside the shards").
	Files []FileInfo `json:"files,omitempty"`
	// Checksum seals the manifest (FormatV2 on): "sha256:" and the hex
	// SHA-256 of its canonical JSON without this field (internal/jsonseal).
	Checksum string `json:"checksum,omitempty"`

	// order maps positions to ids (nil: id order), set by validate and
	// drawn on first use (a forged count must not allocate at parse).
	order *lazyOrder
}

// ShardFile is the name of shard i's file: ShardPattern, with the
// manifest's generation, if any, before the extension.
func (m *Manifest) ShardFile(i int) string { return shardName(m.Generation, i) }

// GraphSizesFile is the name of the folder's graph-size index:
// GraphSizesName, with the generation, if any, before the extension.
func (m *Manifest) GraphSizesFile() string { return sizesName(m.Generation) }

// FileInfo is a file beside the shards: its name (a split's is
// split-NAME.json), its size and SHA-256. It is stored as StoredName.
type FileInfo struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// StoredName is the name file name (a Files entry's) is stored under: name
// itself, or with the manifest's generation before its extension, so that
// a replacement in object storage never overwrites the old folder's file
// before its manifest is swapped.
func (m *Manifest) StoredName(name string) string { return storedName(m.Generation, name) }

func storedName(generation, name string) string {
	if generation == "" {
		return name
	}
	ext := filepath.Ext(name)
	return strings.TrimSuffix(name, ext) + "." + generation + ext
}

// File is the Files entry named name, or nil.
func (m *Manifest) File(name string) *FileInfo {
	for i := range m.Files {
		if m.Files[i].Name == name {
			return &m.Files[i]
		}
	}
	return nil
}

// ValidFileName reports why name cannot be a file beside the shards (nil
// when it can): a plain name, not hidden, neither the manifest's nor a
// shard's nor the graph-size index's.
func ValidFileName(name string) error {
	if name == "" || name != filepath.Base(name) || name == ManifestName || strings.HasPrefix(name, "graph-sizes.") ||
		strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".arrow") || strings.ContainsAny(name, "\\/\x00") {
		return fmt.Errorf("%q is not a name a file beside the shards may have", name)
	}
	return nil
}

func shardName(generation string, i int) string {
	if generation == "" {
		return fmt.Sprintf(ShardPattern, i)
	}
	return fmt.Sprintf(generationShardPattern, i, generation)
}

func sizesName(generation string) string {
	if generation == "" {
		return GraphSizesName
	}
	return strings.TrimSuffix(GraphSizesName, ".bin") + "." + generation + ".bin"
}

// ValidGeneration reports whether g can be a manifest's generation: 16
// lowercase hex digits.
func ValidGeneration(g string) bool {
	return len(g) == 16 && strings.Trim(g, "0123456789abcdef") == ""
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
	// PageMap, when present, says where the file's schema message and each
	// record batch (page) lie, with their CRC-32C, so a page is read and
	// checked on its own (docs/format.md, "Page map"). Written by the
	// converter; absent in folders written before it (a reader then scans
	// the file once), added by shardconv pagemap.
	PageMap *PageMap `json:"page_map,omitempty"`
}

// PageMap locates a shard file's schema message and pages.
type PageMap struct {
	Schema Extent       `json:"schema"`
	Pages  []PageExtent `json:"pages"`
}

// Extent is a byte range of a shard file and its CRC-32C.
type Extent struct {
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	CRC32C string `json:"crc32c"`
}

// PageExtent is one record batch's message and body: Length bytes from
// Offset, the first Metadata of them its message (as the Arrow footer's
// block says), and their CRC-32C. Page i holds Batches[i] graphs.
type PageExtent struct {
	Offset   int64  `json:"offset"`
	Metadata int64  `json:"metadata"`
	Length   int64  `json:"length"`
	CRC32C   string `json:"crc32c"`
}

// Source is one input file and its SHA-256.
type Source struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// ReadManifest reads and validates dir/manifest.json.
func ReadManifest(dir string) (*Manifest, error) {
	m, _, err := readManifest(context.Background(), DirStore(dir))
	return m, err
}

// ReadManifestStore reads and validates the manifest of the folder st
// holds.
func ReadManifestStore(ctx context.Context, st Store) (*Manifest, error) {
	m, _, err := readManifest(ctx, st)
	return m, err
}

// readManifest also returns the SHA-256 of the file's bytes.
func readManifest(ctx context.Context, st Store) (*Manifest, string, error) {
	var m *Manifest
	data, err := readAll(ctx, st, ManifestName, MaxManifestBytes, func(data []byte) (err error) {
		m, err = ParseManifest(data)
		return err
	})
	if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrVersion) {
		return nil, "", err
	}
	if err != nil {
		dir, local := st.(dirStore)
		if local && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) {
			return nil, "", notShards(string(dir), err)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", fmt.Errorf("shard: %s has no %s: not a shard folder (shardconv convert writes one): %w", st.Location(), ManifestName, err)
		}
		return nil, "", fmt.Errorf("shard: %w", err)
	}
	sum := sha256.Sum256(data)
	return m, hex.EncodeToString(sum[:]), nil
}

// notShards says why dir, which has no manifest.json, is not a shard
// folder, and what to run: the folder is missing (a typo), or it holds a
// dataset that was never converted.
func notShards(dir string, err error) error {
	st, serr := os.Stat(dir)
	switch {
	case serr != nil:
		return fmt.Errorf("shard: %s: no such folder (a shard folder is what shardconv convert -i DATASET -o %s writes)", dir, dir)
	case !st.IsDir():
		return fmt.Errorf("shard: %s is a file, not a shard folder: convert it first (shardconv convert -i %s -o %s.shards)", dir, dir, strings.TrimSuffix(dir, filepath.Ext(dir)))
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		n := e.Name()
		if strings.HasSuffix(n, "_A.txt") || n == "raw" || strings.HasSuffix(n, ".parquet") || strings.HasSuffix(n, ".zip") || strings.HasSuffix(n, ".txt") {
			return fmt.Errorf("shard: %s holds a dataset, not shards (no %s): convert it first: shardconv convert -i %s -o %s.shards", dir, ManifestName, dir, filepath.Clean(dir))
		}
	}
	return fmt.Errorf("shard: %s is not a shard folder: %w (shardconv convert writes one)", dir, err)
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
	if err := m.validateLayout(); err != nil {
		return err
	}
	if _, err := ParseCompression(string(m.Compression)); err != nil {
		return corrupt(ManifestName, "compression", "%v", err)
	}
	if m.Generation != "" && !ValidGeneration(m.Generation) {
		return corrupt(ManifestName, "generation", "%q is not 16 lowercase hex digits", m.Generation)
	}
	var next, nodes, edges int64
	for i, s := range m.Shards {
		if s.File != m.ShardFile(i) {
			return corrupt(ManifestName, "shards", "shard %d is named %q, want %q", i, s.File, m.ShardFile(i))
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
		if !isCRC(s.CRC32C) {
			return corrupt(ManifestName, "shards", "%s crc32c %q is not 8 hex digits", s.File, s.CRC32C)
		}
		if err := s.PageMap.validate(&s); err != nil {
			return corrupt(ManifestName, "page_map", "%s: %v", s.File, err)
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
	for i, f := range m.Files {
		if err := ValidFileName(f.Name); err != nil {
			return corrupt(ManifestName, "files", "%v", err)
		}
		if i > 0 && m.Files[i-1].Name >= f.Name {
			return corrupt(ManifestName, "files", "%q after %q: want sorted, unique names", f.Name, m.Files[i-1].Name)
		}
		if f.Bytes < 0 || len(f.SHA256) != 64 || strings.Trim(f.SHA256, "0123456789abcdef") != "" {
			return corrupt(ManifestName, "files", "%s: %d bytes, sha256 %q", f.Name, f.Bytes, f.SHA256)
		}
	}
	order, err := ParseOrder(m.Order)
	if err != nil || order != m.Order {
		return corrupt(ManifestName, "order", "%q: want absent or random:SEED", m.Order)
	}
	m.order = nil
	if m.Order != "" {
		if err := orderFits(m.Stats.Graphs); err != nil {
			return corrupt(ManifestName, "order", "%v", err)
		}
		m.order = &lazyOrder{order: m.Order, n: m.Stats.Graphs}
	}
	return nil
}

// validateLayout checks what graphs carry: format 1 and 2's one feature
// kind and edge labels, or format 3's columns and task.
func (m *Manifest) validateLayout() error {
	if m.FormatVersion >= FormatV4 {
		switch {
		case m.Features.Kind != FeatureStructures || m.Features.Dim != 0:
			return corrupt(ManifestName, "features", "a format 4 manifest says kind %q (dim 0)", FeatureStructures)
		case m.HasEdgeLabels || m.NodeFeatures != nil || m.EdgeFeatures != nil || m.Task != nil || m.Classes != 0 || len(m.LabelMap) != 0:
			return corrupt(ManifestName, "features", "graph keys in a format 4 manifest")
		case m.Structures == nil:
			return corrupt(ManifestName, "structures", "missing")
		}
		return m.Structures.validate()
	}
	if m.Structures != nil {
		return corrupt(ManifestName, "structures", "in a format %d manifest", m.FormatVersion)
	}
	if m.FormatVersion < FormatV3 {
		switch {
		case m.Features.Kind == FeatureColumns:
			return corrupt(ManifestName, "features.kind", "%q in a format %d manifest", m.Features.Kind, m.FormatVersion)
		case m.NodeFeatures != nil || m.EdgeFeatures != nil || m.Task != nil:
			return corrupt(ManifestName, "node_features", "format 3 keys in a format %d manifest", m.FormatVersion)
		case m.Features.Dim < 1:
			return corrupt(ManifestName, "features.dim", "%d is not positive", m.Features.Dim)
		case m.Features.Kind == FeatureDegree && len(m.Features.Degrees) != m.Features.Dim:
			return corrupt(ManifestName, "features.degrees", "%d entries for dim %d", len(m.Features.Degrees), m.Features.Dim)
		case m.Classes < 1 || len(m.LabelMap) != m.Classes:
			return corrupt(ManifestName, "label_map", "%d entries for %d classes", len(m.LabelMap), m.Classes)
		}
		return nil
	}
	switch {
	case m.Features.Kind != FeatureColumns || m.Features.Dim != 0:
		return corrupt(ManifestName, "features", "a format 3 manifest says kind %q (dim 0) and describes nodes in node_features", FeatureColumns)
	case m.HasEdgeLabels || m.EdgeLabelDim != 0:
		return corrupt(ManifestName, "has_edge_labels", "a format 3 manifest describes edges in edge_features")
	case m.Task == nil:
		return corrupt(ManifestName, "task", "missing")
	}
	for _, c := range []struct {
		name string
		cols *Columns
	}{{"node_features", m.NodeFeatures}, {"edge_features", m.EdgeFeatures}} {
		if c.cols == nil {
			continue
		}
		if c.cols.Dense < 0 {
			return corrupt(ManifestName, c.name, "dense %d", c.cols.Dense)
		}
		if len(c.cols.Categorical) > 0 && c.cols.Width != 1 && c.cols.Width != 2 && c.cols.Width != 4 {
			return corrupt(ManifestName, c.name, "width %d (want 1, 2 or 4 bytes)", c.cols.Width)
		}
		for i, col := range c.cols.Categorical {
			if col.Vocab < 1 || int64(col.Vocab) > 1<<(8*c.cols.Width) || col.Vocab >= 1<<31-1 {
				return corrupt(ManifestName, c.name, "column %d (%s): vocabulary %d for width %d", i, col.Name, col.Vocab, c.cols.Width)
			}
		}
	}
	switch m.Task.Kind {
	case TaskClass:
		if m.Task.Targets != 0 || m.Classes < 1 || len(m.LabelMap) != m.Classes {
			return corrupt(ManifestName, "task", "a class task with %d targets, %d classes, %d label map entries", m.Task.Targets, m.Classes, len(m.LabelMap))
		}
	case TaskBinary, TaskRegression:
		if m.Task.Targets < 1 || m.Classes != 0 || len(m.LabelMap) != 0 || (len(m.Task.Names) != 0 && len(m.Task.Names) != m.Task.Targets) {
			return corrupt(ManifestName, "task", "a %s task with %d targets, %d classes, %d names", m.Task.Kind, m.Task.Targets, m.Classes, len(m.Task.Names))
		}
	default:
		return corrupt(ManifestName, "task.kind", "unknown kind %q", m.Task.Kind)
	}
	return nil
}

// Layout is what a shard folder's graphs carry, the same for every format
// version: package loader reads every version through it.
type Layout struct {
	// OneHot: formats 1 and 2's categorical feature, one code per node in
	// 0..OneHot-1 (a one-hot, mixed by a merge); 0 when absent.
	OneHot int
	// NodeCat: format 3's categorical columns (codes, never mixed).
	NodeCat []Column
	// NodeDense: float32 values per node (formats 1 and 2's attributes,
	// format 3's block).
	NodeDense int
	// EdgeCat: categorical edge columns (formats 1 and 2's edge label is
	// one column, "edge_label"); EdgeDense: float32 values per edge.
	EdgeCat   []Column
	EdgeDense int
	// Classes for a class task; Targets (T floats a graph) otherwise.
	Classes int
	Targets int
	Task    TaskKind
}

// Layout describes the manifest's graphs.
func (m *Manifest) Layout() Layout {
	if m.FormatVersion < FormatV3 {
		l := Layout{Classes: m.Classes, Task: TaskClass}
		if m.Features.Kind.Categorical() {
			l.OneHot = m.Features.Dim
		} else {
			l.NodeDense = m.Features.Dim
		}
		if m.HasEdgeLabels {
			l.EdgeCat = []Column{{Name: ColEdgeLabel, Vocab: m.EdgeLabelDim}}
		}
		return l
	}
	if m.FormatVersion >= FormatV4 {
		return Layout{Task: TaskStructures}
	}
	l := Layout{Classes: m.Classes, Task: m.Task.Kind, Targets: m.Task.Targets}
	if m.NodeFeatures != nil {
		l.NodeCat, l.NodeDense = m.NodeFeatures.Categorical, m.NodeFeatures.Dense
	}
	if m.EdgeFeatures != nil {
		l.EdgeCat, l.EdgeDense = m.EdgeFeatures.Categorical, m.EdgeFeatures.Dense
	}
	return l
}

// EdgeFeatures reports whether edges carry features.
func (l Layout) EdgeFeatures() bool { return len(l.EdgeCat) > 0 || l.EdgeDense > 0 }

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

// isCRC reports whether s is a CRC-32C as the manifest writes it: 8
// lowercase hex digits.
func isCRC(s string) bool {
	if len(s) != 8 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// validate checks a page map against its shard's entry: one page a
// batch, the schema message right after the file's 8-byte magic, pages in
// order after it without overlap and inside the file, every length and
// CRC well formed. Nil (no map) is valid.
func (pm *PageMap) validate(s *ShardInfo) error {
	if pm == nil {
		return nil
	}
	if len(pm.Pages) != len(s.Batches) {
		return fmt.Errorf("%d pages for %d batches", len(pm.Pages), len(s.Batches))
	}
	sc := pm.Schema
	if sc.Offset != 8 || sc.Length < 8 || sc.Length > maxSchemaMessage || !isCRC(sc.CRC32C) {
		return fmt.Errorf("schema message at %d+%d (crc32c %q): want offset 8, 8 to %d bytes, 8 hex digits", sc.Offset, sc.Length, sc.CRC32C, maxSchemaMessage)
	}
	end := sc.Offset + sc.Length
	for i, p := range pm.Pages {
		if p.Offset < end || p.Metadata < 8 || p.Length <= p.Metadata || p.Length-p.Metadata > MaxBatchBodyBytes || p.Offset+p.Length > s.Bytes || !isCRC(p.CRC32C) {
			return fmt.Errorf("page %d at %d+%d (metadata %d, crc32c %q) does not follow the one before inside the file's %d bytes", i, p.Offset, p.Length, p.Metadata, p.CRC32C, s.Bytes)
		}
		end = p.Offset + p.Length
	}
	return nil
}

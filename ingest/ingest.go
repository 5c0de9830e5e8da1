// Package ingest is the seam between the formats datasets come in and the
// shard format: a Format recognises its files in a container (a folder, a
// zip, a tar, a bare file: Files) and opens them as a Dataset, which
// describes itself (Meta) and yields its graphs in id order, canonical
// (Graphs); package ingest/convert writes any Dataset as shards. The
// readers live in packages of their own (ingest/tu, ingest/gin, ingest/ogb,
// ingest/parquet); adding a format is one such package and one line in
// ingest/convert's formats list (docs/format.md, "Inputs").
//
// Contract:
//   - Graphs are handed over in id order 0..Meta().Graphs-1, each
//     undirected and simple: every edge once as (u, v), u < v, sorted,
//     self-loops and repeated entries dropped and counted (Stats), per
//     PyTorch Geometric's conventions (Canon does it for every reader).
//   - Every input error wraps ErrFormat and is a *FormatError naming the
//     file, line and field; nothing panics on any input.
//   - Inputs are streamed: a reader holds per-node metadata at most, and
//     one graph's edges at a time when the input lists them graph by graph.
package ingest

import (
	"context"
	"errors"
	"fmt"

	"github.com/augloader/augloader/shard"
)

// Errors callers test with errors.Is.
var (
	// ErrFormat is the category of every input error (see FormatError).
	ErrFormat = errors.New("ingest: invalid dataset")
	// ErrUnordered: the input does not list edges graph by graph; Graphs
	// stopped after handing some over. Reading again with
	// ReadOptions.Buffered accepts any order (every edge held in memory).
	ErrUnordered = errors.New("ingest: edges are not grouped by graph")
	// ErrReread: what the dataset guessed from its first rows (integer or
	// float columns, code widths, the task) proved wrong further on; its
	// Meta has changed, and the converter reads it again from the start.
	ErrReread = errors.New("ingest: the input's column types changed while reading")
)

// FormatError says which file, line and field is wrong.
type FormatError struct {
	Format string // the reader: "tu", "gin", ...
	File   string
	Line   int64 // 0 when the error concerns the whole file
	Field  int   // 1-based column, 0 when not about one field
	Detail string
}

func (e *FormatError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", loc, e.Line)
	}
	if e.Field > 0 {
		loc = fmt.Sprintf("%s: field %d", loc, e.Field)
	}
	return e.Format + ": " + loc + ": " + e.Detail
}

// Unwrap makes errors.Is(err, ErrFormat) true.
func (e *FormatError) Unwrap() error { return ErrFormat }

// Errorf is a *FormatError of format at file, line and field.
func Errorf(format, file string, line int64, field int, detail string, args ...any) error {
	return &FormatError{Format: format, File: file, Line: line, Field: field, Detail: fmt.Sprintf(detail, args...)}
}

// A Format is one input format: it recognises its files among a
// container's and opens them.
type Format interface {
	// Name is the format's name ("tu", "gin"), its errors' prefix.
	Name() string
	// Describe says what the format looks for, for an error listing every
	// format when none recognises an input.
	Describe() string
	// Wanted reports whether a container entry (its full name) may be one
	// of the format's files: a tar's wanted entries are spooled, the rest
	// skipped without being stored.
	Wanted(entry string) bool
	// Detect returns the datasets of this format among the container's
	// entries, by name (several: the input holds several datasets).
	Detect(files *Files) []string
	// Open opens the dataset called name in files (name as Detect gave it;
	// "" when Detect found one).
	Open(files *Files, name string, o OpenOptions) (Dataset, error)
}

// FeatureMode chooses the node features of a dataset that offers several
// (the --features flag).
type FeatureMode string

// Feature modes.
const (
	FeaturesAuto       FeatureMode = "auto" // the format's default: labels when nodes have them, else degree
	FeaturesLabels     FeatureMode = "labels"
	FeaturesAttributes FeatureMode = "attributes"
	FeaturesDegree     FeatureMode = "degree"
)

// ParseFeatureMode accepts auto, labels, attributes or degree.
func ParseFeatureMode(s string) (FeatureMode, error) {
	switch m := FeatureMode(s); m {
	case FeaturesAuto, FeaturesLabels, FeaturesAttributes, FeaturesDegree:
		return m, nil
	}
	return "", fmt.Errorf("ingest: unknown features %q (want auto, labels, attributes or degree)", s)
}

// OpenOptions tune Format.Open.
type OpenOptions struct {
	Features FeatureMode // default FeaturesAuto
	// Task: the graph labels' task when the user names one ("" or
	// TaskAuto: OGB's rule, TaskFor); formats whose labels are classes
	// refuse any other (ClassesOnly).
	Task shard.TaskKind
	// Limits bound what the input may make the reader hold (zero fields:
	// DefaultLimits).
	Limits Limits
}

// Meta is what a dataset says of itself before its graphs are read: what
// the shard manifest needs besides the graphs.
type Meta struct {
	Name   string
	Graphs int
	Nodes  int64
	// LabelMap[c] is the raw graph label class c stands for.
	LabelMap []string
	// FeatureKind and FeatureDim describe the node features; degree
	// features are computed by the converter (FeatureDim is then 0).
	FeatureKind shard.FeatureKind
	FeatureDim  int
	LabelMin    int64 // raw node label of code 0 (FeatureLabels)
	// EdgeLabelDim, when positive, says graphs carry one categorical edge
	// label per edge, codes 0..EdgeLabelDim-1.
	EdgeLabelDim int

	// Format 3 (shard.WriterOptions' fields of the same names): when Task
	// is set, graphs fill shard.Graph's NodeCat, X, EdgeCat, EdgeX and
	// Targets (or Label for a class task) and the fields above the
	// edge labels stay unset.
	NodeColumns *shard.Columns
	EdgeColumns *shard.Columns
	Task        *shard.Task
	// Splits the input defines; the converter writes each into the shard
	// folder as split-NAME.json (epoch.Split).
	Splits []Split
}

// Split is a named split of the graphs into training, validation and
// test ids (OGB's split/NAME folder).
type Split struct {
	Name               string
	Train, Valid, Test []int64
}

// ReadOptions tune Dataset.Graphs.
type ReadOptions struct {
	// Buffered holds every edge in memory and accepts any order (after
	// ErrUnordered).
	Buffered bool
}

// Stats count what Graphs dropped or repaired in the edge lists.
type Stats struct {
	DirectedEntries int64 // entries read (a TU A.txt's lines)
	SelfLoops       int64 // entries (i, i), dropped
	// Duplicates counts directed entries listed more than once, dropped
	// (IMDB lists every entry twice).
	Duplicates int64
	// Asymmetric counts undirected edges listed in one direction only; the
	// graph is made undirected, so they are kept.
	Asymmetric int64
}

// A Dataset is one opened input.
type Dataset interface {
	Meta() Meta
	// Graphs calls fn for every graph in id order with its canonical
	// edges. The *shard.Graph and its slices are reused after fn returns.
	// An error from fn stops the read and is returned.
	Graphs(ctx context.Context, o ReadOptions, fn func(*shard.Graph) error) (Stats, error)
	// Sources are the input files read so far with their SHA-256.
	Sources() []SourceHash
	Close() error
}

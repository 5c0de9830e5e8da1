// Package tu reads graph-classification datasets in the TUDataset text
// format (chrsmrrs.github.io/datasets): DS_A.txt, DS_graph_indicator.txt,
// DS_graph_labels.txt and the optional DS_node_labels.txt,
// DS_node_attributes.txt and DS_edge_labels.txt, from any container
// ingest.Files opens (a folder, a .zip, a .tar, .tar.gz or .tar.xz). Format
// is its ingest.Format.
//
// It applies PyTorch Geometric's TUDataset conventions: graphs are made
// undirected, self-loops and duplicate entries are dropped and counted, graph
// labels are remapped to 0..C-1 in sorted order of the raw values, and node
// features are the node label's code (raw − min), dense attributes, or — for
// datasets with neither — left for the caller to fill from node degrees.
//
// Memory: Load keeps O(nodes) (the indicator, node labels or attributes);
// Graphs streams DS_A.txt and holds one graph's edges at a time when the file
// lists edges graph by graph, as every published TU dataset does. A file that
// goes back to an earlier graph makes Graphs return ingest.ErrUnordered; the
// caller may then call it again with Buffered, which holds all edges (8
// bytes each).
//
// Every input error is an *ingest.FormatError naming the file, line and
// field.
package tu

import (
	"io"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/augloader/augloader/ingest"
)

// name is the format's name, its errors' prefix.
const name = "tu"

func formatErr(file string, line int64, field int, format string, args ...any) error {
	return ingest.Errorf(name, file, line, field, format, args...)
}

// File suffixes of the format.
const (
	SuffixA              = "_A.txt"
	SuffixGraphIndicator = "_graph_indicator.txt"
	SuffixGraphLabels    = "_graph_labels.txt"
	SuffixNodeLabels     = "_node_labels.txt"
	SuffixNodeAttributes = "_node_attributes.txt"
	SuffixEdgeLabels     = "_edge_labels.txt"
)

// suffixes are the TU files, in the order a reader needs them.
var suffixes = []string{SuffixGraphIndicator, SuffixGraphLabels, SuffixNodeLabels, SuffixNodeAttributes, SuffixEdgeLabels, SuffixA}

// Format is the TU text format.
type Format struct{}

var _ ingest.Format = Format{}

// Name implements ingest.Format.
func (Format) Name() string { return name }

// Describe implements ingest.Format.
func (Format) Describe() string {
	return "the TU text format (NAME_A.txt, NAME_graph_indicator.txt, NAME_graph_labels.txt, ...)"
}

// Wanted implements ingest.Format: the files ending in a TU suffix.
func (Format) Wanted(entry string) bool {
	b := path.Base(entry)
	for _, suf := range suffixes {
		if strings.HasSuffix(b, suf) {
			return true
		}
	}
	return false
}

// Detect implements ingest.Format: one dataset per NAME_A.txt.
func (Format) Detect(f *ingest.Files) []string {
	var out []string
	for _, e := range f.Entries() {
		if b := path.Base(e); strings.HasSuffix(b, SuffixA) {
			out = append(out, strings.TrimSuffix(b, SuffixA))
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// Open implements ingest.Format.
func (Format) Open(f *ingest.Files, dataset string, o ingest.OpenOptions) (ingest.Dataset, error) {
	if err := ingest.ClassesOnly(o, "TU", f.Path); err != nil {
		return nil, err
	}
	src, err := NewSource(f, dataset)
	if err != nil {
		return nil, err
	}
	mode := o.Features
	if mode == "" {
		mode = ingest.FeaturesAuto
	}
	return LoadLimited(src, mode, o.Limits)
}

// Source is one TU dataset's files in a container.
type Source struct {
	Files *ingest.Files
	Name  string            // dataset name, the prefix of every file
	entry map[string]string // TU suffix → entry of the container
}

// NewSource finds dataset's files in f ("": the only dataset there). Two
// entries for one file (in two folders of an archive) are refused.
func NewSource(f *ingest.Files, dataset string) (*Source, error) {
	if dataset == "" {
		names := Format{}.Detect(f)
		switch len(names) {
		case 0:
			return nil, formatErr(f.Path, 0, 0, "not a TU dataset: looked for %s", Format{}.Describe())
		case 1:
			dataset = names[0]
		default:
			return nil, formatErr(f.Path, 0, 0, "holds %d TU datasets (%s): name one with --name", len(names), strings.Join(names, ", "))
		}
	}
	s := &Source{Files: f, Name: dataset, entry: map[string]string{}}
	for _, e := range f.Entries() {
		b := path.Base(e)
		if !strings.HasPrefix(b, dataset+"_") {
			continue
		}
		key := strings.TrimPrefix(b, dataset)
		if !slices.Contains(suffixes, key) {
			continue
		}
		if prev, ok := s.entry[key]; ok {
			return nil, formatErr(f.Path, 0, 0, "holds %q and %q: refusing to guess which one is the dataset", prev, e)
		}
		s.entry[key] = e
	}
	if s.entry[SuffixA] == "" {
		return nil, formatErr(dataset+SuffixA, 0, 0, "missing required file")
	}
	return s, nil
}

// FileName is the display name of a dataset file (used in errors).
func (s *Source) FileName(key string) string { return s.Name + key }

// Has reports whether the dataset has the file with this key (a TU suffix).
func (s *Source) Has(key string) bool { return s.entry[key] != "" }

// Open opens a dataset file; reading it to EOF records its SHA-256. A
// goroutine reads and hashes ahead of the caller.
func (s *Source) Open(key string) (io.ReadCloser, error) {
	if !s.Has(key) {
		return nil, formatErr(s.FileName(key), 0, 0, "missing required file")
	}
	return s.Files.Open(s.entry[key], s.FileName(key))
}

// openHashed is Open without the read-ahead, for a caller that reads on a
// goroutine of its own (pairReader): one copy of the bytes fewer.
func (s *Source) openHashed(key string) (io.ReadCloser, error) {
	if !s.Has(key) {
		return nil, formatErr(s.FileName(key), 0, 0, "missing required file")
	}
	return s.Files.OpenDirect(s.entry[key], s.FileName(key))
}

// OpenOptions tune Open.
type OpenOptions struct {
	// Name selects the dataset when the input holds several.
	Name string
	// SpoolDir: see ingest.FilesOptions.
	SpoolDir string
}

// Open opens the TU dataset at p (a folder or an archive); Close closes
// its files. For tests and tools: conversion goes through ingest/convert,
// which tries every format.
func Open(p string, o OpenOptions) (*Source, error) {
	f, err := ingest.OpenFiles(p, ingest.FilesOptions{SpoolDir: o.SpoolDir, Wanted: Format{}.Wanted})
	if err != nil {
		return nil, err
	}
	s, err := NewSource(f, o.Name)
	if err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// OpenSource is Open with a dataset name.
func OpenSource(p, dataset string) (*Source, error) { return Open(p, OpenOptions{Name: dataset}) }

// Close closes the source's files (and removes a tar's spool).
func (s *Source) Close() error { return s.Files.Close() }

// Package tu reads graph-classification datasets in the TUDataset text
// format (chrsmrrs.github.io/datasets): DS_A.txt, DS_graph_indicator.txt,
// DS_graph_labels.txt and the optional DS_node_labels.txt,
// DS_node_attributes.txt and DS_edge_labels.txt; and in the GIN paper's
// text format (one DS.txt, see gin.go). Either from a folder, a .zip, a
// .tar, .tar.gz or .tar.xz (recognised by content), or a bare GIN .txt.
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
// goes back to an earlier graph makes Graphs return ErrUnordered; the caller
// may then call it again with Buffered, which holds all edges (8 bytes each).
//
// Every input error is a *FormatError naming the file, line and field.
package tu

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Errors callers test with errors.Is.
var (
	// ErrFormat is the category of every input error (see FormatError).
	ErrFormat = errors.New("tu: invalid dataset")
	// ErrUnordered: DS_A.txt does not list edges graph by graph.
	ErrUnordered = errors.New("tu: edges are not grouped by graph")
)

// FormatError says which file, line and field is wrong.
type FormatError struct {
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
	return "tu: " + loc + ": " + e.Detail
}

// Unwrap makes errors.Is(err, ErrFormat) true.
func (e *FormatError) Unwrap() error { return ErrFormat }

func formatErr(file string, line int64, field int, format string, args ...any) error {
	return &FormatError{File: file, Line: line, Field: field, Detail: fmt.Sprintf(format, args...)}
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

// Layout is how a dataset's graphs are written.
type Layout string

// Layouts.
const (
	// LayoutTU is the TUDataset text format: DS_A.txt, DS_graph_indicator.txt,
	// DS_graph_labels.txt and the optional DS_node_labels.txt,
	// DS_node_attributes.txt, DS_edge_labels.txt.
	LayoutTU Layout = "tu"
	// LayoutGIN is the GIN paper's text format: one NAME.txt holding every
	// graph as a block of per-node lines (tag, neighbour count, neighbours,
	// optional attributes); see gin.go.
	LayoutGIN Layout = "gin"
)

// ginKey is the file key of a GIN dataset's one text file.
const ginKey = ".txt"

// lookedFor names what OpenSource accepts, for its errors.
const lookedFor = "looked for the TU text format (NAME_A.txt, NAME_graph_indicator.txt, NAME_graph_labels.txt, ...) " +
	"or the GIN text format (one NAME.txt), in a folder, a .zip, a .tar, .tar.gz or .tar.xz, or (GIN) a bare .txt file"

// Source is a dataset's files, wherever they are: a folder, a zip, a tar
// (plain, gzip or xz; its entries streamed once into a spool folder), or a
// bare GIN text file.
type Source struct {
	Path   string
	Name   string // dataset name, the prefix of every file
	Layout Layout

	open    map[string]func() (io.ReadCloser, error) // file key (a TU suffix, or ginKey) → opener
	closers []func() error

	mu     sync.Mutex
	hashes map[string]SourceHash
}

// SourceHash is the SHA-256 of one input file, computed while it was read.
type SourceHash struct {
	Name   string
	Bytes  int64
	SHA256 string
}

// OpenOptions tune OpenSource.
type OpenOptions struct {
	// Name selects the dataset when the input holds several (default: the
	// only one).
	Name string
	// SpoolDir is where a tar archive's entries are written while it is
	// read (default: the system's temporary folder). The spool is removed
	// by Close, and by a later OpenSource when its process was killed.
	SpoolDir string
}

// OpenSource opens a dataset in any layout OpenOptions.SpoolDir describes;
// name may be empty when the input holds one dataset.
func OpenSource(p, name string) (*Source, error) { return Open(p, OpenOptions{Name: name}) }

// Open opens a dataset: a folder, a .zip, a .tar, .tar.gz or .tar.xz (by
// content, not by extension), or a GIN .txt file.
func Open(p string, o OpenOptions) (*Source, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("tu: %w", err)
	}
	if st.IsDir() {
		return openFolder(p, p, o.Name)
	}
	if !st.Mode().IsRegular() {
		// A FIFO or a device would block open or read forever (and a
		// zip needs random access): only regular files are read.
		return nil, formatErr(p, 0, 0, "not a regular file (%s): give a folder or a file", st.Mode().Type())
	}
	kind, err := sniff(p)
	if err != nil {
		return nil, err
	}
	switch kind {
	case "zip":
		return openZip(p, o.Name)
	case "tar", "gzip", "xz":
		return openTar(p, kind, o)
	case "text":
		s := &Source{Path: p, Name: strings.TrimSuffix(filepath.Base(p), ".txt"), Layout: LayoutGIN, hashes: map[string]SourceHash{}}
		if o.Name != "" {
			s.Name = o.Name
		}
		s.open = map[string]func() (io.ReadCloser, error){ginKey: func() (io.ReadCloser, error) { return os.Open(p) }}
		return s, nil
	}
	return nil, formatErr(p, 0, 0, "not a TU or GIN dataset: %s", lookedFor)
}

// sniff names a file's container by its first bytes.
func sniff(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("tu: %w", err)
	}
	defer f.Close()
	var b [512]byte
	n, _ := io.ReadFull(f, b[:])
	h := b[:n]
	switch {
	case bytes.HasPrefix(h, []byte("PK\x03\x04")), bytes.HasPrefix(h, []byte("PK\x05\x06")):
		return "zip", nil
	case bytes.HasPrefix(h, []byte{0x1f, 0x8b}):
		return "gzip", nil
	case bytes.HasPrefix(h, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		return "xz", nil
	case n >= 263 && string(h[257:262]) == "ustar":
		return "tar", nil
	}
	// A GIN file opens with its graph count alone on a line.
	line, _, _ := bytes.Cut(h, []byte("\n"))
	if t := bytes.TrimSpace(line); len(t) > 0 && len(t) < 20 && allDigits(t) {
		return "text", nil
	}
	return "", nil
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ginCandidate says whether a file name may be a GIN dataset's text (the
// GIN distribution's zips also hold 10fold_idx/*.txt and macOS junk).
func ginCandidate(full string) bool {
	base := path.Base(full)
	return strings.HasSuffix(base, ".txt") && !strings.HasPrefix(base, "._") && !strings.HasPrefix(base, ".") &&
		!strings.Contains(full, "10fold_idx") && !strings.Contains(full, "__MACOSX") &&
		!strings.EqualFold(base, "README.txt") && !strings.HasSuffix(base, "_label_readme.txt")
}

// pick chooses the dataset among file names (base names): TU when some
// NAME_A.txt is there, else GIN when one NAME.txt is. where names the
// input in errors.
func pick(where string, names []string, name string) (Layout, string, error) {
	var tu, gin []string
	for _, full := range names {
		b := path.Base(full)
		if strings.HasPrefix(b, "._") {
			continue
		}
		if strings.HasSuffix(b, SuffixA) {
			tu = append(tu, strings.TrimSuffix(b, SuffixA))
		} else if ginCandidate(full) {
			gin = append(gin, strings.TrimSuffix(b, ".txt"))
		}
	}
	if name != "" {
		if slices.Contains(tu, name) {
			return LayoutTU, name, nil
		}
		if slices.Contains(gin, name) {
			return LayoutGIN, name, nil
		}
		for _, full := range names {
			if strings.HasPrefix(path.Base(full), name+"_") {
				return "", "", formatErr(name+SuffixA, 0, 0, "missing required file")
			}
		}
		return "", "", formatErr(where, 0, 0, "no dataset %q here (%s)", name, lookedFor)
	}
	switch {
	case len(tu) == 1:
		return LayoutTU, tu[0], nil
	case len(tu) > 1:
		return "", "", formatErr(where, 0, 0, "holds %d TU datasets (%s): name one with --name", len(tu), strings.Join(tu, ", "))
	case len(gin) == 1:
		return LayoutGIN, gin[0], nil
	case len(gin) > 1:
		return "", "", formatErr(where, 0, 0, "holds %d candidate GIN files (%s): name one with --name", len(gin), strings.Join(gin, ", "))
	}
	return "", "", formatErr(where, 0, 0, "not a TU or GIN dataset: %s", lookedFor)
}

// openFolder opens a TU or GIN folder; shown is the path errors name (the
// archive for a spooled tar).
func openFolder(dir, shown, name string) (*Source, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("tu: %w", err)
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	layout, name, err := pick(shown, names, name)
	if err != nil {
		return nil, err
	}
	s := &Source{Path: shown, Name: name, Layout: layout, hashes: map[string]SourceHash{}, open: map[string]func() (io.ReadCloser, error){}}
	add := func(key, file string) {
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			s.open[key] = func() (io.ReadCloser, error) { return os.Open(p) }
		}
	}
	if layout == LayoutGIN {
		add(ginKey, name+".txt")
		return s, nil
	}
	for _, suf := range suffixes {
		add(suf, name+suf)
	}
	return s, nil
}

// suffixes are the TU files, in the order a reader needs them.
var suffixes = []string{SuffixGraphIndicator, SuffixGraphLabels, SuffixNodeLabels, SuffixNodeAttributes, SuffixEdgeLabels, SuffixA}

func openZip(p, name string) (*Source, error) {
	zr, err := zip.OpenReader(p)
	if err != nil {
		return nil, formatErr(p, 0, 0, "not a readable zip: %v", err)
	}
	var names []string
	seen := map[string]bool{}
	for _, f := range zr.File {
		if f.FileInfo().IsDir() {
			continue
		}
		if seen[f.Name] {
			zr.Close()
			return nil, formatErr(p, 0, 0, "the zip holds %q twice: refusing to guess which one is the dataset", f.Name)
		}
		seen[f.Name] = true
		names = append(names, f.Name)
	}
	layout, name, err := pick(p, names, name)
	if err != nil {
		zr.Close()
		return nil, err
	}
	s := &Source{Path: p, Name: name, Layout: layout, hashes: map[string]SourceHash{}, open: map[string]func() (io.ReadCloser, error){},
		closers: []func() error{zr.Close}}
	for _, f := range zr.File {
		b := path.Base(f.Name)
		if f.FileInfo().IsDir() || strings.HasPrefix(b, "._") || strings.Contains(f.Name, "__MACOSX") {
			continue
		}
		key := ""
		switch {
		case layout == LayoutGIN && b == name+".txt" && ginCandidate(f.Name):
			key = ginKey
		case layout == LayoutTU && strings.HasPrefix(b, name+"_"):
			key = strings.TrimPrefix(b, name)
		}
		if key == "" {
			continue
		}
		if s.open[key] != nil {
			zr.Close()
			return nil, formatErr(p, 0, 0, "the zip holds two %s%s entries: refusing to guess which one is the dataset", name, key)
		}
		f := f
		s.open[key] = func() (io.ReadCloser, error) { return f.Open() }
	}
	return s, nil
}

// Close releases the archive and removes a tar's spool.
func (s *Source) Close() error {
	var err error
	for _, c := range s.closers {
		if cerr := c(); err == nil {
			err = cerr
		}
	}
	s.closers = nil
	return err
}

// FileName is the display name of a dataset file (used in errors).
func (s *Source) FileName(key string) string {
	if key == ginKey {
		return s.Name + ".txt"
	}
	return s.Name + key
}

// Has reports whether the dataset has the file with this key (a TU suffix).
func (s *Source) Has(key string) bool { return s.open[key] != nil }

// Open opens a dataset file; reading it to EOF records its SHA-256 (see
// Hashes). A goroutine reads and hashes ahead of the caller.
func (s *Source) Open(key string) (io.ReadCloser, error) {
	rc, err := s.openHashed(key)
	if err != nil {
		return nil, err
	}
	return newPrefetcher(rc), nil
}

// openHashed is Open without the read-ahead, for a caller that reads on a
// goroutine of its own (pairReader): one copy of the bytes fewer.
func (s *Source) openHashed(key string) (io.ReadCloser, error) {
	op := s.open[key]
	if op == nil {
		return nil, formatErr(s.FileName(key), 0, 0, "missing required file")
	}
	rc, err := op()
	if err != nil {
		return nil, formatErr(s.FileName(key), 0, 0, "cannot open: %v", err)
	}
	return &hashingReader{rc: rc, h: sha256.New(), name: s.FileName(key), src: s}, nil
}

// prefetcher reads (and so hashes) its source in a goroutine, one block
// ahead of the parser: on two cores, reading and SHA-256 overlap parsing.
type prefetcher struct {
	src    io.ReadCloser
	full   chan block
	free   chan []byte
	stop   chan struct{}
	done   chan struct{}
	cur    []byte
	curBuf []byte
	err    error
}

type block struct {
	buf []byte
	n   int
	err error
}

const prefetchBlock = 1 << 20

func newPrefetcher(src io.ReadCloser) *prefetcher {
	p := &prefetcher{
		src: src, full: make(chan block, 2), free: make(chan []byte, 3),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	for range 3 {
		p.free <- make([]byte, prefetchBlock)
	}
	go p.run()
	return p
}

func (p *prefetcher) run() {
	defer close(p.done)
	for {
		var buf []byte
		select {
		case buf = <-p.free:
		case <-p.stop:
			return
		}
		n, err := io.ReadFull(p.src, buf)
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		select {
		case p.full <- block{buf: buf, n: n, err: err}:
		case <-p.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

func (p *prefetcher) Read(b []byte) (int, error) {
	for len(p.cur) == 0 {
		if p.err != nil {
			return 0, p.err
		}
		if p.curBuf != nil {
			p.free <- p.curBuf
			p.curBuf = nil
		}
		blk := <-p.full
		p.cur, p.curBuf, p.err = blk.buf[:blk.n], blk.buf, blk.err
	}
	n := copy(b, p.cur)
	p.cur = p.cur[n:]
	return n, nil
}

func (p *prefetcher) Close() error {
	close(p.stop)
	<-p.done
	return p.src.Close()
}

// Hashes returns the SHA-256 of every file read to the end, sorted by name.
func (s *Source) Hashes() []SourceHash {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SourceHash, 0, len(s.hashes))
	for _, h := range s.hashes {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

type hashingReader struct {
	rc   io.ReadCloser
	h    hash.Hash
	n    int64
	name string
	src  *Source
	done bool
}

func (r *hashingReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.h.Write(p[:n])
	r.n += int64(n)
	if err == io.EOF && !r.done {
		r.done = true
		r.src.mu.Lock()
		r.src.hashes[r.name] = SourceHash{Name: r.name, Bytes: r.n, SHA256: hex.EncodeToString(r.h.Sum(nil))}
		r.src.mu.Unlock()
	}
	return n, err
}

func (r *hashingReader) Close() error { return r.rc.Close() }

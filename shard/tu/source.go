// Package tu reads graph-classification datasets in the TUDataset text
// format (chrsmrrs.github.io/datasets): DS_A.txt, DS_graph_indicator.txt,
// DS_graph_labels.txt and the optional DS_node_labels.txt,
// DS_node_attributes.txt and DS_edge_labels.txt, from a folder or a .zip.
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
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
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

// Source is a TU dataset folder or zip archive.
type Source struct {
	Path string
	Name string // dataset name, the prefix of every file
	dir  string // folder holding the files (folder sources)
	zr   *zip.ReadCloser
	zf   map[string]*zip.File // suffix -> entry (zip sources); built once at open

	mu     sync.Mutex
	hashes map[string]SourceHash
}

// SourceHash is the SHA-256 of one input file, computed while it was read.
type SourceHash struct {
	Name   string
	Bytes  int64
	SHA256 string
}

// OpenSource opens a folder or .zip. name may be empty when the input holds
// exactly one *_A.txt; otherwise it selects the dataset.
func OpenSource(p, name string) (*Source, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("tu: %w", err)
	}
	s := &Source{Path: p, hashes: map[string]SourceHash{}}
	if st.IsDir() {
		s.dir = p
		if name == "" {
			m, _ := filepath.Glob(filepath.Join(p, "*"+SuffixA))
			if len(m) != 1 {
				return nil, formatErr(p, 0, 0, "found %d *%s files; name the dataset with --name", len(m), SuffixA)
			}
			name = strings.TrimSuffix(filepath.Base(m[0]), SuffixA)
		}
		s.Name = name
		if _, err := os.Stat(filepath.Join(p, name+SuffixA)); err != nil {
			return nil, formatErr(filepath.Join(p, name+SuffixA), 0, 0, "missing required file")
		}
		return s, nil
	}
	zr, err := zip.OpenReader(p)
	if err != nil {
		return nil, formatErr(p, 0, 0, "neither a folder nor a readable zip: %v", err)
	}
	s.zr = zr
	if name == "" {
		var found []string
		for _, f := range zr.File {
			if b := path.Base(f.Name); strings.HasSuffix(b, SuffixA) && !strings.HasPrefix(b, "._") {
				found = append(found, strings.TrimSuffix(b, SuffixA))
			}
		}
		if len(found) != 1 {
			zr.Close()
			return nil, formatErr(p, 0, 0, "zip holds %d *%s entries, want 1: not a TU dataset (or name it with --name)", len(found), SuffixA)
		}
		name = found[0]
	}
	s.Name = name
	s.zf = map[string]*zip.File{}
	for _, f := range zr.File {
		b := path.Base(f.Name)
		if strings.HasPrefix(b, name+"_") && !f.FileInfo().IsDir() {
			s.zf[strings.TrimPrefix(b, name)] = f
		}
	}
	if s.zf[SuffixA] == nil {
		zr.Close()
		return nil, formatErr(p, 0, 0, "zip has no %s%s entry: not a TU dataset", name, SuffixA)
	}
	return s, nil
}

// Close releases the zip reader, if any.
func (s *Source) Close() error {
	if s.zr != nil {
		return s.zr.Close()
	}
	return nil
}

// FileName is the display name of a dataset file (used in errors).
func (s *Source) FileName(suffix string) string { return s.Name + suffix }

// Has reports whether the dataset has the file with this suffix.
func (s *Source) Has(suffix string) bool {
	if s.zr != nil {
		return s.zf[suffix] != nil
	}
	_, err := os.Stat(filepath.Join(s.dir, s.Name+suffix))
	return err == nil
}

// Open opens a dataset file; reading it to EOF records its SHA-256 (see Hashes).
func (s *Source) Open(suffix string) (io.ReadCloser, error) {
	var rc io.ReadCloser
	if s.zr != nil {
		f := s.zf[suffix]
		if f == nil {
			return nil, formatErr(s.FileName(suffix), 0, 0, "missing required file")
		}
		r, err := f.Open()
		if err != nil {
			return nil, formatErr(s.FileName(suffix), 0, 0, "cannot open in zip: %v", err)
		}
		rc = r
	} else {
		f, err := os.Open(filepath.Join(s.dir, s.Name+suffix))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, formatErr(s.FileName(suffix), 0, 0, "missing required file")
			}
			return nil, fmt.Errorf("tu: %w", err)
		}
		rc = f
	}
	return newPrefetcher(&hashingReader{rc: rc, h: sha256.New(), name: s.FileName(suffix), src: s}), nil
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

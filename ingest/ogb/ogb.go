// Package ogb reads the Open Graph Benchmark's graph-property layout as the
// ogb package writes and reads it (ogb/io/read_graph_raw.py): a folder with
// raw/edge.csv.gz (one "u,v" row per edge, node ids local to their graph),
// raw/num-node-list.csv.gz and raw/num-edge-list.csv.gz (one count per
// graph), and optionally raw/node-feat.csv.gz, raw/edge-feat.csv.gz (one
// row per node, per edge) and raw/graph-label.csv.gz (one row per graph,
// an empty field or nan: missing); and split/NAME/{train,valid,test}.csv.gz.
// It reads as well the layout ogb.io.DatasetSaver writes (ogb/io/
// save_dataset.py): raw/data.npz holding the arrays num_nodes_list,
// num_edges_list, edge_index (2 × E, graph-local ids), node_feat and
// edge_feat; raw/graph-label.npz holding graph_label; and
// split/NAME/split_dict.pt, torch.save's pickle of the ids (split files of
// either kind are read in both layouts, split_dict.pt first, as OGB does).
// An .npy array's row i is line i+1 in errors; its kind follows its
// dtype (an integer array is categorical, a float array a float block).
//
// Contract: as OGB's loader, a feature file of integers only is
// categorical (one column per field, codes ≥ 0) and one with any other
// number a float block; labels of integers only, one per graph, with a
// value other than 0 and 1 are classes; labels of 0, 1 and missing values
// are binary targets; any other labels are regression targets. Those kinds
// are guessed from the first rows and checked on every row: a later row
// that contradicts them makes Graphs return ingest.ErrReread with the
// guess corrected (the converter reads again). Edges are made undirected
// (each listed edge and its reverse, as OGB's add_inverse_edge does); an
// edge listed more than once keeps its first row's features, and two
// listings with different features are refused. Every file is streamed
// through gzip, never whole in memory: the reader holds the per-graph
// counts and one graph's rows.
package ogb

import (
	"archive/zip"
	"bufio"
	"io"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/internal/text"
	"github.com/augloader/augloader/shard"
)

const name = "ogb"

// The raw layout's files, relative to the dataset folder.
const (
	fileEdges     = "raw/edge.csv.gz"
	fileNodeCount = "raw/num-node-list.csv.gz"
	fileEdgeCount = "raw/num-edge-list.csv.gz"
	fileNodeFeat  = "raw/node-feat.csv.gz"
	fileEdgeFeat  = "raw/edge-feat.csv.gz"
	fileLabels    = "raw/graph-label.csv.gz"

	// The npz layout: two zips of .npy arrays, and torch.save'd splits.
	fileData      = "raw/data.npz"
	fileLabelsNpz = "raw/graph-label.npz"
	fileSplitDict = "split_dict.pt"
)

// npzArrays names the array of data.npz (or graph-label.npz) that stands
// for each file of the csv.gz layout.
var npzArrays = map[string]string{
	fileEdges:     "edge_index",
	fileNodeCount: "num_nodes_list",
	fileEdgeCount: "num_edges_list",
	fileNodeFeat:  "node_feat",
	fileEdgeFeat:  "edge_feat",
	fileLabels:    "graph_label",
}

// Format reads OGB graph-property folders.
type Format struct{}

// Name implements ingest.Format.
func (Format) Name() string { return name }

// Describe implements ingest.Format.
func (Format) Describe() string {
	return "an OGB graph-property folder (raw/edge.csv.gz, raw/num-node-list.csv.gz, raw/num-edge-list.csv.gz; or raw/data.npz)"
}

// Wanted implements ingest.Format.
func (Format) Wanted(entry string) bool {
	return (strings.Contains(entry, "raw/") || strings.Contains(entry, "split/")) &&
		(strings.HasSuffix(entry, ".csv.gz") || strings.HasSuffix(entry, ".npz") || strings.HasSuffix(entry, "/"+fileSplitDict))
}

// Detect implements ingest.Format: every folder holding the three
// required raw files, named by the folder (the input's own name at the
// top).
func (Format) Detect(f *ingest.Files) []string {
	var out []string
	for _, prefix := range folders(f) {
		if f.Has(prefix+fileData) || f.Has(prefix+fileNodeCount) && f.Has(prefix+fileEdgeCount) {
			out = append(out, datasetName(f, prefix))
		}
	}
	return out
}

// folders lists the prefixes ("" or "DIR/") of the entries that are an
// OGB folder's raw/edge.csv.gz or raw/data.npz.
func folders(f *ingest.Files) []string {
	var out []string
	for _, e := range f.Entries() {
		for _, file := range []string{fileEdges, fileData} {
			if prefix, ok := strings.CutSuffix(e, file); ok && (prefix == "" || strings.HasSuffix(prefix, "/")) && !slices.Contains(out, prefix) {
				out = append(out, prefix)
			}
		}
	}
	return out
}

func datasetName(f *ingest.Files, prefix string) string {
	if prefix == "" {
		return strings.TrimSuffix(path.Base(strings.TrimRight(f.Path, "/")), path.Ext(f.Path))
	}
	return path.Base(strings.TrimSuffix(prefix, "/"))
}

func formatErr(file string, line int64, field int, detail string, args ...any) error {
	return ingest.Errorf(name, file, line, field, detail, args...)
}

// Open implements ingest.Format.
func (Format) Open(f *ingest.Files, dataset string, o ingest.OpenOptions) (ingest.Dataset, error) {
	prefix := ""
	found := false
	for _, p := range folders(f) {
		if dataset == "" || datasetName(f, p) == dataset {
			prefix, found = p, true
			break
		}
	}
	if !found {
		return nil, formatErr(f.Path, 0, 0, "no OGB dataset %q: looked for %s", dataset, Format{}.Describe())
	}
	d := &Dataset{files: f, prefix: prefix, name: datasetName(f, prefix), limits: o.Limits.WithDefaults(), asked: o.Task}
	ok := false
	defer func() {
		if !ok {
			d.Close()
		}
	}()
	if f.Has(prefix + fileData) {
		if err := d.openNpz(); err != nil {
			return nil, err
		}
	}
	var err error
	if d.nodes, err = d.readCounts(fileNodeCount); err != nil {
		return nil, err
	}
	if d.edges, err = d.readCounts(fileEdgeCount); err != nil {
		return nil, err
	}
	if len(d.nodes) != len(d.edges) {
		return nil, formatErr(d.named(fileEdgeCount), 0, 0, "%d graphs, %s has %d", len(d.edges), d.named(fileNodeCount), len(d.nodes))
	}
	if len(d.nodes) == 0 {
		return nil, formatErr(d.named(fileNodeCount), 0, 0, "no graphs")
	}
	for _, c := range d.nodes {
		d.totalNodes += int64(c)
	}
	for _, c := range d.edges {
		d.totalEdges += int64(c)
	}
	d.node.file, d.edge.file = fileNodeFeat, fileEdgeFeat
	for _, c := range []*columns{&d.node, &d.edge} {
		if err := d.peek(c); err != nil {
			return nil, err
		}
	}
	if err := d.openLabels(); err != nil {
		return nil, err
	}
	if err := d.readSplits(); err != nil {
		return nil, err
	}
	ok = true
	return d, nil
}

// columns is a feature file: its name and what is known of its columns.
type columns struct {
	file string
	ingest.Columns
}

// Dataset is one opened OGB folder.
type Dataset struct {
	files        *ingest.Files
	limits       ingest.Limits
	prefix, name string
	nodes, edges []int32 // per graph
	totalNodes   int64
	totalEdges   int64
	node, edge   columns
	// Labels: T per graph; a class task holds every label (T = 1).
	targets   int
	hasLabels bool
	task      shard.TaskKind
	asked     shard.TaskKind // the task the user named ("": OGB's rule)
	classes   []float64      // a class task's distinct raw labels, sorted
	labels    []float64      // a class task's raw labels
	splits    []ingest.Split

	// The npz layout: data.npz's and graph-label.npz's arrays by name.
	npz     bool
	arrays  map[string]*zip.File
	closers []func() error
}

func (d *Dataset) shown(file string) string { return d.prefix + file }

// named is what stands for file (a csv.gz layout name) in this layout, as
// errors name it: the file, or in the npz layout the array.
func (d *Dataset) named(file string) string {
	if !d.npz {
		return d.shown(file)
	}
	return d.arrayName(npzArrays[file])
}

// arrayName names array arr of the npz layout in errors: inside its zip.
func (d *Dataset) arrayName(arr string) string {
	if arr == npzArrays[fileLabels] {
		return d.shown(fileLabelsNpz) + "/" + arr + ".npy"
	}
	return d.shown(fileData) + "/" + arr + ".npy"
}

// openNpz opens raw/data.npz and raw/graph-label.npz and lists their arrays.
func (d *Dataset) openNpz() error {
	d.npz, d.arrays = true, map[string]*zip.File{}
	for _, file := range []string{fileData, fileLabelsNpz} {
		if !d.files.Has(d.prefix + file) {
			continue
		}
		ra, size, err := d.files.OpenRandom(d.prefix+file, d.shown(file))
		if err != nil {
			return err
		}
		d.closers = append(d.closers, ra.Close)
		zr, err := zip.NewReader(ra, size)
		if err != nil {
			return formatErr(d.shown(file), 0, 0, "not an .npz (a zip of .npy arrays): %v", err)
		}
		if err := ingest.CheckZipNames(ra, zr); err != nil {
			return formatErr(d.shown(file), 0, 0, "%v", err)
		}
		for _, e := range zr.File {
			arr := strings.TrimSuffix(e.Name, ".npy")
			if d.arrays[arr] != nil {
				return formatErr(d.shown(file), 0, 0, "array %q is held twice", arr)
			}
			d.arrays[arr] = e
		}
	}
	for _, file := range []string{fileEdges, fileNodeCount, fileEdgeCount} {
		if d.arrays[npzArrays[file]] == nil {
			return formatErr(d.shown(fileData), 0, 0, "no %s array (DatasetSaver writes edge_index, num_nodes_list and num_edges_list)", npzArrays[file])
		}
	}
	return nil
}

// has reports whether the dataset has file (a csv.gz layout name; in the
// npz layout, the array standing for it).
func (d *Dataset) has(file string) bool {
	if d.npz {
		return d.arrays[npzArrays[file]] != nil
	}
	return d.files.Has(d.prefix + file)
}

// source opens file's rows in either layout.
func (d *Dataset) source(file string) (rowSource, error) {
	if !d.npz {
		rc, err := d.open(file)
		if err != nil {
			return nil, err
		}
		return &csvSource{rc: rc, l: text.NewReader(rc, name, d.shown(file))}, nil
	}
	return d.npy(npzArrays[file], file == fileEdges)
}

// npy opens array arr of the npz layout; transposed, a (2, E) array read
// as E rows of two fields. Every byte of the array is checked: a stream
// read to the array's end must find the entry's end there (its CRC-32
// checked), and an array read in more than two places at once (a
// Fortran-order feature block, one stream per column) is first inflated
// once, checked, into a temporary file, so each column costs a small
// buffer and not a decompressor.
func (d *Dataset) npy(arr string, transposed bool) (*npySource, error) {
	f := d.arrays[arr]
	if f == nil {
		return nil, formatErr(d.shown(fileData), 0, 0, "no %s array", arr)
	}
	s := &npySource{name: d.arrayName(arr)}
	key := "npz:" + s.name
	open := func() (io.ReadCloser, error) {
		rc, err := d.files.GuardZipEntry(f, s.name)
		if err != nil {
			return nil, formatErr(s.name, 0, 0, "cannot open: %v", err)
		}
		return rc, nil
	}
	// stream opens the entry at element skip, past the header of hdrLen
	// bytes.
	stream := func(skip, hdrLen int64) (*bufio.Reader, error) {
		rc, err := d.files.Track(key, s.name, open)
		if err != nil {
			return nil, err
		}
		s.closers = append(s.closers, rc)
		br := bufio.NewReaderSize(rc, 1<<16)
		if _, err := br.Discard(int(hdrLen + skip*int64(s.h.size))); err != nil {
			return nil, formatErr(s.name, 0, 0, "the array ends before its shape %s says: %v", s.h, err)
		}
		return br, nil
	}
	// The first stream reads the header, and then the first element.
	first, err := stream(0, 0)
	if err != nil {
		s.Close()
		return nil, err
	}
	h, err := readNpyHeader(first, s.name)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.h = h
	rows, cols := h.rows(), int64(h.cols())
	fail := func(err error) (*npySource, error) {
		s.Close()
		return nil, err
	}
	if transposed {
		if len(h.shape) != 2 || h.shape[0] != 2 {
			return fail(formatErr(s.name, 0, 0, "shape %s, want (2, E)", h))
		}
		rows, cols = h.shape[1], 2
		h.fortran = !h.fortran // rows of the transpose run along the file's columns
	} else if err := d.limits.CheckColumns(name, s.name, 0, cols); err != nil {
		return fail(err)
	}
	// The shape against the entry's size, before any element is read: an
	// array that declares more than it holds is refused here, one that
	// holds more than it declares too.
	if rows > 0 && cols > (math.MaxInt64/16)/rows {
		return fail(formatErr(s.name, 0, 0, "shape %s is too large", h))
	}
	want := h.hdrLen + rows*cols*int64(h.size)
	switch got := int64(f.UncompressedSize64); {
	case got < want:
		return fail(formatErr(s.name, 0, 0, "the array ends before its shape says: %d bytes, its shape %s of %d-byte elements needs %d", got, h, h.size, want))
	case got > want:
		return fail(formatErr(s.name, 0, 0, "%d bytes past the array's shape %s", got-want, h))
	}
	s.rows, s.per = rows, int(cols)
	starts := []int64{0}
	if h.fortran && cols > 1 && rows > 1 {
		s.per = 1
		for c := int64(1); c < cols; c++ {
			starts = append(starts, c*rows)
		}
	}
	if len(starts) <= 2 {
		s.streams = append(s.streams, &npyElems{h: h, br: first, name: s.name})
		if len(starts) == 2 {
			br, err := stream(starts[1], h.hdrLen)
			if err != nil {
				return fail(err)
			}
			s.streams = append(s.streams, &npyElems{h: h, br: br, name: s.name})
		}
		return s, nil
	}
	// Many columns: inflate once into a checked temporary file (the
	// first stream, past its header, copied to its end), each column then
	// read from it with a small buffer.
	tmp, err := d.files.TempFile()
	if err != nil {
		return fail(formatErr(s.name, 0, 0, "temporary file: %v", err))
	}
	s.closers = append(s.closers, tmp)
	if _, err := io.Copy(tmp, first); err != nil {
		return fail(formatErr(s.name, 0, 0, "read: %v", err))
	}
	colBytes := rows * int64(h.size)
	for _, skip := range starts {
		sr := io.NewSectionReader(tmp, skip*int64(h.size), colBytes)
		s.streams = append(s.streams, &npyElems{h: h, br: bufio.NewReaderSize(sr, int(min(colBytes, 1<<16))), name: s.name, checked: true})
	}
	return s, nil
}

// open opens a csv.gz file, inflated on a goroutine of its own
// (ingest.Files.OpenGzip: the reader streams several files at once, whose
// inflating then runs beside the parsing, on as many cores as there are;
// every member is read to its checked trailer).
func (d *Dataset) open(file string) (io.ReadCloser, error) {
	return d.files.OpenGzip(d.prefix+file, d.shown(file))
}

// peek reads a feature file's first row: its width and a first guess of
// its kind.
func (d *Dataset) peek(c *columns) error {
	if !d.has(c.file) {
		return nil
	}
	src, err := d.source(c.file)
	if err != nil {
		return err
	}
	defer src.Close()
	var r row
	err = src.read(&r, -1, false)
	if err == io.EOF {
		return nil // an empty file: no rows (no nodes or edges at all)
	}
	if err != nil {
		return err
	}
	shown, line := src.where()
	if err := d.limits.CheckColumns(name, shown, line, int64(len(r.vals))); err != nil {
		return err
	}
	c.Present, c.Width, c.Floats, c.Code = true, len(r.vals), !r.ints, 1
	return nil
}

// Meta implements ingest.Dataset.
func (d *Dataset) Meta() ingest.Meta {
	m := ingest.Meta{Name: d.name, Graphs: len(d.nodes), Nodes: d.totalNodes, Splits: d.splits,
		FeatureKind: shard.FeatureColumns}
	m.NodeColumns = d.node.Layout("node_feat")
	m.EdgeColumns = d.edge.Layout("edge_feat")
	m.Task = &shard.Task{Kind: d.task}
	if d.task == shard.TaskClass {
		for _, c := range d.classes {
			m.LabelMap = append(m.LabelMap, strconv.FormatFloat(c, 'f', -1, 64))
		}
	} else {
		m.Task.Targets = d.targets
	}
	return m
}

// Sources implements ingest.Dataset.
func (d *Dataset) Sources() []ingest.SourceHash { return d.files.Hashes() }

// Close implements ingest.Dataset.
func (d *Dataset) Close() error {
	var err error
	for _, c := range d.closers {
		if cerr := c(); err == nil {
			err = cerr
		}
	}
	d.closers = nil
	return err
}

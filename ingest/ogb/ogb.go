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
	"context"
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
	d := &Dataset{files: f, prefix: prefix, name: datasetName(f, prefix), limits: o.Limits.WithDefaults()}
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
	classes   []float64 // a class task's distinct raw labels, sorted
	labels    []float64 // a class task's raw labels
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

// rowSource yields one file's rows: a csv.gz file's lines, or an .npy
// array's rows.
type rowSource interface {
	// read parses the next row into r (want >= 0: the fields it must
	// have; missing: empty fields and nan allowed, as NaN); io.EOF past
	// the last.
	read(r *row, want int, missing bool) error
	// where names the row read last: the file as shown, and its line.
	where() (string, int64)
	io.Closer
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

// csvSource is a csv.gz file's rows.
type csvSource struct {
	rc io.ReadCloser
	l  *text.Reader
}

func (s *csvSource) read(r *row, want int, missing bool) error {
	b, err := s.l.Next()
	if err != nil {
		return err
	}
	return r.parse(s.l.File, s.l.Line, b, want, missing)
}

func (s *csvSource) where() (string, int64) { return s.l.File, s.l.Line }

func (s *csvSource) Close() error { return s.rc.Close() }

// open opens a csv.gz file, inflated on a goroutine of its own
// (ingest.Files.OpenGzip: the reader streams several files at once, whose
// inflating then runs beside the parsing, on as many cores as there are;
// every member is read to its checked trailer).
func (d *Dataset) open(file string) (io.ReadCloser, error) {
	return d.files.OpenGzip(d.prefix+file, d.shown(file))
}

func (d *Dataset) readCounts(file string) ([]int32, error) {
	src, err := d.source(file)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	var out []int32
	var r row
	for {
		err := src.read(&r, 1, false)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		shown, line := src.where()
		if v := r.vals[0]; !r.ints || v < 0 || v > math.MaxInt32/2 || v != math.Trunc(v) {
			return nil, formatErr(shown, line, 1, "count %v is not an integer in 0..%d", v, math.MaxInt32/2)
		}
		// A count is checked against its limit here, before anything is
		// held for it: a graph's rows are read only after the counts.
		check := d.limits.CheckNodes
		if file == fileEdgeCount {
			check = d.limits.CheckEdges
		}
		if err := check(name, shown, line, 1, int64(len(out)), int64(r.vals[0])); err != nil {
			return nil, err
		}
		out = append(out, int32(r.vals[0]))
	}
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

// openLabels reads the label file's first row for T and guesses the task;
// with one label a graph it reads them all (8 bytes a graph) to decide
// between classes and binary or regression targets.
func (d *Dataset) openLabels() error {
	if !d.has(fileLabels) {
		missing := d.shown(fileLabels)
		if d.npz {
			missing = d.shown(fileLabelsNpz)
		}
		return formatErr(missing, 0, 0, "missing required file (graph property prediction needs labels)")
	}
	src, err := d.source(fileLabels)
	if err != nil {
		return err
	}
	defer src.Close()
	var r row
	allInts, binary := true, true
	for g := 0; ; g++ {
		want := d.targets
		if g == 0 {
			want = -1
		}
		err := src.read(&r, want, true)
		shown, line := src.where()
		if err == io.EOF {
			if g != len(d.nodes) && (d.targets == 1 || g == 0) {
				return formatErr(shown, line, 0, "ends after %d rows; the count lists say %d graphs", g, len(d.nodes))
			}
			break
		}
		if err != nil {
			return err
		}
		if g == len(d.nodes) {
			return formatErr(shown, line, 0, "more rows than the %d graphs counted in the count lists", len(d.nodes))
		}
		if g == 0 {
			if err := d.limits.CheckColumns(name, shown, line, int64(len(r.vals))); err != nil {
				return err
			}
			d.targets, d.hasLabels = len(r.vals), true
		}
		allInts = allInts && r.ints
		for _, v := range r.vals {
			binary = binary && (v == 0 || v == 1 || math.IsNaN(v))
		}
		if d.targets > 1 {
			break // streamed by Graphs; the guess is checked there
		}
		d.labels = append(d.labels, r.vals[0])
	}
	d.task = ingest.TaskFor(d.targets, allInts, binary)
	if d.task == shard.TaskClass {
		d.classes = slices.Clone(d.labels)
		slices.Sort(d.classes)
		d.classes = slices.Compact(d.classes)
	} else {
		d.labels = nil
	}
	return nil
}

// readSplits reads every split/NAME/{train,valid,test}.csv.gz.
func (d *Dataset) readSplits() error {
	for _, e := range d.files.Entries() {
		rest, ok := strings.CutPrefix(e, d.prefix+"split/")
		if !ok || strings.Count(rest, "/") != 1 {
			continue
		}
		if dir, ok := strings.CutSuffix(rest, "/"+fileSplitDict); ok {
			if err := d.readSplitDict(dir); err != nil {
				return err
			}
			continue
		}
		if !strings.HasSuffix(rest, "/train.csv.gz") || d.files.Has(d.prefix+"split/"+strings.TrimSuffix(rest, "train.csv.gz")+fileSplitDict) {
			continue // the folder's split_dict.pt is read, as OGB does
		}
		dir := strings.TrimSuffix(rest, "/train.csv.gz")
		s := ingest.Split{Name: dir}
		for _, set := range []struct {
			file string
			ids  *[]int64
		}{{"train", &s.Train}, {"valid", &s.Valid}, {"test", &s.Test}} {
			file := "split/" + dir + "/" + set.file + ".csv.gz"
			if !d.files.Has(d.prefix + file) {
				return formatErr(d.shown(file), 0, 0, "missing: a split needs train, valid and test")
			}
			rc, err := d.open(file)
			if err != nil {
				return err
			}
			ids, err := text.ReadInts(rc, name, d.shown(file), 1024)
			rc.Close()
			if err != nil {
				return err
			}
			for i, id := range ids {
				if id < 0 || id >= int64(len(d.nodes)) {
					return formatErr(d.shown(file), int64(i+1), 1, "graph %d out of range 0..%d", id, len(d.nodes)-1)
				}
			}
			*set.ids = ids
		}
		d.splits = append(d.splits, s)
	}
	return nil
}

// readSplitDict reads split/DIR/split_dict.pt.
func (d *Dataset) readSplitDict(dir string) error {
	file := "split/" + dir + "/" + fileSplitDict
	ra, size, err := d.files.OpenRandom(d.prefix+file, d.shown(file))
	if err != nil {
		return err
	}
	defer ra.Close()
	s := ingest.Split{Name: dir}
	if s.Train, s.Valid, s.Test, err = readSplitDict(ra, size, d.shown(file), int64(len(d.nodes)), d.limits.MaxPickle); err != nil {
		return err
	}
	for _, set := range [][]int64{s.Train, s.Valid, s.Test} {
		for i, id := range set {
			if id < 0 || id >= int64(len(d.nodes)) {
				return formatErr(d.shown(file), 0, 0, "id %d (item %d) out of range 0..%d", id, i, len(d.nodes)-1)
			}
		}
	}
	d.splits = append(d.splits, s)
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

// row is one parsed comma-separated row.
type row struct {
	vals []float64
	ints bool // every field an integer
}

// parse parses b into r; want >= 0 is the field count required (a ragged
// row is an error naming it); missing allows empty and nan fields (NaN).
func (r *row) parse(file string, line int64, b []byte, want int, missing bool) error {
	r.vals, r.ints = r.vals[:0], true
	field := 0
	for i := 0; ; {
		field++
		j := i
		for j < len(b) && b[j] != ',' {
			j++
		}
		tok := b[i:j]
		for len(tok) > 0 && text.IsSpace(tok[0]) {
			tok = tok[1:]
		}
		for len(tok) > 0 && text.IsSpace(tok[len(tok)-1]) {
			tok = tok[:len(tok)-1]
		}
		v, isInt, ok := number(tok)
		switch {
		case ok && math.IsInf(v, 0):
			return ingest.Errorf(name, file, line, field, "%q is not a finite number", tok)
		case !ok && bigInteger(tok):
			return ingest.Errorf(name, file, line, field, "%v", ingest.BeyondFloat64(string(tok)))
		case ok:
		case missing && (len(tok) == 0 || strings.EqualFold(string(tok), "nan")):
			v, isInt = math.NaN(), false
		default:
			return ingest.Errorf(name, file, line, field, "%q is not a number", tok)
		}
		r.ints = r.ints && isInt
		r.vals = append(r.vals, v)
		if j == len(b) {
			break
		}
		i = j + 1
	}
	if want >= 0 && len(r.vals) != want {
		return ingest.Errorf(name, file, line, 0, "%d fields, the file's first row has %d", len(r.vals), want)
	}
	return nil
}

// bigInteger reports whether tok is an integer too long for number to
// take as one: its value beyond ±2^53.
func bigInteger(tok []byte) bool {
	t := tok
	if len(t) > 0 && (t[0] == '-' || t[0] == '+') {
		t = t[1:]
	}
	if len(t) <= 15 {
		return false
	}
	for _, c := range t {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// number parses an integer (fast) or a float token. An integer token of
// more than 15 digits is taken when a float64 holds it exactly (below
// 2^53); beyond, not at all (bigInteger says why).
func number(tok []byte) (float64, bool, bool) {
	if len(tok) == 0 {
		return 0, false, false
	}
	i, neg := 0, false
	if tok[0] == '-' || tok[0] == '+' {
		neg, i = tok[0] == '-', 1
	}
	if i < len(tok) && len(tok)-i <= 15 {
		var v int64
		k := i
		for k < len(tok) && tok[k] >= '0' && tok[k] <= '9' {
			v = v*10 + int64(tok[k]-'0')
			k++
		}
		if k == len(tok) && k > i {
			if neg {
				v = -v
			}
			return float64(v), true, true
		}
	}
	if bigInteger(tok) {
		v, err := strconv.ParseInt(string(tok), 10, 64)
		if err != nil || v >= 1<<53 || v <= -(1<<53) {
			return 0, false, false
		}
		return float64(v), true, true
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil || math.IsNaN(f) {
		return 0, false, false
	}
	return f, false, true
}

// cursor reads one file's rows graph by graph: total rows, one per node,
// edge or graph (what), as the count lists say.
type cursor struct {
	c     *columns // a feature file's columns; nil for the others
	src   rowSource
	r     row
	row   int64
	total int64
	what  string
}

func (d *Dataset) cursor(c *columns, file string, total int64, what string) (*cursor, error) {
	src, err := d.source(file)
	if err != nil {
		return nil, err
	}
	return &cursor{c: c, src: src, total: total, what: what}, nil
}

func (cu *cursor) close() {
	if cu != nil {
		cu.src.Close()
	}
}

// next parses the next row into cu.r; past the file's end, an error
// naming the count it fell short of.
func (cu *cursor) next(want int, missing bool) error {
	err := cu.src.read(&cu.r, want, missing)
	if err == io.EOF {
		file, line := cu.src.where()
		return formatErr(file, line, 0, "ends after %d rows; the count lists say %d %s", cu.row, cu.total, cu.what)
	}
	cu.row++
	return err
}

// end checks that the file has no rows left.
func (cu *cursor) end() error {
	if cu == nil {
		return nil
	}
	err := cu.src.read(&cu.r, -1, true)
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	file, line := cu.src.where()
	return formatErr(file, line, 0, "more rows than the %d %s counted in the count lists", cu.total, cu.what)
}

// Graphs implements ingest.Dataset.
func (d *Dataset) Graphs(ctx context.Context, _ ingest.ReadOptions, fn func(*shard.Graph) error) (ingest.Stats, error) {
	var st ingest.Stats
	edgesIn, err := d.cursor(nil, fileEdges, d.totalEdges, "edges")
	if err != nil {
		return st, err
	}
	defer edgesIn.close()
	var nodeIn, edgeIn, labelIn *cursor
	for _, c := range []struct {
		cols  *columns
		cu    **cursor
		total int64
		what  string
	}{{&d.node, &nodeIn, d.totalNodes, "nodes"}, {&d.edge, &edgeIn, d.totalEdges, "edges"}} {
		if c.cols.Present {
			if *c.cu, err = d.cursor(c.cols, c.cols.file, c.total, c.what); err != nil {
				return st, err
			}
			defer (*c.cu).close()
		}
	}
	if d.task != shard.TaskClass {
		if labelIn, err = d.cursor(nil, fileLabels, int64(len(d.nodes)), "graphs"); err != nil {
			return st, err
		}
		defer labelIn.close()
	}
	var (
		g      shard.Graph
		canon  ingest.Canon
		keys   []ingest.Entry
		rows   []int32
		lines  []int32 // per listing kept: its row among the graph's
		ecodes []int32 // per listing kept
		ex     []float32
	)
	for gi := range d.nodes {
		if gi&1023 == 0 && ctx.Err() != nil {
			return st, ctx.Err()
		}
		n, m := d.nodes[gi], d.edges[gi]
		g = shard.Graph{ID: int64(gi), NumNodes: n, NodeCat: shard.Codes{I32: g.NodeCat.I32[:0]}, X: g.X[:0],
			EdgeCat: shard.Codes{I32: g.EdgeCat.I32[:0]}, EdgeX: g.EdgeX[:0], Targets: g.Targets[:0], Edges: g.Edges[:0]}
		if nodeIn != nil {
			for range n {
				if err := nodeIn.next(d.node.Width, false); err != nil {
					return st, err
				}
				if err := d.take(nodeIn, &g.NodeCat.I32, &g.X); err != nil {
					return st, err
				}
			}
		}
		keys, lines, ecodes, ex = keys[:0], lines[:0], ecodes[:0], ex[:0]
		nCodes, nX := d.edge.Split()
		if edgeIn == nil {
			nCodes, nX = 0, 0
		}
		// Row i of ecodes and ex is listing i's features (self-loops
		// dropped with theirs); lines[i] its row among the graph's, which
		// the edge files hold from line firstLine on.
		conflict := func(edgeFile string, firstLine int64) func(u, v, r, r0 int32) error {
			return func(u, v, r, r0 int32) error {
				return formatErr(edgeFile, firstLine+int64(r), 0, "graph %d: edge (%d, %d) has other features than on line %d, where it is listed first: an undirected edge has one set of features",
					gi, u, v, firstLine+int64(r0))
			}
		}
		compactAt := ingest.CompactMin
		for k := range m {
			if err := edgesIn.next(2, false); err != nil {
				return st, err
			}
			st.DirectedEntries++
			u, v := edgesIn.r.vals[0], edgesIn.r.vals[1]
			if !edgesIn.r.ints {
				file, line := edgesIn.src.where()
				return st, formatErr(file, line, 0, "edge (%v, %v): node ids are integers", u, v)
			}
			if u < 0 || v < 0 || u >= float64(n) || v >= float64(n) {
				file, line := edgesIn.src.where()
				return st, formatErr(file, line, 0, "edge (%v, %v) is not in graph %d's nodes 0..%d (node ids are local to each graph)", u, v, gi, n-1)
			}
			if edgeIn != nil {
				if err := edgeIn.next(d.edge.Width, false); err != nil {
					return st, err
				}
				if err := d.take(edgeIn, &ecodes, &ex); err != nil {
					return st, err
				}
			}
			if u == v {
				st.SelfLoops++
				ecodes, ex = ecodes[:len(keys)*nCodes], ex[:len(keys)*nX]
				continue
			}
			keys = append(keys, ingest.Pack(int64(u), int64(v)))
			lines = append(lines, int32(k))
			if len(keys) >= compactAt {
				// A graph listing its edges many times over holds each
				// once (and each direction once): memory follows its
				// edges, not its rows.
				file, line := edgesIn.src.where()
				if edgeIn != nil {
					file, line = edgeIn.src.where()
				}
				var err error
				keys, lines, ecodes, ex, err = ingest.CompactListings(keys, lines, ecodes, nCodes, ex, nX, &st, conflict(file, line-int64(k)))
				if err != nil {
					return st, err
				}
				compactAt = max(ingest.CompactMin, 2*len(keys))
			}
		}
		rows = rows[:0]
		for i := range keys {
			rows = append(rows, int32(i))
		}
		edges, first := canon.Build(n, keys, rows, &st)
		g.Edges = append(g.Edges, edges...)
		if edgeIn != nil {
			file, line := edgeIn.src.where()
			line0 := conflict(file, line-int64(m-1))
			err := ingest.EdgeFeatures(&g, keys, rows, first, ecodes, nCodes, ex, nX, func(u, v, r, r0 int32) error {
				return line0(u, v, lines[r], lines[r0])
			})
			if err != nil {
				return st, err
			}
		}
		if err := d.label(&g, gi, labelIn); err != nil {
			return st, err
		}
		if err := fn(&g); err != nil {
			return st, err
		}
	}
	for _, cu := range []*cursor{edgesIn, nodeIn, edgeIn, labelIn} {
		if err := cu.end(); err != nil {
			return st, err
		}
	}
	return st, nil
}

// take appends a feature row to codes or floats, checking the guessed
// kind and code width; a contradiction corrects the guess and asks for a
// reread.
func (d *Dataset) take(cu *cursor, codes *[]int32, floats *[]float32) error {
	c := cu.c
	if c.Floats {
		for _, v := range cu.r.vals {
			*floats = append(*floats, float32(v))
		}
		return nil
	}
	if !cu.r.ints {
		c.Floats = true
		return ingest.ErrReread
	}
	for i, v := range cu.r.vals {
		switch {
		case v < 0:
			file, line := cu.src.where()
			return formatErr(file, line, i+1, "negative code %v in an integer (categorical) column", v)
		case v > math.MaxInt32-1:
			file, line := cu.src.where()
			return formatErr(file, line, i+1, "code %v out of range", v)
		case int64(v)+1 >= 1<<(8*c.Code) && c.Code < 4: // the vocabulary size, the fill's code, must fit too
			c.Code = shard.WidthFor(int64(v) + 1) // room for the reserved fill code
			return ingest.ErrReread
		}
		*codes = append(*codes, int32(v))
	}
	return nil
}

// label sets graph gi's label or targets.
func (d *Dataset) label(g *shard.Graph, gi int, cu *cursor) error {
	if d.task == shard.TaskClass {
		c, _ := slices.BinarySearch(d.classes, d.labels[gi])
		g.Label = int32(c)
		return nil
	}
	if err := cu.next(d.targets, true); err != nil {
		return err
	}
	for _, v := range cu.r.vals {
		if d.task == shard.TaskBinary && v != 0 && v != 1 && !math.IsNaN(v) {
			d.task = shard.TaskRegression
			return ingest.ErrReread
		}
		g.Targets = append(g.Targets, float32(v))
	}
	return nil
}

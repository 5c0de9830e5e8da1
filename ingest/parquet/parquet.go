// Package parquet reads graphs stored one per row of a Parquet table, in
// the columns the Hugging Face graphs-datasets use (and that
// augloader.write_shards writes): edge_index (a list of two lists, the
// sources and the targets, node ids local to the graph), num_nodes,
// optionally node_feat (a list of N rows of F numbers) and edge_attr (E
// rows of K numbers, aligned with edge_index's columns), and y (a number,
// a list of T numbers, or a list holding one such list; null: missing).
//
// Contract: an integer feature column is categorical (codes ≥ 0, one
// column per field) and a float one a float block, as its Arrow type says;
// y follows OGB's rule (see ingest.TaskFor). Edges are made undirected; an
// edge listed twice keeps its first listing's features and two listings
// with different features are refused (ingest.EdgeFeatures). The input is
// a bare .parquet file or a folder (zip, tar) of them, read in name order;
// when every file's name starts with train, valid or validation, and test
// (Hugging Face's split files), that split is written as split "files".
// Files are read a record batch at a time, never whole: the reader holds
// per-graph node counts and one class label a graph at most. Every fault
// names the file, its row (a graph, 1-based, as the line) and the column.
package parquet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/shard"
)

const name = "parquet"

// Column names.
const (
	colEdges    = "edge_index"
	colNodes    = "num_nodes"
	colNodeFeat = "node_feat"
	colEdgeFeat = "edge_attr"
	colLabel    = "y"
)

// batchRows is the rows a record batch holds while reading.
const batchRows = 4096

// Format reads Parquet tables of graphs.
type Format struct{}

// Name implements ingest.Format.
func (Format) Name() string { return name }

// Describe implements ingest.Format.
func (Format) Describe() string {
	return "a Parquet table of graphs, one a row (edge_index, num_nodes, y, optional node_feat and edge_attr: the Hugging Face graphs-datasets columns)"
}

// Wanted implements ingest.Format.
func (Format) Wanted(entry string) bool { return strings.HasSuffix(entry, ".parquet") }

// Detect implements ingest.Format: one dataset of every .parquet file.
func (Format) Detect(f *ingest.Files) []string {
	if f.Bare {
		if len(f.Magic) >= 4 && string(f.Magic[:4]) == "PAR1" {
			return []string{datasetName(f)}
		}
		return nil
	}
	if len(parquetFiles(f)) > 0 {
		return []string{datasetName(f)}
	}
	return nil
}

func parquetFiles(f *ingest.Files) []string {
	var out []string
	for _, e := range f.Entries() {
		if strings.HasSuffix(e, ".parquet") || f.Bare {
			out = append(out, e)
		}
	}
	return out
}

func datasetName(f *ingest.Files) string {
	base := path.Base(strings.TrimRight(f.Path, "/"))
	for _, ext := range []string{".parquet", ".zip", ".tar", ".gz", ".xz", ".tar"} {
		base = strings.TrimSuffix(base, ext)
	}
	return base
}

func formatErr(file string, line int64, detail string, args ...any) error {
	return ingest.Errorf(name, file, line, 0, detail, args...)
}

// Open implements ingest.Format.
func (Format) Open(f *ingest.Files, _ string, o ingest.OpenOptions) (ingest.Dataset, error) {
	d := &Dataset{files: f, name: datasetName(f), limits: o.Limits.WithDefaults(), asked: o.Task}
	ok := false
	defer func() {
		if !ok {
			d.Close()
		}
	}()
	for _, e := range parquetFiles(f) {
		t, err := d.openTable(e)
		if err != nil {
			return nil, err
		}
		d.tables = append(d.tables, t)
	}
	if len(d.tables) == 0 {
		return nil, formatErr(f.Path, 0, "no .parquet file")
	}
	if err := d.scan(); err != nil {
		return nil, err
	}
	d.splitFromNames()
	ok = true
	return d, nil
}

// Dataset is an opened set of Parquet tables.
type Dataset struct {
	files  *ingest.Files
	limits ingest.Limits
	name   string
	tables []*table
	nodes  []int32 // per graph
	total  int64
	node   ingest.Columns
	edge   ingest.Columns
	// Labels.
	targets int
	task    shard.TaskKind
	asked   shard.TaskKind // the task the user named ("": OGB's rule)
	classes []float64
	labels  []float64 // a class task's raw labels
	splits  []ingest.Split
}

// scan reads num_nodes (or node_feat's row counts) and y of every table:
// the node counts, T and the task; and the feature columns' first rows
// for their widths and kinds.
func (d *Dataset) scan() error {
	allInts, binary := true, true
	var r rowVals
	// The first row against each guess, for an asked task's error.
	type at struct {
		shown string
		line  int64
	}
	var firstNotInt, firstNotBinary *at
	for _, t := range d.tables {
		t.first = int64(len(d.nodes))
		countCol := colNodes
		if !hasLeaf(t, colNodes) {
			countCol = colNodeFeat
		}
		err := t.read(context.Background(), []string{countCol, colLabel}, func(rec arrow.RecordBatch, row int64) error {
			counts, labels := column(rec, countCol), column(rec, colLabel)
			for i := range int(rec.NumRows()) {
				line := row + int64(i) + 1
				n, err := nodeCount(counts, i)
				if err != nil {
					return formatErr(t.shown, line, "%s: %v", countCol, err)
				}
				if err := d.limits.CheckNodes(name, t.shown, line, 0, int64(len(d.nodes)), int64(n)); err != nil {
					return err
				}
				d.nodes = append(d.nodes, n)
				d.total += int64(n)
				if err := r.label(labels, i); err != nil {
					return formatErr(t.shown, line, "y: %v", err)
				}
				if len(d.nodes) == 1 {
					d.targets = len(r.vals)
				} else if len(r.vals) != d.targets {
					return formatErr(t.shown, line, "y: %d targets, the first row has %d", len(r.vals), d.targets)
				}
				wasInts, wasBinary := allInts, binary
				allInts = allInts && r.ints
				for _, v := range r.vals {
					binary = binary && (v == 0 || v == 1 || math.IsNaN(v))
					allInts = allInts && !math.IsNaN(v)
				}
				if wasInts && !allInts {
					firstNotInt = &at{t.shown, line}
				}
				if wasBinary && !binary {
					firstNotBinary = &at{t.shown, line}
				}
				if d.targets == 1 {
					d.labels = append(d.labels, r.vals[0])
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if len(d.nodes) == 0 {
		return formatErr(d.tables[0].shown, 0, "no graphs")
	}
	if d.targets == 0 {
		return formatErr(d.tables[0].shown, 1, "y: no label")
	}
	task, err := ingest.ChooseTask(d.asked, d.targets, allInts, binary)
	if err != nil {
		where := at{d.tables[0].shown, 1}
		if d.asked == shard.TaskClass && firstNotInt != nil {
			where = *firstNotInt
		} else if d.asked == shard.TaskBinary && firstNotBinary != nil {
			where = *firstNotBinary
		}
		return formatErr(where.shown, where.line, "y: %v", err)
	}
	d.task = task
	if d.task == shard.TaskClass {
		d.classes = slices.Clone(d.labels)
		slices.Sort(d.classes)
		d.classes = slices.Compact(d.classes)
	} else {
		d.labels = nil
	}
	for _, c := range []struct {
		col  string
		cols *ingest.Columns
	}{{colNodeFeat, &d.node}, {colEdgeFeat, &d.edge}} {
		if err := d.peek(c.col, c.cols); err != nil {
			return err
		}
	}
	return nil
}

// peek finds a feature column's kind from its Arrow type and its width
// from its first non-empty row.
func (d *Dataset) peek(col string, c *ingest.Columns) error {
	errFound := errors.New("found")
	// Every file has the column or none has: a file without it would
	// give its graphs no features where the others have them.
	var with, without *table
	for _, t := range d.tables {
		if hasLeaf(t, col) {
			with = cmp.Or(with, t)
		} else {
			without = cmp.Or(without, t)
		}
	}
	if with != nil && without != nil {
		return formatErr(without.shown, 0, "no %s column, where %s has one: every file of a dataset has the same columns", col, with.shown)
	}
	for _, t := range d.tables {
		if !hasLeaf(t, col) {
			continue
		}
		err := t.read(context.Background(), []string{col}, func(rec arrow.RecordBatch, row int64) error {
			rows, ok := column(rec, col).(array.ListLike)
			if !ok {
				return formatErr(t.shown, row+1, "%s is a %s, not a list of rows", col, column(rec, col).DataType())
			}
			inner, ok := rows.ListValues().(array.ListLike)
			if !ok {
				return formatErr(t.shown, row+1, "%s is a %s, not a list of rows", col, rows.DataType())
			}
			_, isInt, err := numbers(inner.ListValues())
			if err != nil {
				return formatErr(t.shown, row+1, "%s: %v", col, err)
			}
			for i := range int(rec.NumRows()) {
				s, e := rows.ValueOffsets(i)
				if e > s {
					is, ie := inner.ValueOffsets(int(s))
					if err := d.limits.CheckColumns(name, t.shown, row+int64(i)+1, ie-is); err != nil {
						return err
					}
					c.Present, c.Width, c.Floats, c.Code = true, int(ie-is), !isInt, 1
					return errFound
				}
			}
			return nil
		})
		if errors.Is(err, errFound) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// splitFromNames makes Hugging Face's train/validation/test files a
// split.
func (d *Dataset) splitFromNames() {
	if len(d.tables) < 2 {
		return
	}
	s := ingest.Split{Name: "files"}
	for i, t := range d.tables {
		end := int64(len(d.nodes))
		if i+1 < len(d.tables) {
			end = d.tables[i+1].first
		}
		base := path.Base(t.shown)
		var set *[]int64
		switch {
		case strings.HasPrefix(base, "train"):
			set = &s.Train
		case strings.HasPrefix(base, "valid"):
			set = &s.Valid
		case strings.HasPrefix(base, "test"):
			set = &s.Test
		default:
			return
		}
		for id := t.first; id < end; id++ {
			*set = append(*set, id)
		}
	}
	d.splits = []ingest.Split{s}
}

// Meta implements ingest.Dataset.
func (d *Dataset) Meta() ingest.Meta {
	m := ingest.Meta{Name: d.name, Graphs: len(d.nodes), Nodes: d.total, Splits: d.splits, FeatureKind: shard.FeatureColumns}
	m.NodeColumns = d.node.Layout(colNodeFeat)
	m.EdgeColumns = d.edge.Layout(colEdgeFeat)
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
	for _, t := range d.tables {
		if cerr := t.close(); err == nil {
			err = cerr
		}
	}
	d.tables = nil
	return err
}

// Graphs implements ingest.Dataset.
func (d *Dataset) Graphs(ctx context.Context, _ ingest.ReadOptions, fn func(*shard.Graph) error) (ingest.Stats, error) {
	var (
		st     ingest.Stats
		g      shard.Graph
		canon  ingest.Canon
		keys   []ingest.Entry
		rows   []int32
		ecodes []int32
		ex     []float32
		src    []float64
		dst    []float64
		r      rowVals
	)
	for _, t := range d.tables {
		err := t.read(ctx, []string{colEdges, colNodeFeat, colEdgeFeat, colLabel}, func(rec arrow.RecordBatch, row int64) error {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			edgeCol, nodeCol, edgeFeatCol, labelCol := column(rec, colEdges), column(rec, colNodeFeat), column(rec, colEdgeFeat), column(rec, colLabel)
			ei, err := newMatrix(edgeCol)
			if err != nil {
				return formatErr(t.shown, row+1, "edge_index: %v", err)
			}
			var nf, ef matrix
			if d.node.Present {
				if nf, err = newMatrix(nodeCol); err != nil {
					return formatErr(t.shown, row+1, "node_feat: %v", err)
				}
			}
			if d.edge.Present {
				if ef, err = newMatrix(edgeFeatCol); err != nil {
					return formatErr(t.shown, row+1, "edge_attr: %v", err)
				}
			}
			for i := range int(rec.NumRows()) {
				line := row + int64(i) + 1
				gi := t.first + row + int64(i)
				n := d.nodes[gi]
				g = shard.Graph{ID: gi, NumNodes: n, NodeCat: shard.Codes{I32: g.NodeCat.I32[:0]}, X: g.X[:0],
					EdgeCat: shard.Codes{I32: g.EdgeCat.I32[:0]}, EdgeX: g.EdgeX[:0], Targets: g.Targets[:0], Edges: g.Edges[:0]}
				if d.node.Present {
					if err := d.features(&d.node, nf, i, int(n), &g.NodeCat.I32, &g.X); err != nil {
						if errors.Is(err, ingest.ErrReread) {
							return err
						}
						return formatErr(t.shown, line, "node_feat: %v", err)
					}
				}
				if err := d.limits.CheckEdges(name, t.shown, line, 0, gi, int64(ei.pairLen(i))); err != nil {
					return err
				}
				src, dst, err = ei.pair(i, src[:0], dst[:0])
				if err != nil {
					return formatErr(t.shown, line, "edge_index: %v", err)
				}
				m := len(src)
				keys, rows, ecodes, ex = keys[:0], rows[:0], ecodes[:0], ex[:0]
				if d.edge.Present {
					if err := d.features(&d.edge, ef, i, m, &ecodes, &ex); err != nil {
						if errors.Is(err, ingest.ErrReread) {
							return err
						}
						return formatErr(t.shown, line, "edge_attr: %v", err)
					}
				}
				for k := range m {
					st.DirectedEntries++
					u, v := src[k], dst[k]
					if u != math.Trunc(u) || v != math.Trunc(v) {
						return formatErr(t.shown, line, "edge_index: edge %d (%v, %v): node ids are integers", k, u, v)
					}
					if u < 0 || v < 0 || u >= float64(n) || v >= float64(n) {
						return formatErr(t.shown, line, "edge_index: edge %d (%v, %v) is not in the graph's nodes 0..%d", k, u, v, n-1)
					}
					if u == v {
						st.SelfLoops++
						continue
					}
					keys = append(keys, ingest.Pack(int64(u), int64(v)))
					rows = append(rows, int32(k))
				}
				edges, first := canon.Build(n, keys, rows, &st)
				g.Edges = append(g.Edges, edges...)
				if d.edge.Present {
					nCodes, nX := d.edge.Split()
					err := ingest.EdgeFeatures(&g, keys, rows, first, ecodes, nCodes, ex, nX, func(u, v, r, r0 int32) error {
						return formatErr(t.shown, line, "edge_attr: edge (%d, %d) has other features in edge_index column %d than in column %d, where it is listed first: an undirected edge has one set of features", u, v, r, r0)
					})
					if err != nil {
						return err
					}
				}
				if err := r.label(labelCol, i); err != nil {
					return formatErr(t.shown, line, "y: %v", err)
				}
				if d.task == shard.TaskClass {
					c, _ := slices.BinarySearch(d.classes, r.vals[0])
					g.Label = int32(c)
				} else {
					for _, v := range r.vals {
						g.Targets = append(g.Targets, float32(v))
					}
				}
				if err := fn(&g); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return st, err
		}
	}
	return st, nil
}

// features appends row i of a feature matrix (rows of c.Width numbers,
// want rows) to codes or floats; a code wider than guessed widens the
// guess and asks for a reread.
func (d *Dataset) features(c *ingest.Columns, mx matrix, i, want int, codes *[]int32, floats *[]float32) error {
	s, e := mx.rows.ValueOffsets(i)
	if mx.rows.IsNull(i) || int(e-s) != want {
		return fmt.Errorf("%d rows, want %d", e-s, want)
	}
	for k := s; k < e; k++ {
		is, ie := mx.inner.ValueOffsets(int(k))
		if int(ie-is) != c.Width {
			return fmt.Errorf("row %d has %d fields, the first row of the column has %d", k-s, ie-is, c.Width)
		}
		for j := is; j < ie; j++ {
			v := mx.at(int(j))
			switch {
			case mx.nullAt(int(j)) || math.IsNaN(v):
				return fmt.Errorf("row %d, field %d: missing (null or nan)", k-s, j-is+1)
			case math.IsInf(v, 0):
				return fmt.Errorf("row %d, field %d: %v is not a finite number", k-s, j-is+1, v)
			case c.Floats:
				*floats = append(*floats, float32(v))
			case v < 0 || v > math.MaxInt32-1:
				return fmt.Errorf("row %d, field %d: code %v out of range 0..%d", k-s, j-is+1, v, math.MaxInt32-1)
			case int64(v)+1 >= 1<<(8*c.Code) && c.Code < 4: // the vocabulary size, the fill's code, must fit too
				c.Code = shard.WidthFor(int64(v) + 1)
				return ingest.ErrReread
			default:
				*codes = append(*codes, int32(v))
			}
		}
	}
	return nil
}

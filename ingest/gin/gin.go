// Package gin reads the GIN paper's text format (Xu et al., "How Powerful
// are Graph Neural Networks?", and the many forks of its code): one
// NAME.txt holding every graph, from any container ingest.Files opens (a
// folder, a .zip, a tar) or as a bare file. Format is its ingest.Format.
// Every input error is an *ingest.FormatError naming the line and field.
package gin

import (
	"bytes"
	"context"
	"io"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/internal/text"
	"github.com/augloader/augloader/shard"
)

// name is the format's name, its errors' prefix.
const name = "gin"

func formatErr(file string, line int64, field int, format string, args ...any) error {
	return ingest.Errorf(name, file, line, field, format, args...)
}

// Format is the GIN text format.
type Format struct{}

var _ ingest.Format = Format{}

// Name implements ingest.Format.
func (Format) Name() string { return name }

// Describe implements ingest.Format.
func (Format) Describe() string {
	return "the GIN text format (one NAME.txt, or a bare .txt file)"
}

// Wanted implements ingest.Format: text files that may be a GIN dataset.
func (Format) Wanted(entry string) bool { return candidate(entry) }

// candidate says whether an entry may be a GIN dataset's text (the GIN
// distribution's zips also hold 10fold_idx/*.txt and READMEs).
func candidate(full string) bool {
	base := path.Base(full)
	return strings.HasSuffix(base, ".txt") && !strings.HasPrefix(base, ".") &&
		!strings.Contains(full, "10fold_idx") && !strings.EqualFold(base, "README.txt") &&
		!strings.HasSuffix(base, "_label_readme.txt")
}

// Detect implements ingest.Format: a bare file that opens with a graph
// count alone on its first line, or the candidate .txt entries of a
// container (TU's files are never GIN's: a converter asks TU first).
func (Format) Detect(f *ingest.Files) []string {
	if f.Bare {
		line, _, _ := bytes.Cut(f.Magic, []byte("\n"))
		if t := bytes.TrimSpace(line); len(t) > 0 && len(t) < 20 && allDigits(t) {
			return []string{strings.TrimSuffix(path.Base(f.Entries()[0]), ".txt")}
		}
		return nil
	}
	var out []string
	for _, e := range f.Entries() {
		if candidate(e) {
			out = append(out, strings.TrimSuffix(path.Base(e), ".txt"))
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Open implements ingest.Format.
func (Format) Open(f *ingest.Files, dataset string, o ingest.OpenOptions) (ingest.Dataset, error) {
	if err := ingest.ClassesOnly(o, "GIN", f.Path); err != nil {
		return nil, err
	}
	if dataset == "" {
		names := Format{}.Detect(f)
		switch len(names) {
		case 0:
			return nil, formatErr(f.Path, 0, 0, "not a GIN dataset: looked for %s", Format{}.Describe())
		case 1:
			dataset = names[0]
		default:
			return nil, formatErr(f.Path, 0, 0, "holds %d candidate GIN files (%s): name one with --name", len(names), strings.Join(names, ", "))
		}
	}
	d := &Dataset{Table: ingest.Table{Name: dataset}, files: f, file: dataset + ".txt", limits: o.Limits.WithDefaults()}
	for _, e := range f.Entries() {
		if path.Base(e) == d.file && (f.Bare || candidate(e)) {
			if d.entry != "" {
				return nil, formatErr(f.Path, 0, 0, "holds %q and %q: refusing to guess which one is the dataset", d.entry, e)
			}
			d.entry = e
		}
	}
	if f.Bare {
		d.entry, d.file = f.Entries()[0], path.Base(f.Path)
	}
	if d.entry == "" {
		return nil, formatErr(d.file, 0, 0, "missing required file")
	}
	mode := o.Features
	if mode == "" {
		mode = ingest.FeaturesAuto
	}
	if err := d.load(mode); err != nil {
		return nil, err
	}
	return d, nil
}

// Dataset is a GIN file's graphs: Open reads sizes, labels and tags
// (O(nodes)); Graphs streams the neighbour lists graph by graph.
type Dataset struct {
	ingest.Table
	files *ingest.Files
	entry string // the file's entry in files
	file  string // its name in errors and the manifest's sources
	// limits bound what the file may make the reader hold.
	limits ingest.Limits
}

var _ ingest.Dataset = (*Dataset)(nil)

// Sources implements ingest.Dataset.
func (d *Dataset) Sources() []ingest.SourceHash { return d.files.Hashes() }

// Close implements ingest.Dataset: nothing of its own to release.
func (d *Dataset) Close() error { return nil }

// The format, one NAME.txt:
//
//	N                         graphs
//	n l                       per graph: its node count and label, then n lines:
//	t m v1 … vm [a1 … ad]     node tag, neighbour count, neighbours (0-based
//	                          within the graph), optional attributes
//
// Read with TUDataset's conventions: graph labels remapped to 0..C-1 in
// sorted order; tags are node labels (one-hot of tag − min); edges made
// undirected with self-loops and duplicates dropped and counted. With
// --features auto a file whose tags are all equal (the social datasets:
// COLLAB, IMDB, REDDIT store 0) gets degree features, as a TU dataset
// without node labels does. Two passes: Load reads sizes, labels and tags
// (O(nodes)); Graphs streams the neighbour lists graph by graph.

// load is the first pass over the file.
func (d *Dataset) load(mode ingest.FeatureMode) error {
	file := d.file
	rc, err := d.files.Open(d.entry, d.file)
	if err != nil {
		return err
	}
	defer rc.Close()
	l := text.NewReader(rc, name, file)
	ng, err := l.NextInt()
	if err == io.EOF {
		return formatErr(file, 0, 0, "empty file")
	}
	if err != nil {
		return err
	}
	if ng < 1 || ng > 1<<31-1 {
		return formatErr(file, 1, 1, "%d graphs", ng)
	}
	hint := min(ng, 1<<16) // the count is the file's word, not yet its content
	d.GraphStart = make([]int64, 1, hint+1)
	rawLabels := make([]int64, 0, hint)
	var tags []int64
	attrDim := -1
	for g := int64(0); g < ng; g++ {
		b, err := l.Next()
		if err == io.EOF {
			return formatErr(file, l.Line, 0, "the file ends after %d of its %d graphs", g, ng)
		}
		if err != nil {
			return err
		}
		n, i, err := l.ParseInt(b, 0, 1)
		if err != nil {
			return err
		}
		lab, i, err := l.ParseInt(b, i, 2)
		if err != nil {
			return err
		}
		if err := l.ExpectEnd(b, i, 2); err != nil {
			return err
		}
		if n < 1 || n > shard.MaxNodesPerGraph {
			return formatErr(file, l.Line, 1, "graph %d has %d nodes", g+1, n)
		}
		if err := d.limits.CheckNodes(name, file, l.Line, 1, g+1, n); err != nil {
			return err
		}
		rawLabels = append(rawLabels, lab)
		for v := int64(0); v < n; v++ {
			b, err := l.Next()
			if err == io.EOF {
				return formatErr(file, l.Line, 0, "graph %d ends after %d of its %d nodes", g+1, v, n)
			}
			if err != nil {
				return err
			}
			tag, i, err := l.ParseInt(b, 0, 1)
			if err != nil {
				return err
			}
			m, i, err := l.ParseInt(b, i, 2)
			if err != nil {
				return err
			}
			if m < 0 || m > n {
				return formatErr(file, l.Line, 2, "node %d of graph %d lists %d neighbours (the graph has %d nodes)", v, g+1, m, n)
			}
			for k := int64(0); k < m; k++ {
				var u int64
				if u, i, err = l.ParseInt(b, i, int(3+k)); err != nil {
					return err
				}
				if u < 0 || u >= n {
					return formatErr(file, l.Line, int(3+k), "neighbour %d out of range 0..%d", u, n-1)
				}
			}
			// What follows the neighbours is the node's attributes.
			var attrs []float32
			for {
				for i < len(b) && text.IsSpace(b[i]) {
					i++
				}
				if i >= len(b) {
					break
				}
				f := text.FieldText(b, i)
				x, err := strconv.ParseFloat(string(f), 32)
				if err != nil {
					return formatErr(file, l.Line, int(3+m)+len(attrs), "%q is not a number", f)
				}
				attrs = append(attrs, float32(x))
				i += len(f)
			}
			switch {
			case attrDim < 0:
				attrDim = len(attrs)
			case len(attrs) != attrDim:
				return formatErr(file, l.Line, 0, "%d attributes, the first node has %d", len(attrs), attrDim)
			}
			tags = append(tags, tag)
			if mode == ingest.FeaturesAttributes {
				d.X = append(d.X, attrs...)
			}
		}
		d.GraphStart = append(d.GraphStart, d.GraphStart[g]+n)
	}
	if _, err := l.Next(); err != io.EOF {
		if err != nil {
			return err
		}
		return formatErr(file, l.Line, 0, "more lines after the %d graphs the file announces", ng)
	}
	d.NumGraphs, d.NumNodes = int(ng), d.GraphStart[ng]
	d.SetGraphLabels(rawLabels)
	if mode == ingest.FeaturesAuto {
		mode = ingest.FeaturesDegree
		if slices.Min(tags) != slices.Max(tags) {
			mode = ingest.FeaturesLabels
		}
	}
	switch mode {
	case ingest.FeaturesLabels:
		return d.SetNodeLabels(name, file, tags)
	case ingest.FeaturesAttributes:
		if attrDim < 1 {
			return formatErr(file, 0, 0, "no node attributes: --features attributes needs them")
		}
		d.FeatureKind, d.FeatureDim = shard.FeatureAttributes, attrDim
	case ingest.FeaturesDegree:
		d.FeatureKind = shard.FeatureDegree
	default:
		return formatErr(file, 0, 0, "unknown features %q", mode)
	}
	return nil
}

// Graphs implements ingest.Dataset: the second pass, one graph at a time
// (a GIN file lists graphs in order by construction: o has no effect).
func (d *Dataset) Graphs(ctx context.Context, o ingest.ReadOptions, fn func(*shard.Graph) error) (ingest.Stats, error) {
	var st ingest.Stats
	file := d.file
	rc, err := d.files.Open(d.entry, d.file)
	if err != nil {
		return st, err
	}
	defer rc.Close()
	l := text.NewReader(rc, name, file)
	if _, err := l.Next(); err != nil { // the graph count, checked by Load
		return st, err
	}
	e := ingest.Emitter{T: &d.Table, Fn: fn, St: &st}
	var keys []ingest.Entry
	for g := 0; g < d.NumGraphs; g++ {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		if _, err := l.Next(); err != nil { // n l
			return st, formatErr(file, l.Line, 0, "the file changed while it was read: %v", err)
		}
		keys = keys[:0]
		n := d.GraphStart[g+1] - d.GraphStart[g]
		for v := int64(0); v < n; v++ {
			b, err := l.Next()
			if err != nil {
				return st, formatErr(file, l.Line, 0, "the file changed while it was read: %v", err)
			}
			_, i, _ := l.ParseInt(b, 0, 1)
			m, i, err := l.ParseInt(b, i, 2)
			if err != nil {
				return st, err
			}
			for k := int64(0); k < m; k++ {
				var u int64
				if u, i, err = l.ParseInt(b, i, int(3+k)); err != nil {
					return st, err
				}
				if u < 0 || u >= n {
					return st, formatErr(file, l.Line, int(3+k), "neighbour %d out of range 0..%d", u, n-1)
				}
				st.DirectedEntries++
				if u == v {
					st.SelfLoops++
					continue
				}
				keys = append(keys, ingest.Pack(v, u))
			}
		}
		if err := e.Emit(g, keys, nil); err != nil {
			return st, err
		}
	}
	return st, nil
}

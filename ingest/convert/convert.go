// Package convert turns a dataset in any input format into a shard
// folder: the library behind `shardconv convert`, callable from tests and
// benchmarks. It opens the input's files (ingest.Files), asks each format
// of Formats in turn which datasets it recognises, and writes the one
// chosen through shard.Writer, computing degree features when asked.
package convert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/gin"
	"github.com/augloader/augloader/ingest/ogb"
	"github.com/augloader/augloader/ingest/parquet"
	"github.com/augloader/augloader/ingest/tu"
	"github.com/augloader/augloader/shard"
)

// Formats are the input formats conversion recognises, asked in this
// order (the first that recognises an input reads it). Adding a format is
// a package implementing ingest.Format and one line here.
var Formats = []ingest.Format{
	tu.Format{},
	ogb.Format{},
	gin.Format{},
	parquet.Format{},
}

// OpenOptions tune Open.
type OpenOptions struct {
	// Name selects the dataset when the input holds several.
	Name string
	// SpoolDir is where a tar's entries are spooled (ingest.FilesOptions).
	SpoolDir string
	// Features chooses the node features (default auto).
	Features ingest.FeatureMode
	// Task names the graph labels' task ("" or auto: OGB's rule;
	// ingest.ChooseTask).
	Task shard.TaskKind
	// Limits bound what the input may make the converter hold (zero
	// fields: the defaults).
	Limits ingest.Limits
	// Context, when set, stops a long read of the input (an archive
	// spooled) when it is done.
	Context context.Context
}

// Open opens the dataset at input in whichever format recognises it. The
// caller closes both the dataset and its files.
func Open(input string, o OpenOptions) (ingest.Dataset, *ingest.Files, error) {
	wanted := func(entry string) bool {
		for _, f := range Formats {
			if f.Wanted(entry) {
				return true
			}
		}
		return false
	}
	files, err := ingest.OpenFiles(input, ingest.FilesOptions{SpoolDir: o.SpoolDir, Wanted: wanted,
		MaxExpansion: o.Limits.Expansion, Context: o.Context})
	if err != nil {
		return nil, nil, err
	}
	ds, err := open(files, o)
	if err != nil {
		files.Close()
		return nil, nil, err
	}
	return ds, files, nil
}

func open(files *ingest.Files, o OpenOptions) (ingest.Dataset, error) {
	var looked []string
	for _, f := range Formats {
		names := f.Detect(files)
		looked = append(looked, f.Describe())
		switch {
		case o.Name != "" && slices.Contains(names, o.Name):
			return f.Open(files, o.Name, ingest.OpenOptions{Features: o.Features, Task: o.Task, Limits: o.Limits})
		case o.Name != "":
		case len(names) == 1:
			return f.Open(files, names[0], ingest.OpenOptions{Features: o.Features, Task: o.Task, Limits: o.Limits})
		case len(names) > 1:
			return nil, ingest.Errorf(f.Name(), files.Path, 0, 0, "holds %d %s datasets (%s): name one with --name", len(names), f.Name(), strings.Join(names, ", "))
		}
	}
	if o.Name != "" {
		// Some of the named dataset's files but not enough for its format
		// to recognise it: that format says what is missing.
		for _, f := range Formats {
			for _, e := range files.Entries() {
				if f.Wanted(e) && strings.HasPrefix(path.Base(e), o.Name) {
					return f.Open(files, o.Name, ingest.OpenOptions{Features: o.Features, Task: o.Task, Limits: o.Limits})
				}
			}
		}
		return nil, ingest.Errorf("input", files.Path, 0, 0, "no dataset %q here (looked for %s)", o.Name, strings.Join(looked, "; or "))
	}
	return nil, ingest.Errorf("input", files.Path, 0, 0, "not a dataset this build reads: looked for %s", strings.Join(looked, "; or "))
}

// Options configure Run. Zero values take the stated defaults.
type Options struct {
	Input string // dataset folder, .zip, .tar(.gz|.xz) or bare file in any of Formats (required)
	Out   string // shard folder to create (required)
	Name  string // dataset name; default: inferred from the single *_A.txt
	// Features: auto (default), labels, attributes or degree.
	Features ingest.FeatureMode
	// Task: the graph labels' task, class, binary or regression ("" or
	// auto: a class for one integer label a graph beyond 0 and 1, binary
	// targets for 0, 1 and missing, regression otherwise).
	Task        shard.TaskKind
	Compression shard.Compression // default zstd
	ShardBytes  int64             // default 64 MiB
	Force       bool              // replace an existing Out once the new one is complete
	// Order stores the graphs in a seeded random order, ids unchanged
	// ("random:SEED", shard.WriterOptions.Order; "" keeps id order): a set
	// listed in class order then mixes within a few pages of the windowed
	// shuffle. The writer holds the decoded set until the end.
	Order string
	// Generation names the files of a folder that will replace another in
	// object storage (shard.WriterOptions.Generation); "" for local ones.
	Generation string
	// Limits bound what the input may make the converter hold: the
	// largest graph's nodes and edge listings, feature columns, a
	// pickle's size, what compressed bytes inflate to (zero fields: the
	// defaults, ingest.DefaultLimits).
	Limits ingest.Limits
	// Structures configure an input of 3D atomistic structures (an
	// extended XYZ file, an ASE database): format 4.
	Structures StructureOptions
	// Progress, when set, is called with graphs written so far and the total.
	Progress func(done, total int)
	Logger   *slog.Logger // nil: discard
}

// Result summarises a conversion.
type Result struct {
	Manifest   *shard.Manifest
	InputBytes int64 // bytes of the source files read
	Elapsed    time.Duration
	// ReadElapsed is the part of Elapsed until every graph was read,
	// canonicalised and handed to the writer (with degree features, the
	// shards are written only after it; otherwise alongside it).
	ReadElapsed time.Duration
}

// Run converts Input into Out. On any error Out is untouched (the temporary
// folder is removed) and the error names the file and line at fault.
func Run(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	if o.Input == "" || o.Out == "" {
		return nil, errors.New("convert: input and output are required")
	}
	if IsStructures(o.Input) {
		return runStructures(ctx, o)
	}
	if o.Features == "" {
		o.Features = ingest.FeaturesAuto
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if _, err := os.Lstat(o.Out); err == nil && !o.Force {
		return nil, fmt.Errorf("%w: %s (use --force to replace it)", shard.ErrExists, o.Out)
	}
	// A tar's entries are spooled beside the output (where the shards will
	// be, so there is room), never held in memory.
	ds, files, err := Open(o.Input, OpenOptions{Name: o.Name, SpoolDir: filepath.Dir(filepath.Clean(o.Out)), Features: o.Features, Task: o.Task,
		Limits: o.Limits, Context: ctx})
	if err != nil {
		return nil, err
	}
	defer files.Close()
	defer ds.Close()
	meta := ds.Meta()
	log.Info("loaded dataset", "name", meta.Name, "graphs", meta.Graphs, "nodes", meta.Nodes, "features", meta.FeatureKind)

	var (
		man      *shard.Manifest
		readDone time.Time
	)
	buffered := false
	for attempt := 0; ; attempt++ {
		man, readDone, err = write(ctx, o, ds, files, buffered)
		switch {
		case errors.Is(err, ingest.ErrUnordered) && !buffered:
			buffered = true
			log.Warn("edges are not grouped by graph; re-reading with all edges in memory", "err", err)
			continue
		case errors.Is(err, ingest.ErrReread) && attempt < 8:
			// Each reread widens a guess (integers to floats, a code width,
			// binary to regression): a few at most.
			log.Info("a column's type changed while reading; reading again", "err", err)
			continue
		}
		break
	}
	if err != nil {
		return nil, err
	}
	res := &Result{Manifest: man, Elapsed: time.Since(start), ReadElapsed: readDone.Sub(start)}
	for _, s := range man.Sources {
		res.InputBytes += s.Bytes
	}
	return res, nil
}

// write converts ds into o.Out and returns the manifest and when the last
// graph had been read.
func write(ctx context.Context, o Options, ds ingest.Dataset, files *ingest.Files, buffered bool) (man *shard.Manifest, readDone time.Time, err error) {
	var w *shard.Writer
	defer func() {
		// A reader's bug must not kill the process with the temporary
		// folder left behind: it fails this conversion, naming itself.
		if p := recover(); p != nil {
			if w != nil {
				w.Abort()
			}
			man, err = nil, fmt.Errorf("convert: %s: internal error reading the input (please report it): %v", o.Input, p)
		}
	}()
	meta := ds.Meta()
	wo := shard.WriterOptions{
		Dataset: meta.Name, FeatureKind: meta.FeatureKind, FeatureDim: meta.FeatureDim,
		EdgeLabels: meta.EdgeLabelDim > 0, Compression: o.Compression, ShardBytes: o.ShardBytes, Force: o.Force,
		Order: o.Order, Generation: o.Generation,
	}
	if meta.Task != nil {
		wo.FeatureKind, wo.FeatureDim, wo.EdgeLabels = "", 0, false
		wo.NodeColumns, wo.EdgeColumns, wo.Task = meta.NodeColumns, meta.EdgeColumns, meta.Task
	}
	m := shard.Manifest{
		Classes:      len(meta.LabelMap),
		LabelMap:     meta.LabelMap,
		EdgeLabelDim: meta.EdgeLabelDim,
		Features:     shard.Features{LabelMin: meta.LabelMin},
	}
	rd := ingest.ReadOptions{Buffered: buffered}
	var (
		st   ingest.Stats
		done int
	)
	progress := func() {
		done++
		if o.Progress != nil && (done&63 == 0 || done == meta.Graphs) {
			o.Progress(done, meta.Graphs)
		}
	}
	if meta.FeatureKind == shard.FeatureDegree {
		// The degree vocabulary spans the whole dataset, so the graphs are
		// held (8 bytes per edge) until it is known.
		var all collected
		st, err = ds.Graphs(ctx, rd, func(g *shard.Graph) error {
			all.add(g)
			return nil
		})
		readDone = time.Now()
		if err != nil {
			return nil, readDone, err
		}
		m.Features.Degrees = all.degreeCodes()
		wo.FeatureDim = len(m.Features.Degrees)
		if w, err = shard.NewWriter(o.Out, wo); err != nil {
			return nil, readDone, err
		}
		for i := range all.numNodes {
			if i&1023 == 0 && ctx.Err() != nil {
				err = ctx.Err()
				break
			}
			g := all.graph(i)
			if err = w.Append(&g); err != nil {
				break
			}
			progress()
		}
	} else {
		if w, err = shard.NewWriter(o.Out, wo); err != nil {
			return nil, readDone, err
		}
		st, err = ds.Graphs(ctx, rd, func(g *shard.Graph) error {
			if err := w.Append(g); err != nil {
				return err
			}
			progress()
			return nil
		})
		readDone = time.Now()
	}
	if err != nil {
		w.Abort()
		return nil, readDone, err
	}
	// Every byte of the input checked before anything is committed: a
	// stream a parser stopped reading early is read to its end (a gzip
	// trailer, a zip entry's CRC-32).
	if err := files.Complete(ctx); err != nil {
		w.Abort()
		return nil, readDone, err
	}
	m.Stats = shard.Stats{
		DirectedEntries:       st.DirectedEntries,
		SelfLoopsDropped:      st.SelfLoops,
		DuplicateEdgesDropped: st.Duplicates,
		AsymmetricEdges:       st.Asymmetric,
	}
	for _, h := range ds.Sources() {
		m.Sources = append(m.Sources, shard.Source{Name: h.Name, Bytes: h.Bytes, SHA256: h.SHA256})
	}
	for _, sp := range meta.Splits {
		if err := writeSplit(w, sp, meta.Graphs); err != nil {
			w.Abort()
			return nil, readDone, err
		}
	}
	// Nothing is committed once cancelled (SIGTERM), however late.
	if err := ctx.Err(); err != nil {
		w.Abort()
		return nil, readDone, err
	}
	if man, err = w.FinishContext(ctx, m); err != nil {
		w.Abort()
		return nil, readDone, err
	}
	return man, readDone, nil
}

// collected holds every graph's canonical edges for degree features, one
// exact-size slice per graph (no regrowth copies of one huge slice).
type collected struct {
	numNodes    []int32
	graphLabels []int32 // graph labels
	edges       [][]int32
	labels      [][]int32 // edge labels, when the dataset has them
	codes       []int32   // per node, filled by degreeCodes
	nodeOff     []int64
}

func (c *collected) add(g *shard.Graph) {
	if len(c.nodeOff) == 0 {
		c.nodeOff = []int64{0}
	}
	c.numNodes = append(c.numNodes, g.NumNodes)
	c.graphLabels = append(c.graphLabels, g.Label)
	c.edges = append(c.edges, slices.Clone(g.Edges))
	if g.EdgeLabels != nil {
		c.labels = append(c.labels, slices.Clone(g.EdgeLabels))
	}
	c.nodeOff = append(c.nodeOff, c.nodeOff[len(c.nodeOff)-1]+int64(g.NumNodes))
}

// degreeCodes computes every node's degree, the sorted distinct degrees of
// the dataset (returned), and each node's code: the index of its degree.
func (c *collected) degreeCodes() []int32 {
	c.codes = make([]int32, c.nodeOff[len(c.nodeOff)-1])
	for i := range c.numNodes {
		deg := c.codes[c.nodeOff[i]:c.nodeOff[i+1]]
		for _, v := range c.edges[i] {
			deg[v]++
		}
	}
	var maxDeg int32
	for _, d := range c.codes {
		maxDeg = max(maxDeg, d)
	}
	seen := make([]int32, maxDeg+1) // degree -> code+1
	for _, d := range c.codes {
		seen[d] = 1
	}
	var vocab []int32
	for d, s := range seen {
		if s != 0 {
			seen[d] = int32(len(vocab))
			vocab = append(vocab, int32(d))
		}
	}
	for i, d := range c.codes {
		c.codes[i] = seen[d]
	}
	return vocab
}

func (c *collected) graph(i int) shard.Graph {
	g := shard.Graph{
		ID: int64(i), Label: c.graphLabels[i], NumNodes: c.numNodes[i],
		Edges: c.edges[i],
		Codes: c.codes[c.nodeOff[i]:c.nodeOff[i+1]],
	}
	if len(c.labels) > 0 {
		g.EdgeLabels = c.labels[i]
	}
	return g
}

// SplitFileName is the file a split of the input is written to in the
// shard folder.
func SplitFileName(split string) string { return "split-" + split + ".json" }

// writeSplit writes sp as an epoch split file (training, valid, test) into
// the shard folder.
func writeSplit(w *shard.Writer, sp ingest.Split, graphs int) error {
	for _, r := range sp.Name {
		if !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') || sp.Name == "." || sp.Name == ".." {
			return fmt.Errorf("convert: split name %q: want letters, digits, '-', '_' or '.'", sp.Name)
		}
	}
	s := epoch.Split{Training: nonNil(sp.Train), Valid: nonNil(sp.Valid), Test: nonNil(sp.Test)}
	if err := s.Check(int64(graphs)); err != nil {
		return fmt.Errorf("convert: split %q: %w", sp.Name, err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return w.AddFile(SplitFileName(sp.Name), append(b, '\n'))
}

func nonNil(s []int64) []int64 {
	if s == nil {
		return []int64{}
	}
	return s
}

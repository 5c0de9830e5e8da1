// Package convert turns a TU dataset (folder or zip) into a shard folder:
// the library behind `shardconv convert`, callable from tests and benchmarks.
package convert

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/shard/tu"
)

// Options configure Run. Zero values take the stated defaults.
type Options struct {
	Input string // dataset folder, .zip, .tar(.gz|.xz) or GIN .txt (required; see tu.Open)
	Out   string // shard folder to create (required)
	Name  string // dataset name; default: inferred from the single *_A.txt
	// Features: auto (default), labels, attributes or degree.
	Features    tu.FeatureMode
	Compression shard.Compression // default zstd
	ShardBytes  int64             // default 64 MiB
	Force       bool              // replace an existing Out once the new one is complete
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
	if o.Features == "" {
		o.Features = tu.FeaturesAuto
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
	src, err := tu.Open(o.Input, tu.OpenOptions{Name: o.Name, SpoolDir: filepath.Dir(filepath.Clean(o.Out))})
	if err != nil {
		return nil, err
	}
	defer src.Close()
	ds, err := tu.Load(src, o.Features)
	if err != nil {
		return nil, err
	}
	log.Info("loaded dataset", "name", ds.Name, "graphs", ds.NumGraphs, "nodes", ds.NumNodes, "features", ds.FeatureKind)

	var (
		man      *shard.Manifest
		readDone time.Time
	)
	for _, buffered := range []bool{false, true} {
		man, readDone, err = write(ctx, o, ds, buffered)
		if !errors.Is(err, tu.ErrUnordered) {
			break
		}
		log.Warn("edges are not grouped by graph; re-reading with all edges in memory", "err", err)
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
func write(ctx context.Context, o Options, ds *tu.Dataset, buffered bool) (*shard.Manifest, time.Time, error) {
	wo := shard.WriterOptions{
		Dataset: ds.Name, FeatureKind: ds.FeatureKind, FeatureDim: ds.FeatureDim,
		EdgeLabels: ds.HasEdgeLabels, Compression: o.Compression, ShardBytes: o.ShardBytes, Force: o.Force,
	}
	m := shard.Manifest{
		Classes:      len(ds.LabelMap),
		LabelMap:     ds.LabelMap,
		EdgeLabelDim: ds.EdgeLabelDim,
		Features:     shard.Features{LabelMin: ds.LabelMin},
	}
	var (
		w        *shard.Writer
		st       tu.EdgeStats
		err      error
		done     int
		readDone time.Time
	)
	progress := func() {
		done++
		if o.Progress != nil && (done&63 == 0 || done == ds.NumGraphs) {
			o.Progress(done, ds.NumGraphs)
		}
	}
	if ds.FeatureKind == shard.FeatureDegree {
		// The degree vocabulary spans the whole dataset, so the graphs are
		// held (8 bytes per edge) until it is known.
		var all collected
		st, err = ds.Graphs(ctx, buffered, func(g *shard.Graph) error {
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
			g := all.graph(i, ds.Labels[i])
			if err = w.Append(&g); err != nil {
				break
			}
			progress()
		}
	} else {
		if w, err = shard.NewWriter(o.Out, wo); err != nil {
			return nil, readDone, err
		}
		st, err = ds.Graphs(ctx, buffered, func(g *shard.Graph) error {
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
	m.Stats = shard.Stats{
		DirectedEntries:       st.DirectedEntries,
		SelfLoopsDropped:      st.SelfLoops,
		DuplicateEdgesDropped: st.Duplicates,
		AsymmetricEdges:       st.Asymmetric,
	}
	for _, h := range ds.Source().Hashes() {
		m.Sources = append(m.Sources, shard.Source{Name: h.Name, Bytes: h.Bytes, SHA256: h.SHA256})
	}
	man, err := w.Finish(m)
	if err != nil {
		w.Abort()
		return nil, readDone, err
	}
	return man, readDone, nil
}

// collected holds every graph's canonical edges for degree features, one
// exact-size slice per graph (no regrowth copies of one huge slice).
type collected struct {
	numNodes []int32
	edges    [][]int32
	labels   [][]int32 // edge labels, when the dataset has them
	codes    []int32   // per node, filled by degreeCodes
	nodeOff  []int64
}

func (c *collected) add(g *shard.Graph) {
	if len(c.nodeOff) == 0 {
		c.nodeOff = []int64{0}
	}
	c.numNodes = append(c.numNodes, g.NumNodes)
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

func (c *collected) graph(i int, label int32) shard.Graph {
	g := shard.Graph{
		ID: int64(i), Label: label, NumNodes: c.numNodes[i],
		Edges: c.edges[i],
		Codes: c.codes[c.nodeOff[i]:c.nodeOff[i+1]],
	}
	if len(c.labels) > 0 {
		g.EdgeLabels = c.labels[i]
	}
	return g
}

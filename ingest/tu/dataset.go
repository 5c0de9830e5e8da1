package tu

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/internal/text"
	"github.com/augloader/augloader/shard"
)

// Feature modes (ingest's), for callers of Load.
const (
	FeaturesAuto       = ingest.FeaturesAuto // labels if the dataset has node labels, else degree
	FeaturesLabels     = ingest.FeaturesLabels
	FeaturesAttributes = ingest.FeaturesAttributes
	FeaturesDegree     = ingest.FeaturesDegree
)

// Dataset is what Load reads: everything but the edges, O(nodes) memory.
// It is an ingest.Dataset.
type Dataset struct {
	ingest.Table
	src       *Source
	nodeGraph []int32 // graph of each global node
	limits    ingest.Limits
}

var _ ingest.Dataset = (*Dataset)(nil)

// Sources implements ingest.Dataset.
func (d *Dataset) Sources() []ingest.SourceHash { return d.src.Files.Hashes() }

// Close implements ingest.Dataset: nothing of its own to release (the
// files are the opener's).
func (d *Dataset) Close() error { return nil }

// Load reads the indicator, graph labels and the chosen node features.
func Load(src *Source, mode ingest.FeatureMode) (*Dataset, error) {
	return LoadLimited(src, mode, ingest.DefaultLimits)
}

// LoadLimited is Load holding the dataset to lim (ingest.Limits).
func LoadLimited(src *Source, mode ingest.FeatureMode, lim ingest.Limits) (*Dataset, error) {
	d := &Dataset{Table: ingest.Table{Name: src.Name}, src: src, limits: lim.WithDefaults()}
	if err := d.readIndicator(); err != nil {
		return nil, err
	}
	if err := d.readGraphLabels(); err != nil {
		return nil, err
	}
	if mode == FeaturesAuto {
		mode = FeaturesDegree
		if src.Has(SuffixNodeLabels) {
			mode = FeaturesLabels
		}
	}
	var err error
	switch mode {
	case FeaturesLabels:
		err = d.readNodeLabels()
	case FeaturesAttributes:
		err = d.readAttributes()
	case FeaturesDegree:
		d.FeatureKind = shard.FeatureDegree
	default:
		err = fmt.Errorf("tu: unknown features %q", mode)
	}
	if err != nil {
		return nil, err
	}
	if src.Has(SuffixEdgeLabels) {
		if err := d.scanEdgeLabels(); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (d *Dataset) readIndicator() error {
	file := d.src.FileName(SuffixGraphIndicator)
	rc, err := d.src.Open(SuffixGraphIndicator)
	if err != nil {
		return err
	}
	defer rc.Close()
	l := text.NewReader(rc, name, file)
	d.GraphStart = []int64{0}
	var prev int64
	for {
		g, err := l.NextInt()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		switch {
		case prev == 0 && g != 1:
			return formatErr(file, l.Line, 1, "first graph id is %d, want 1", g)
		case g == prev:
		case g == prev+1:
			if g > 1 {
				d.GraphStart = append(d.GraphStart, int64(len(d.nodeGraph)))
			}
			prev = g
		case g < prev:
			return formatErr(file, l.Line, 1, "graph id %d after %d: the indicator must be sorted", g, prev)
		default:
			return formatErr(file, l.Line, 1, "graph id %d after %d: graphs %d..%d have no nodes", g, prev, prev+1, g-1)
		}
		if len(d.nodeGraph) >= 1<<31-1 {
			return formatErr(file, l.Line, 0, "more than 2^31-1 nodes")
		}
		d.nodeGraph = append(d.nodeGraph, int32(g-1))
	}
	if len(d.nodeGraph) == 0 {
		return formatErr(file, 0, 0, "empty dataset: no nodes")
	}
	d.NumNodes = int64(len(d.nodeGraph))
	d.GraphStart = append(d.GraphStart, d.NumNodes)
	d.NumGraphs = len(d.GraphStart) - 1
	for g := 0; g < d.NumGraphs; g++ {
		if d.GraphStart[g+1]-d.GraphStart[g] > shard.MaxNodesPerGraph {
			return formatErr(file, 0, 0, "graph %d has more than 2^31-1 nodes", g+1)
		}
		if err := d.limits.CheckNodes(name, file, d.GraphStart[g+1], 1, int64(g+1), d.GraphStart[g+1]-d.GraphStart[g]); err != nil {
			return err
		}
	}
	return nil
}

func (d *Dataset) readGraphLabels() error {
	file := d.src.FileName(SuffixGraphLabels)
	rc, err := d.src.Open(SuffixGraphLabels)
	if err != nil {
		return err
	}
	defer rc.Close()
	raw, err := text.ReadInts(rc, name, file, d.NumGraphs)
	if err != nil {
		return err
	}
	if len(raw) != d.NumGraphs {
		return formatErr(file, 0, 0, "%d labels for %d graphs (from %s)", len(raw), d.NumGraphs, d.src.FileName(SuffixGraphIndicator))
	}
	d.SetGraphLabels(raw)
	return nil
}

func (d *Dataset) readNodeLabels() error {
	file := d.src.FileName(SuffixNodeLabels)
	rc, err := d.src.Open(SuffixNodeLabels)
	if err != nil {
		if !d.src.Has(SuffixNodeLabels) {
			return formatErr(file, 0, 0, "missing: --features labels needs node labels")
		}
		return err
	}
	defer rc.Close()
	raw, err := text.ReadInts(rc, name, file, int(d.NumNodes))
	if err != nil {
		return err
	}
	if int64(len(raw)) != d.NumNodes {
		return formatErr(file, 0, 0, "%d node labels for %d nodes (from %s)", len(raw), d.NumNodes, d.src.FileName(SuffixGraphIndicator))
	}
	return d.SetNodeLabels(name, file, raw)
}

func (d *Dataset) readAttributes() error {
	file := d.src.FileName(SuffixNodeAttributes)
	if !d.src.Has(SuffixNodeAttributes) {
		return formatErr(file, 0, 0, "missing: --features attributes needs node attributes")
	}
	rc, err := d.src.Open(SuffixNodeAttributes)
	if err != nil {
		return err
	}
	defer rc.Close()
	l := text.NewReader(rc, name, file)
	dim := 0
	for {
		b, err := l.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		fields := strings.Split(string(b), ",")
		if err := d.limits.CheckColumns(name, file, l.Line, int64(len(fields))); err != nil {
			return err
		}
		if dim == 0 {
			dim = len(fields)
			d.X = make([]float32, 0, int(d.NumNodes)*dim)
		} else if len(fields) != dim {
			return formatErr(file, l.Line, 0, "%d values, the first line has %d", len(fields), dim)
		}
		for j, f := range fields {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 32)
			if err != nil {
				return formatErr(file, l.Line, j+1, "%q is not a number", strings.TrimSpace(f))
			}
			d.X = append(d.X, float32(v))
		}
		if int64(len(d.X)/dim) > d.NumNodes {
			return formatErr(file, l.Line, 0, "more rows than the %d nodes", d.NumNodes)
		}
	}
	if dim == 0 || int64(len(d.X)/dim) != d.NumNodes {
		return formatErr(file, 0, 0, "%d rows for %d nodes", len(d.X)/max(dim, 1), d.NumNodes)
	}
	d.FeatureKind, d.FeatureDim = shard.FeatureAttributes, dim
	return nil
}

// scanEdgeLabels finds the edge-label range (one pass; values are re-read in
// step with DS_A.txt by Graphs).
func (d *Dataset) scanEdgeLabels() error {
	file := d.src.FileName(SuffixEdgeLabels)
	rc, err := d.src.Open(SuffixEdgeLabels)
	if err != nil {
		return err
	}
	defer rc.Close()
	l := text.NewReader(rc, name, file)
	lo, hi, n := int64(1<<62), int64(-1<<62), 0
	for {
		v, err := l.NextInt()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		lo, hi, n = min(lo, v), max(hi, v), n+1
	}
	if n == 0 {
		return nil
	}
	if hi-lo >= 1<<24 {
		return formatErr(file, 0, 0, "edge labels span %d..%d: too wide", lo, hi)
	}
	d.HasEdgeLabels, d.EdgeLabelMin, d.EdgeLabelDim = true, lo, int(hi-lo+1)
	return nil
}

// Source returns the source the dataset was loaded from.
func (d *Dataset) Source() *Source { return d.src }

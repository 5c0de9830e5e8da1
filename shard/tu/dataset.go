package tu

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/augloader/augloader/shard"
)

// FeatureMode chooses the node features (the --features flag).
type FeatureMode string

// Feature modes.
const (
	FeaturesAuto       FeatureMode = "auto" // labels if the dataset has node labels, else degree
	FeaturesLabels     FeatureMode = "labels"
	FeaturesAttributes FeatureMode = "attributes"
	FeaturesDegree     FeatureMode = "degree"
)

// ParseFeatureMode accepts auto, labels, attributes or degree.
func ParseFeatureMode(s string) (FeatureMode, error) {
	switch m := FeatureMode(s); m {
	case FeaturesAuto, FeaturesLabels, FeaturesAttributes, FeaturesDegree:
		return m, nil
	}
	return "", fmt.Errorf("tu: unknown features %q (want auto, labels, attributes or degree)", s)
}

// Dataset is what Load reads: everything but the edges, O(nodes) memory.
type Dataset struct {
	Name      string
	NumGraphs int
	NumNodes  int64
	// GraphStart[g] is the first global (0-based) node of graph g; len G+1.
	GraphStart []int64
	// Labels[g] is graph g's class, 0..Classes-1; LabelMap[c] its raw value.
	Labels   []int32
	LabelMap []string

	FeatureKind shard.FeatureKind
	FeatureDim  int
	LabelMin    int64     // raw node label of code 0 (FeatureLabels)
	Codes       []int32   // per global node (FeatureLabels); nil for degree
	X           []float32 // NumNodes*FeatureDim (FeatureAttributes)

	HasEdgeLabels bool
	EdgeLabelMin  int64
	EdgeLabelDim  int

	src       *Source
	nodeGraph []int32 // graph of each global node
}

// Load reads the indicator, graph labels and the chosen node features (a
// GIN source: its graph sizes, labels and node tags).
func Load(src *Source, mode FeatureMode) (*Dataset, error) {
	d := &Dataset{Name: src.Name, src: src}
	if src.Layout == LayoutGIN {
		return d, d.loadGIN(mode)
	}
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
	l := newLineReader(rc, file)
	d.GraphStart = []int64{0}
	var prev int64
	for {
		g, err := l.nextInt()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		switch {
		case prev == 0 && g != 1:
			return formatErr(file, l.line, 1, "first graph id is %d, want 1", g)
		case g == prev:
		case g == prev+1:
			if g > 1 {
				d.GraphStart = append(d.GraphStart, int64(len(d.nodeGraph)))
			}
			prev = g
		case g < prev:
			return formatErr(file, l.line, 1, "graph id %d after %d: the indicator must be sorted", g, prev)
		default:
			return formatErr(file, l.line, 1, "graph id %d after %d: graphs %d..%d have no nodes", g, prev, prev+1, g-1)
		}
		if len(d.nodeGraph) >= 1<<31-1 {
			return formatErr(file, l.line, 0, "more than 2^31-1 nodes")
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
	raw, err := readInts(rc, file, d.NumGraphs)
	if err != nil {
		return err
	}
	if len(raw) != d.NumGraphs {
		return formatErr(file, 0, 0, "%d labels for %d graphs (from %s)", len(raw), d.NumGraphs, d.src.FileName(SuffixGraphIndicator))
	}
	d.setGraphLabels(raw)
	return nil
}

// setGraphLabels remaps raw graph labels to classes 0..C-1 in sorted order
// of the raw values (PyG's TUDataset convention).
func (d *Dataset) setGraphLabels(raw []int64) {
	distinct := slices.Clone(raw)
	slices.Sort(distinct)
	distinct = slices.Compact(distinct)
	d.LabelMap = make([]string, len(distinct))
	for i, v := range distinct {
		d.LabelMap[i] = strconv.FormatInt(v, 10)
	}
	d.Labels = make([]int32, len(raw))
	for i, v := range raw {
		c, _ := slices.BinarySearch(distinct, v)
		d.Labels[i] = int32(c)
	}
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
	raw, err := readInts(rc, file, int(d.NumNodes))
	if err != nil {
		return err
	}
	if int64(len(raw)) != d.NumNodes {
		return formatErr(file, 0, 0, "%d node labels for %d nodes (from %s)", len(raw), d.NumNodes, d.src.FileName(SuffixGraphIndicator))
	}
	return d.setNodeLabels(file, raw)
}

// setNodeLabels makes each node's raw label its one-hot code (raw − min,
// PyG's convention).
func (d *Dataset) setNodeLabels(file string, raw []int64) error {
	lo, hi := slices.Min(raw), slices.Max(raw)
	if hi-lo >= 1<<24 {
		return formatErr(file, 0, 0, "node labels span %d..%d: too wide for a one-hot feature", lo, hi)
	}
	d.FeatureKind, d.FeatureDim, d.LabelMin = shard.FeatureLabels, int(hi-lo+1), lo
	d.Codes = make([]int32, len(raw))
	for i, v := range raw {
		d.Codes[i] = int32(v - lo)
	}
	return nil
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
	l := newLineReader(rc, file)
	dim := 0
	for {
		b, err := l.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		fields := strings.Split(string(b), ",")
		if dim == 0 {
			dim = len(fields)
			d.X = make([]float32, 0, int(d.NumNodes)*dim)
		} else if len(fields) != dim {
			return formatErr(file, l.line, 0, "%d values, the first line has %d", len(fields), dim)
		}
		for j, f := range fields {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 32)
			if err != nil {
				return formatErr(file, l.line, j+1, "%q is not a number", strings.TrimSpace(f))
			}
			d.X = append(d.X, float32(v))
		}
		if int64(len(d.X)/dim) > d.NumNodes {
			return formatErr(file, l.line, 0, "more rows than the %d nodes", d.NumNodes)
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
	l := newLineReader(rc, file)
	lo, hi, n := int64(1<<62), int64(-1<<62), 0
	for {
		v, err := l.nextInt()
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

// GraphCodes returns the feature codes of graph g (FeatureLabels), a slice
// of the dataset's array.
func (d *Dataset) GraphCodes(g int) []int32 {
	if d.Codes == nil {
		return nil
	}
	return d.Codes[d.GraphStart[g]:d.GraphStart[g+1]]
}

// GraphX returns the attribute rows of graph g (FeatureAttributes).
func (d *Dataset) GraphX(g int) []float32 {
	if d.X == nil {
		return nil
	}
	return d.X[d.GraphStart[g]*int64(d.FeatureDim) : d.GraphStart[g+1]*int64(d.FeatureDim)]
}

// Source returns the source the dataset was loaded from.
func (d *Dataset) Source() *Source { return d.src }

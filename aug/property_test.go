package aug_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/shard"
)

var (
	datasetsMu sync.Mutex
	datasets   = map[string]*dataset{}
)

type dataset struct {
	graphs  []aug.Graph
	classes int32
}

// loadDataset converts a real dataset from ../shared/datasets (once per test
// binary) and returns its graphs as aug.Graphs.
func loadDataset(t testing.TB, name, rel string) *dataset {
	t.Helper()
	datasetsMu.Lock()
	defer datasetsMu.Unlock()
	if d, ok := datasets[name]; ok {
		return d
	}
	in := testutil.Shared(t, rel)
	if filepath.Ext(in) == ".xz" {
		in = filepath.Join(testutil.UnpackTarXZ(t, in), name)
	}
	dir, err := os.MkdirTemp("", "aug-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "s")
	if _, err := convert.Run(context.Background(), convert.Options{Input: in, Out: out}); err != nil {
		t.Fatal(err)
	}
	r, err := shard.Open(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := r.Manifest()
	d := &dataset{classes: int32(m.Classes), graphs: make([]aug.Graph, r.NumGraphs())}
	for id := range d.graphs {
		sg, _ := r.Graph(int64(id))
		g := &d.graphs[id]
		g.ID, g.N, g.Label, g.Q = sg.ID, sg.NumNodes, sg.Label, 1
		g.Edges = append([]int32(nil), sg.Edges...)
		g.SetCodes(sg.Codes, int32(m.Features.Dim))
	}
	datasets[name] = d
	return d
}

// components counts connected components.
func components(g *aug.Graph) int { return testutil.Components(g.N, g.Edges) }

// uniformPartners draws the partner uniformly from the dataset minus the target.
type uniformPartners struct{ graphs []aug.Graph }

func (u uniformPartners) Partner(_ context.Context, target int64, r aug.Rand, into *aug.Graph) error {
	if len(u.graphs) < 2 {
		return fmt.Errorf("need two graphs")
	}
	i := int64(r.IntN(len(u.graphs) - 1))
	if i >= target {
		i++
	}
	into.CopyFrom(&u.graphs[i])
	return nil
}

// meanSE accumulates a mean and its standard error.
type meanSE struct {
	n         int
	sum, sum2 float64
}

func (a *meanSE) add(x float64) { a.n++; a.sum += x; a.sum2 += x * x }
func (a *meanSE) mean() float64 { return a.sum / float64(a.n) }
func (a *meanSE) se() float64 {
	m := a.mean()
	v := (a.sum2/float64(a.n) - m*m) * float64(a.n) / float64(a.n-1)
	return math.Sqrt(max(v, 0) / float64(a.n))
}

var propertyDatasets = []struct {
	name, path string
	heavy      bool
}{
	{"MUTAG", "tu/MUTAG", false},
	{"PTC_MR", "tu/PTC_MR", false},
	{"PROTEINS", "tu/PROTEINS", false},
	{"ENZYMES", "tu/ENZYMES", false},
	{"NCI1", "tu/NCI1", false},
	{"NCI109", "tu/NCI109", false},
	{"IMDB-BINARY", "tu/IMDB-BINARY", false},
	{"IMDB-MULTI", "tu/IMDB-MULTI", false},
	{"AIDS", "tu/AIDS", false},
	{"DD", "tu/DD/DD.zip", true},
	{"REDDIT-BINARY", "tu/REDDIT-BINARY/REDDIT-BINARY.zip", true},
	{"COLLAB", "tu/COLLAB/COLLAB_tu.tar.xz", true},
}

// TestProperties runs NodeSam, NodeSamBase and SubMix on every graph of every
// real dataset, several thousand draws per small dataset, checking the
// invariants, node count and component count of every draw, and reporting
// the mean change of |E| with its standard error.
func TestProperties(t *testing.T) {
	testutil.NoRace(t)
	const seed = 20260422
	t.Logf("seed %d", seed)
	for _, ds := range propertyDatasets {
		t.Run(ds.name, func(t *testing.T) {
			if ds.heavy && (testutil.RaceEnabled || testing.Short()) {
				t.Skip("large dataset: skipped under -race or -short (make test runs it without)")
			}
			d := loadDataset(t, ds.name, ds.path)
			draws := max(1, 5000/len(d.graphs))
			if ds.heavy {
				draws = 1
			}
			partners := uniformPartners{d.graphs}
			ops := []aug.Op{aug.NodeSam{}, aug.NodeSamBase{}, aug.SubMix{P: 0.4, Partners: partners}}
			stats := make([]meanSE, len(ops))
			relStats := make([]meanSE, len(ops))
			var s aug.Scratch
			var out aug.Graph
			for gi := range d.graphs {
				in := &d.graphs[gi]
				comps := components(in)
				for k := range draws {
					for oi, op := range ops {
						r := s.Rand(seed, uint64(k), in.ID, aug.OpID(op))
						if err := op.Apply(in, &out, r, &s); err != nil {
							t.Fatal(err)
						}
						if err := aug.Check(&out, d.classes); err != nil {
							t.Fatalf("%s: %v", op.Spec().Name, err)
						}
						if out.N != in.N {
							t.Fatalf("%s graph %d: %d nodes, input %d", op.Spec().Name, in.ID, out.N, in.N)
						}
						if c := components(&out); c != comps {
							t.Fatalf("%s graph %d: %d components, input %d", op.Spec().Name, in.ID, c, comps)
						}
						dE := float64(out.NumEdges() - in.NumEdges())
						stats[oi].add(dE)
						if in.NumEdges() > 0 {
							relStats[oi].add(dE / float64(in.NumEdges()))
						}
						if _, ok := op.(aug.SubMix); ok {
							checkSoftLabel(t, &out, d.classes, in.NumEdges())
						}
					}
				}
			}
			for oi, op := range ops {
				t.Logf("%-13s %-12s draws %6d  mean ΔE %+8.4f ± %.4f (SE)  mean ΔE/|E| %+.5f ± %.5f",
					ds.name, op.Spec().Name, stats[oi].n, stats[oi].mean(), stats[oi].se(), relStats[oi].mean(), relStats[oi].se())
			}
			var totalE int
			for gi := range d.graphs {
				totalE += d.graphs[gi].NumEdges()
			}
			checkUnbiased(t, ds.name, stats, relStats, float64(totalE)/float64(len(d.graphs)))
		})
	}
}

// checkSoftLabel: the soft label sums to 1 and its target-class weight is
// q = |E1|/|Ē| (recomputed from the output: E1 is what is left of G).
func checkSoftLabel(t *testing.T, out *aug.Graph, classes int32, _ int) {
	t.Helper()
	y := make([]float32, classes)
	out.SoftLabel(y)
	var sum float64
	for _, v := range y {
		sum += float64(v)
	}
	if math.Abs(sum-1) > 1e-5 {
		t.Fatalf("graph %d: soft label %v sums to %g", out.ID, y, sum)
	}
	if out.MixLabel != out.Label && math.Abs(float64(y[out.Label]-out.Q)) > 1e-6 {
		t.Fatalf("graph %d: target weight %g, q %g", out.ID, y[out.Label], out.Q)
	}
}

// checkUnbiased asserts the paper's unbiasedness lemmas on absolute edge
// counts. SubMix (Lemma 5, G and G′ uniform): |mean ΔE| within 4 standard
// errors. NodeSam (Lemma 1): |mean ΔE| within 4 standard errors or within 2%
// of the mean |E|: h_i is the paper's estimate of the edges a merge removes
// and the adjustment probability is capped at 1, so clique-heavy graphs
// (IMDB, COLLAB) keep a small negative bias; and NodeSam's drift is at most a
// quarter of NodeSamBase's wherever the latter drifts significantly.
func checkUnbiased(t *testing.T, name string, abs, _ []meanSE, meanE float64) {
	t.Helper()
	ns, base, sm := abs[0], abs[1], abs[2]
	if m := math.Abs(ns.mean()); m > 4*ns.se() && m > 0.02*meanE {
		t.Errorf("%s: NodeSam mean ΔE %+.4f ± %.4f is not close to zero (mean |E| %.1f)", name, ns.mean(), ns.se(), meanE)
	}
	if base.mean() < -4*base.se() && math.Abs(ns.mean()) > 4*ns.se() && math.Abs(ns.mean()) > math.Abs(base.mean())/4 {
		t.Errorf("%s: NodeSam |ΔE| %.4f is not well below NodeSamBase's %.4f", name, math.Abs(ns.mean()), math.Abs(base.mean()))
	}
	if base.mean() > 4*base.se() {
		t.Errorf("%s: NodeSamBase mean ΔE %+.4f ± %.4f is positive", name, base.mean(), base.se())
	}
	if m := math.Abs(sm.mean()); m > 4*sm.se() {
		t.Errorf("%s: SubMix mean ΔE %+.4f ± %.4f is not within 4 standard errors of zero", name, sm.mean(), sm.se())
	}
}

// TestNodeSamBaseDrift: on triangle-rich data NodeSamBase loses edges
// (merges inside triangles remove two edges) where NodeSam does not.
func TestNodeSamBaseDrift(t *testing.T) {
	for _, name := range []string{"PROTEINS", "ENZYMES", "IMDB-BINARY"} {
		t.Run(name, func(t *testing.T) {
			var rel string
			for _, d := range propertyDatasets {
				if d.name == name {
					rel = d.path
				}
			}
			d := loadDataset(t, name, rel)
			var s aug.Scratch
			var out aug.Graph
			var ns, base meanSE
			for k := range 8 {
				for gi := range d.graphs {
					in := &d.graphs[gi]
					for oi, op := range []aug.Op{aug.NodeSam{}, aug.NodeSamBase{}} {
						op.Apply(in, &out, s.Rand(7, uint64(k), in.ID, aug.OpID(op)), &s)
						dE := float64(out.NumEdges() - in.NumEdges())
						if oi == 0 {
							ns.add(dE)
						} else {
							base.add(dE)
						}
					}
				}
			}
			t.Logf("%s: NodeSam ΔE %+.4f ± %.4f, NodeSamBase ΔE %+.4f ± %.4f", name, ns.mean(), ns.se(), base.mean(), base.se())
			if base.mean() > -4*base.se() {
				t.Errorf("NodeSamBase ΔE %+.4f ± %.4f: no significant negative drift", base.mean(), base.se())
			}
			if math.Abs(ns.mean()) > math.Abs(base.mean())/2 {
				t.Errorf("NodeSam |ΔE| %.4f is not well below NodeSamBase's %.4f", math.Abs(ns.mean()), math.Abs(base.mean()))
			}
		})
	}
}

// TestBoundsReal holds every op's outputs to aug.Bound on every graph of
// every real dataset (what the loader's node and edge budgets rely on).
func TestBoundsReal(t *testing.T) {
	testutil.NoRace(t)
	for _, ds := range propertyDatasets {
		t.Run(ds.name, func(t *testing.T) {
			if ds.heavy && (testutil.RaceEnabled || testing.Short()) {
				t.Skip("large dataset: skipped under -race or -short (make test runs it without)")
			}
			d := loadDataset(t, ds.name, ds.path)
			maxEdges := 0
			for gi := range d.graphs {
				maxEdges = max(maxEdges, d.graphs[gi].NumEdges())
			}
			var s aug.Scratch
			var out aug.Graph
			for _, op := range allOps(uniformPartners{d.graphs}) {
				for gi := range d.graphs {
					in := &d.graphs[gi]
					if err := op.Apply(in, &out, s.Rand(3, 0, in.ID, aug.OpID(op)), &s); err != nil {
						t.Fatal(err)
					}
					checkBound(t, op, in, &out, maxEdges)
				}
			}
		})
	}
}

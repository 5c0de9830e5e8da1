package epoch_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/augloader/augloader/epoch"
)

func ids(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}

func TestPermutation(t *testing.T) {
	a := epoch.Permutation(7, 3, ids(100))
	b := epoch.Permutation(7, 3, ids(100))
	if !slices.Equal(a, b) {
		t.Fatal("same (seed, epoch) gave different permutations")
	}
	if slices.Equal(a, epoch.Permutation(7, 4, ids(100))) || slices.Equal(a, epoch.Permutation(8, 3, ids(100))) {
		t.Fatal("another epoch or seed gave the same permutation")
	}
	s := slices.Clone(a)
	slices.Sort(s)
	if !slices.Equal(s, ids(100)) {
		t.Fatal("not a permutation")
	}
}

func TestRankSlices(t *testing.T) {
	for _, n := range []int{0, 1, 7, 10, 101} {
		perm := epoch.Permutation(1, 0, ids(n))
		for _, w := range []int{1, 2, 3, 4} {
			for _, rem := range []epoch.Remainder{epoch.Pad, epoch.Drop} {
				var all []int64
				counts := map[int]int{}
				for r := range w {
					items, err := epoch.RankSlice(perm, r, w, rem)
					if err != nil {
						t.Fatal(err)
					}
					counts[len(items)]++
					for _, it := range items {
						if it.Graph != perm[it.Position%max(n, 1)] || it.Padded != (it.Position >= n) {
							t.Fatalf("item %+v inconsistent", it)
						}
						if !it.Padded {
							all = append(all, it.Graph)
						}
					}
				}
				if len(counts) > 1 {
					t.Errorf("n=%d w=%d %s: ranks of different sizes %v", n, w, rem, counts)
				}
				slices.Sort(all)
				want := ids(n)
				if rem == epoch.Drop {
					want = slices.Sorted(slices.Values(perm[:n-n%w]))
				}
				if !slices.Equal(all, want) {
					t.Errorf("n=%d w=%d %s: union of ranks %v, want %v", n, w, rem, all, want)
				}
			}
		}
	}
	if _, err := epoch.RankSlice(ids(3), 3, 3, epoch.Pad); !errors.Is(err, epoch.ErrRange) {
		t.Errorf("rank 3 of 3: %v", err)
	}
}

// TestResumeSlice: an epoch resumed at other world sizes, after ranks that
// each stopped at their own count, delivers every graph once across its
// phases (Pad), each item at its position of the permutation; resumed
// at the same world size after equal counts, a rank's items are the tail
// of its uninterrupted slice; a count past its rank's slice is refused.
func TestResumeSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 10, 101} {
		perm := epoch.Permutation(3, 1, ids(n))
		for _, worlds := range [][]int{{2, 3}, {2, 1}, {3, 2, 4}, {1, 4}, {4, 4}, {5, 2, 1}} {
			var phases []epoch.Phase
			var got []int64
			for k, w := range worlds {
				last := k == len(worlds)-1
				ph := epoch.Phase{World: w, Graphs: make([]int, w)}
				for r := range w {
					items, err := epoch.ResumeSlice(perm, phases, r, w, epoch.Pad)
					if err != nil {
						t.Fatal(err)
					}
					take := len(items)
					if !last {
						take = rng.IntN(len(items) + 1)
					}
					ph.Graphs[r] = take
					for _, it := range items[:take] {
						if it.Graph != perm[it.Position] {
							t.Fatalf("n=%d %v: item %+v not at its position", n, worlds, it)
						}
						if !it.Padded {
							got = append(got, it.Graph)
						}
					}
				}
				phases = append(phases, ph)
			}
			slices.Sort(got)
			if !slices.Equal(got, ids(n)) {
				t.Errorf("n=%d worlds %v (counts %v): delivered %v, want each of %d graphs once", n, worlds, phases, got, n)
			}
		}
		// Same world, equal counts: the tail of each rank's slice.
		for _, w := range []int{1, 2, 3} {
			full := make([][]epoch.Item, w)
			c := 0
			for r := range w {
				full[r], _ = epoch.RankSlice(perm, r, w, epoch.Pad)
				c = len(full[r]) / 2
			}
			ph := epoch.Phase{World: w, Graphs: slices.Repeat([]int{c}, w)}
			for r := range w {
				items, err := epoch.ResumeSlice(perm, []epoch.Phase{ph}, r, w, epoch.Pad)
				if err != nil {
					t.Fatal(err)
				}
				if n%w == 0 && !slices.Equal(items, full[r][c:]) {
					t.Errorf("n=%d w=%d rank %d: resumed %v, want %v", n, w, r, items, full[r][c:])
				}
			}
		}
	}
	over := []epoch.Phase{{World: 2, Graphs: []int{4, 6}}}
	if _, err := epoch.ResumeSlice(epoch.Permutation(1, 0, ids(10)), over, 0, 1, epoch.Pad); !errors.Is(err, epoch.ErrRange) {
		t.Errorf("rank 1 of 2 received 6 of 5 graphs: %v", err)
	}
}

type sizes map[int64][2]int

func (s sizes) size(i int) (int, int) { return s[int64(i)][0], s[int64(i)][1] }

func TestBatches(t *testing.T) {
	items := make([]epoch.Item, 10)
	sz := sizes{}
	for i := range items {
		items[i] = epoch.Item{Graph: int64(i)}
		sz[int64(i)] = [2]int{10, 20 * (i % 3)}
	}
	cases := []struct {
		name string
		b    epoch.Budget
		want []int
	}{
		{"graphs", epoch.Budget{Graphs: 4}, []int{4, 4, 2}},
		{"nodes", epoch.Budget{Graphs: 100, Nodes: 25}, []int{2, 2, 2, 2, 2}},
		{"edges", epoch.Budget{Graphs: 100, Edges: 40}, []int{2, 2, 1, 2, 1, 2}}, // edges per graph cycle 0, 20, 40
		{"one larger than budget", epoch.Budget{Graphs: 100, Nodes: 5}, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bs, err := epoch.Batches(items, c.b, sz.size)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, b := range bs {
				got = append(got, len(b))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("batch sizes %v, want %v", got, c.want)
			}
		})
	}
}

func TestScheduleGrammar(t *testing.T) {
	good := []struct {
		text  string
		epoch uint64
		want  []string
		w     []float64
	}{
		{"nodesam", 5, []string{"nodesam"}, []float64{1}},
		{"submix:p=0.4", 0, []string{"submix"}, []float64{1}},
		{"nodesam:0.5,none:0.5", 0, []string{"nodesam", "none"}, []float64{0.5, 0.5}},
		{"nodesam:3, none:1", 0, []string{"nodesam", "none"}, []float64{0.75, 0.25}},
		{"nodesam, none", 0, []string{"nodesam", "none"}, []float64{0.5, 0.5}},
		{"0..50|none; 50..|nodesam:0.7,submix:p=0.3:0.3", 49, []string{"none"}, []float64{1}},
		{"0..50|none; 50..|nodesam:0.7,submix:p=0.3:0.3", 50, []string{"nodesam", "submix"}, []float64{0.7, 0.3}},
		{"# comment\n10..20|dropedge\nnone  # default\n", 15, []string{"dropedge"}, []float64{1}},
		{"# comment\n10..20|dropedge\nnone  # default\n", 25, []string{"none"}, []float64{1}},
		// Epochs past 2^63-1 (the wire's uint64, which both clients accept)
		// are in the open last segment.
		{"0..50|none; 50..|nodesam", 1 << 63, []string{"nodesam"}, []float64{1}},
		{"nodesam", math.MaxUint64, []string{"nodesam"}, []float64{1}},
	}
	for _, c := range good {
		s, err := epoch.ParseSchedule(c.text)
		if err != nil {
			t.Fatalf("%q: %v", c.text, err)
		}
		seg, err := s.Segment(c.epoch)
		if err != nil {
			t.Fatalf("%q epoch %d: %v", c.text, c.epoch, err)
		}
		var names []string
		var ws []float64
		for _, it := range seg.Items {
			names = append(names, it.Name)
			ws = append(ws, math.Round(it.Weight*1000)/1000)
		}
		if !slices.Equal(names, c.want) || !slices.Equal(ws, c.w) {
			t.Errorf("%q epoch %d: %v %v, want %v %v", c.text, c.epoch, names, ws, c.want, c.w)
		}
	}
	bad := []struct{ text, want string }{
		{"", "empty"},
		{"nodesaam", "unknown policy"},
		{"submix:p=2", "not a number in (0, 1)"},
		{"submix:self_loops=maybe", "not true or false"},
		{"submix-base:self_loops=true", "takes"},
		{"nodesam:p=0.4", "takes no parameter"},
		{"submix:q=0.4", `submix takes no parameter "q": its parameters are p, self_loops (e.g. submix:p=…)`},
		{"nodesam:0.5,none", "give every policy"},
		{"nodesam:-1", "positive weight"},
		{"5..2|none", "end must be an epoch after"},
		{"x..|none", "not an epoch"},
		{"nodesam,,none", "empty policy"},
		{"nodesam:0.5:0.5", "one positive weight"},
	}
	for _, c := range bad {
		_, err := epoch.ParseSchedule(c.text)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.text, err, c.want)
		}
	}
	s, _ := epoch.ParseSchedule("0..10|none")
	if _, err := s.Segment(10); !errors.Is(err, epoch.ErrRange) {
		t.Errorf("epoch beyond the schedule: %v", err)
	}
}

func TestMixtureChoice(t *testing.T) {
	s, _ := epoch.ParseSchedule("nodesam:0.25,none:0.75")
	p, err := s.Resolve(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for id := range int64(20000) {
		counts[p.Choose(1, 0, id).Spec().Name]++
		if p.Choose(1, 0, id) != p.Choose(1, 0, id) {
			t.Fatal("choice not deterministic")
		}
	}
	if f := float64(counts["nodesam"]) / 20000; math.Abs(f-0.25) > 0.015 {
		t.Errorf("nodesam chosen %.3f of the time, want 0.25", f)
	}
}

func TestStratifiedKFold(t *testing.T) {
	labels := make([]int32, 103)
	for i := range labels {
		labels[i] = int32(i % 3)
		if i > 90 {
			labels[i] = 0
		}
	}
	folds, err := epoch.StratifiedKFold(labels, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	var allTest []int64
	for i, f := range folds {
		if len(f.Training)+len(f.Test) != len(labels) {
			t.Fatalf("fold %d: %d + %d ids", i, len(f.Training), len(f.Test))
		}
		allTest = append(allTest, f.Test...)
		per := map[int32]int{}
		for _, id := range f.Test {
			per[labels[id]]++
		}
		// Class 1 has 30 graphs: 3 per fold.
		if per[1] != 3 {
			t.Errorf("fold %d holds %d of class 1, want 3", i, per[1])
		}
	}
	slices.Sort(allTest)
	if !slices.Equal(allTest, ids(len(labels))) {
		t.Fatal("test sets do not partition the dataset")
	}
	again, _ := epoch.StratifiedKFold(labels, 10, 0)
	if !slices.Equal(again[3].Test, folds[3].Test) {
		t.Fatal("folds not deterministic")
	}
}

// FuzzSchedule: the grammar never panics; what parses resolves.
func FuzzSchedule(f *testing.F) {
	for _, s := range []string{"nodesam", "submix:p=0.4", "nodesam:0.5,none:0.5", "0..50|none; 50..|nodesam", "x:y:z", "1..|"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := epoch.ParseSchedule(text)
		if err != nil {
			return
		}
		for _, seg := range s.Segments {
			if seg.From < 0 {
				t.Fatal("negative epoch")
			}
			if _, err := s.Resolve(uint64(seg.From), nil); err != nil {
				t.Fatalf("parsed but does not resolve: %v", err)
			}
		}
	})
}

// Texts that give the same draws have one canonical form; texts that do
// not, different ones; and a canonical form parses back to itself.
func TestScheduleCanonical(t *testing.T) {
	same := [][]string{
		{"nodesam", "NodeSam", "nodesam:1", "0..|nodesam", " nodesam # comment"},
		{"nodesam,none", "nodesam:2,none:2", "0..|nodesam:0.5,none:0.5"},
		{"submix:p=0.4", "submix:p=0.40", "submix:p=.4:3", "submix:p=0.4:self_loops=false"},
		{"submix:p=0.4:self_loops=true", "submix:self_loops=True:p=0.4", "submix:p=.4:self_loops=t", "submix:p=0.4:self_loops=1"},
		{"0..50|none;50..|nodesam", "0..50|none\n50..|nodesam"},
	}
	seen := map[string]string{}
	for _, group := range same {
		var canon string
		for _, text := range group {
			s, err := epoch.ParseSchedule(strings.ReplaceAll(text, "\\n", "\n"))
			if err != nil {
				t.Fatalf("%q: %v", text, err)
			}
			c := s.Canonical()
			if canon == "" {
				canon = c
			} else if c != canon {
				t.Errorf("%q: canonical %q, want %q (as %q)", text, c, canon, group[0])
			}
			again, err := epoch.ParseSchedule(c)
			if err != nil || again.Canonical() != c {
				t.Errorf("%q: canonical %q does not parse back to itself: %v", text, c, err)
			}
		}
		if other, dup := seen[canon]; dup {
			t.Errorf("%q and %q share the canonical form %q", group[0], other, canon)
		}
		seen[canon] = group[0]
	}
}

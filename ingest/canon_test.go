package ingest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCanonPresorted canonicalises graphs listed in the layouts TU files use
// and in ones that break them, and wants the fast path (presorted) to give
// the general path's edges and stats exactly, and to be taken only where
// its preconditions hold.
func TestCanonPresorted(t *testing.T) {
	type layout struct {
		name string
		fast string // presorted must answer ("yes"), must not ("no"), or may ("either": chance may keep the order)
		list func(r *rand.Rand, edges [][2]int64) [][2]int64
	}
	both := func(e [][2]int64) [][2]int64 {
		var out [][2]int64
		for _, p := range e {
			out = append(out, p, [2]int64{p[1], p[0]})
		}
		return out
	}
	byFirst := func(l [][2]int64) [][2]int64 {
		slices.SortFunc(l, func(a, b [2]int64) int { return cmp2(a[0], a[1], b[0], b[1]) })
		return l
	}
	bySecond := func(l [][2]int64) [][2]int64 {
		slices.SortFunc(l, func(a, b [2]int64) int { return cmp2(a[1], a[0], b[1], b[0]) })
		return l
	}
	layouts := []layout{
		{"both directions by first", "yes", func(_ *rand.Rand, e [][2]int64) [][2]int64 { return byFirst(both(e)) }},
		{"both directions by second", "yes", func(_ *rand.Rand, e [][2]int64) [][2]int64 { return bySecond(both(e)) }},
		{"u<v only, sorted", "yes", func(_ *rand.Rand, e [][2]int64) [][2]int64 { return byFirst(e) }},
		{"v>u only, by second", "yes", func(_ *rand.Rand, e [][2]int64) [][2]int64 {
			var out [][2]int64
			for _, p := range e {
				out = append(out, [2]int64{p[1], p[0]})
			}
			return bySecond(out)
		}},
		{"one reverse missing", "yes", func(r *rand.Rand, e [][2]int64) [][2]int64 {
			l := byFirst(both(e))
			for i, p := range l {
				if p[0] > p[1] && r.IntN(3) == 0 {
					return slices.Delete(l, i, i+1)
				}
			}
			return l
		}},
		{"a forward missing", "either", func(r *rand.Rand, e [][2]int64) [][2]int64 {
			l := byFirst(both(e))
			for i, p := range l {
				if p[0] < p[1] {
					return slices.Delete(l, i, i+1) // S would lack an entry of T
				}
			}
			return l
		}},
		{"duplicate", "no", func(r *rand.Rand, e [][2]int64) [][2]int64 {
			l := byFirst(both(e))
			i := r.IntN(len(l))
			return slices.Insert(l, i, l[i])
		}},
		{"shuffled", "either", func(r *rand.Rand, e [][2]int64) [][2]int64 {
			l := both(e)
			r.Shuffle(len(l), func(i, j int) { l[i], l[j] = l[j], l[i] })
			return l
		}},
	}
	refused := map[string]int{}
	for _, lo := range layouts {
		for seed := range uint64(40) {
			t.Run(fmt.Sprintf("%s/%d", lo.name, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 3))
				n := int32(2 + r.IntN(40))
				var edges [][2]int64
				for u := range int64(n) {
					for v := u + 1; v < int64(n); v++ {
						if r.IntN(4) == 0 {
							edges = append(edges, [2]int64{u, v})
						}
					}
				}
				if len(edges) < 2 {
					edges = [][2]int64{{0, 1}, {1, int64(n)}}
					n++
				}
				listed := lo.list(r, edges)
				keys := make([]Entry, len(listed))
				for i, p := range listed {
					keys[i] = Pack(p[0], p[1])
				}
				var fast, general Canon
				var stFast, stGeneral Stats
				took := fast.presorted(n, keys, &stFast)
				if (lo.fast == "yes" && !took) || (lo.fast == "no" && took) {
					t.Fatalf("presorted answered %v, want %s", took, lo.fast)
				}
				if !took {
					refused[lo.name]++
				}
				got, _ := fast.Build(n, keys, nil, &stFast)
				if took {
					stFast = Stats{} // build ran it again
					got, _ = fast.Build(n, keys, nil, &stFast)
				}
				want, _ := general.Build(n, keys, make([]int32, len(keys)), &stGeneral) // labels: the general path
				if !slices.Equal(got, want) || stFast != stGeneral {
					t.Fatalf("fast %v %+v\ngeneral %v %+v", got, stFast, want, stGeneral)
				}
			})
		}
		if lo.fast == "either" && refused[lo.name] == 0 {
			t.Errorf("%s: the fast path never refused", lo.name)
		}
	}
}

func cmp2(a0, a1, b0, b1 int64) int {
	if a0 != b0 {
		return int(a0 - b0)
	}
	return int(a1 - b1)
}

// A graph that declares far more nodes than it lists entries is
// canonicalised by a comparison sort (no counter per node): the same
// edges, labels (each edge's first listing) and stats as the counting
// passes give for the same entries.
func TestCanonSparseSameAsCounting(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for trial := range 200 {
		active := 2 + r.IntN(30)
		var keys []Entry
		var labels []int32
		for range r.IntN(200) {
			u, v := r.Int64N(int64(active)), r.Int64N(int64(active))
			if u == v {
				continue
			}
			keys = append(keys, Pack(u, v))
			labels = append(labels, int32(r.IntN(4)))
		}
		for _, withL := range []bool{false, true} {
			var l []int32
			if withL {
				l = labels
			}
			var dense, sparse Canon
			var stD, stS Stats
			eD, lD := dense.Build(int32(active), keys, l, &stD)
			eS, lS := sparse.Build(1<<26, keys, l, &stS)
			if !slices.Equal(eD, eS) || !slices.Equal(lD, lS) || stD != stS {
				t.Fatalf("trial %d labels=%v: counting %v %v %+v, comparison %v %v %+v", trial, withL, eD, lD, stD, eS, lS, stS)
			}
		}
	}
	// And in memory proportional to the entries: a node count of 2^26
	// costs no counter per node.
	var c Canon
	var st Stats
	allocs := testing.AllocsPerRun(1, func() { c.Build(1<<26, []Entry{Pack(0, 5), Pack(5, 0)}, nil, &st) })
	if cap(c.cnt) > 0 || allocs > 8 {
		t.Fatalf("a sparse graph allocated a counter per node (cap %d, %v allocations)", cap(c.cnt), allocs)
	}
}

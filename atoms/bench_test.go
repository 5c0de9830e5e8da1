package atoms_test

import (
	"testing"

	"github.com/augloader/augloader/atoms"
	"github.com/augloader/augloader/ingest/synth"
)

// BenchmarkOC20 is the neighbour list of OC20-shaped slabs (shardconv synth
// --like oc20: 64-80 metal atoms and an adsorbate, periodic) at 6 Å, on
// one core: what conversion spends a structure on.
func BenchmarkOC20(b *testing.B) {
	type s struct {
		pos  []float64
		cell [9]float64
	}
	var set []s
	for i := range 64 {
		st := synth.OC20(1, i)
		set = append(set, s{st.Positions, st.Cell})
	}
	var bl atoms.Builder
	var l atoms.List
	var edges, atomsN int
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		x := &set[k%len(set)]
		if err := bl.Build(x.pos, &x.cell, [3]bool{true, true, true}, 6, atoms.ConventionASE, &l); err != nil {
			b.Fatal(err)
		}
		edges += l.Len()
		atomsN += len(x.pos) / 3
		k++
	}
	b.ReportMetric(float64(edges)/b.Elapsed().Seconds()/1e6, "Medges/s")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "structures/s")
	b.ReportMetric(float64(edges)/float64(atomsN), "degree")
}

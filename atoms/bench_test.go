package atoms_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/augloader/augloader/atoms"
)

func BenchmarkSlabFile(b *testing.B) {
	path := os.Getenv("AUGLOADER_SLAB_JSON")
	if path == "" {
		b.Skip("AUGLOADER_SLAB_JSON unset")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	var s struct {
		Positions []float64
		Cell      []float64
		PBC       [3]bool
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		b.Fatal(err)
	}
	var cell [9]float64
	copy(cell[:], s.Cell)
	var bl atoms.Builder
	var l atoms.List
	b.ReportAllocs()
	for b.Loop() {
		if err := bl.Build(s.Positions, &cell, s.PBC, 6, atoms.ConventionASE, &l); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(l.Len())*float64(b.N)/b.Elapsed().Seconds()/1e6, "Medges/s")
}

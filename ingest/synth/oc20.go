package synth

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/augloader/augloader/internal/iox"
)

// OC20-shaped structures: seeded fcc(111) and fcc(100) metal slabs of
// 3–5 layers with a small adsorbate above a surface, in periodic cells
// with vacuum above the slab, as the Open Catalyst 2020 set holds them
// (about 70–90 atoms); tags as fairchem reads them (0 subsurface, 1
// surface, 2 adsorbate), the subsurface fixed (move_mask F), energy and
// forces labels drawn at random (zero net force). Written as extended XYZ,
// the format ase.io.write writes, in files of StructuresPerFile structures.

// StructuresPerFile is how many structures one oc20-NNNNN.xyz holds.
const StructuresPerFile = 100_000

type metal struct {
	symbol string
	a      float64 // fcc lattice constant, Å
}

var metals = []metal{{"Cu", 3.61}, {"Ag", 4.09}, {"Au", 4.08}, {"Pt", 3.92}, {"Pd", 3.89}, {"Ni", 3.52},
	{"Al", 4.05}, {"Rh", 3.80}, {"Ir", 3.84}, {"Co", 3.54}}

type atom struct {
	symbol  string
	x, y, z float64
}

// adsorbates' atoms, the first one bonded to the surface (Å).
var adsorbates = [][]atom{
	{{"C", 0, 0, 0}, {"O", 0, 0, 1.13}},
	{{"O", 0, 0, 0}, {"H", 0, 0, 0.97}},
	{{"C", 0, 0, 0}, {"H", 1.03, 0, 0.36}, {"H", -0.51, 0.89, 0.36}, {"H", -0.51, -0.89, 0.36}},
	{{"O", 0, 0, 0}, {"H", 0.76, 0, 0.59}, {"H", -0.76, 0, 0.59}},
	{{"N", 0, 0, 0}, {"H", 0.8, 0, 0.6}, {"H", -0.8, 0, 0.6}},
	{{"C", 0, 0, 0}, {"O", 1.1, 0, 0.6}, {"O", -1.1, 0, 0.6}, {"H", -1.5, 0, 1.4}},
	{{"C", 0, 0, 0}, {"H", 1.0, 0, 0.5}, {"O", -0.8, 0, 0.8}},
	{{"N", 0, 0, 0}, {"N", 0, 0, 1.1}},
	{{"O", 0, 0, 0}}, {{"H", 0, 0, 0}},
}

// OC20Stats count what WriteOC20 wrote.
type OC20Stats struct {
	Structures, Atoms int64
	Files             int
}

// WriteOC20 writes n OC20-shaped structures (seed: the same bytes for the
// same seed) into the folder out as oc20-00000.xyz, oc20-00001.xyz, …,
// written under a temporary name and renamed when complete; progress,
// when set, is told each file's structures done.
func WriteOC20(ctx context.Context, n int, seed uint64, out string, force bool, progress func(done int)) (OC20Stats, error) {
	var st OC20Stats
	_, err := writeFolder(out, force, atLeastOne(n), func(dir string) (Stats, error) {
		for first := 0; first < n; first += StructuresPerFile {
			count := min(StructuresPerFile, n-first)
			name := filepath.Join(dir, fmt.Sprintf("oc20-%05d.xyz", first/StructuresPerFile))
			atoms, err := writeOC20File(ctx, name, first, count, seed)
			if err != nil {
				return Stats{}, err
			}
			st.Structures += int64(count)
			st.Atoms += atoms
			st.Files++
			if progress != nil {
				progress(first + count)
			}
		}
		return Stats{Graphs: st.Structures, Nodes: st.Atoms}, nil
	})
	return st, err
}

func writeOC20File(ctx context.Context, path string, first, count int, seed uint64) (int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, fmt.Errorf("synth: %w", err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	var atoms int64
	var buf []byte
	write := func() error {
		for i := first; i < first+count; i++ {
			if (i-first)&1023 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			var na int
			buf, na = appendOC20(buf[:0], seed, i)
			atoms += int64(na)
			if _, err := bw.Write(buf); err != nil {
				return err
			}
		}
		return nil
	}
	if err := iox.SyncClose(f, write, bw.Flush); err != nil {
		return 0, fmt.Errorf("synth: %s: %w", path, err)
	}
	return atoms, nil
}

// OC20Structure is one generated structure.
type OC20Structure struct {
	Symbols   []string
	Positions []float64 // 3 per atom, Å
	Cell      [9]float64
	Tags      []int
	Forces    []float64 // 3 per atom, eV/Å
	Energy    float64   // eV
}

// OC20 is structure i of seed (what WriteOC20 writes as its i-th frame).
func OC20(seed uint64, i int) OC20Structure {
	r := rand.New(rand.NewPCG(seed^0x6f63323073796e74, uint64(i)))
	m := metals[r.IntN(len(metals))]
	d := m.a / math.Sqrt2 // nearest-neighbour distance
	face111 := r.IntN(3) != 0
	// 64-80 metal atoms: OC20's slabs with their adsorbate are about 70-90.
	shape := [][3]int{{4, 4, 4}, {4, 4, 5}, {3, 4, 6}, {3, 5, 5}}[r.IntN(4)]
	nx, ny, layers := shape[0], shape[1], shape[2]
	var a1, a2 [3]float64
	var spacing float64
	if face111 {
		a1, a2 = [3]float64{float64(nx) * d, 0, 0}, [3]float64{float64(ny) * d / 2, float64(ny) * d * math.Sqrt(3) / 2, 0}
		spacing = m.a / math.Sqrt(3)
	} else {
		a1, a2 = [3]float64{float64(nx) * d, 0, 0}, [3]float64{0, float64(ny) * d, 0}
		spacing = m.a / 2
	}
	thick := float64(layers-1) * spacing
	var st OC20Structure
	st.Cell = [9]float64{a1[0], a1[1], a1[2], a2[0], a2[1], a2[2], 0, 0, thick + 16} // vacuum above the slab
	add := func(sym string, x, y, z float64, tag int) {
		st.Symbols = append(st.Symbols, sym)
		st.Positions = append(st.Positions, x, y, z)
		st.Tags = append(st.Tags, tag)
	}
	for l := range layers {
		var ox, oy float64
		if face111 {
			switch l % 3 {
			case 1:
				ox, oy = d/2, d*math.Sqrt(3)/6
			case 2:
				ox, oy = d, d*math.Sqrt(3)/3
			}
		} else if l%2 == 1 {
			ox, oy = d/2, d/2
		}
		tag := 0
		if l >= layers-2 {
			tag = 1
		}
		for i := range nx {
			for j := range ny {
				u, v := float64(i)/float64(nx), float64(j)/float64(ny)
				add(m.symbol, u*a1[0]+v*a2[0]+ox, u*a1[1]+v*a2[1]+oy, float64(l)*spacing, tag)
			}
		}
	}
	// The adsorbate above a random point of the surface, turned about z.
	ads := adsorbates[r.IntN(len(adsorbates))]
	u, v := r.Float64(), r.Float64()
	px, py := u*a1[0]+v*a2[0], u*a1[1]+v*a2[1]
	th := r.Float64() * 2 * math.Pi
	cs, sn := math.Cos(th), math.Sin(th)
	for _, at := range ads {
		add(at.symbol, px+cs*at.x-sn*at.y, py+sn*at.x+cs*at.y, thick+1.8+at.z, 2)
	}
	n := len(st.Symbols)
	for k := range st.Positions {
		st.Positions[k] += 0.03 * r.NormFloat64()
	}
	st.Forces = make([]float64, 3*n)
	var mean [3]float64
	for k := range st.Forces {
		st.Forces[k] = 0.1 * r.NormFloat64()
		mean[k%3] += st.Forces[k] / float64(n)
	}
	for k := range st.Forces {
		st.Forces[k] -= mean[k%3]
	}
	st.Energy = -3.5*float64(n) + r.NormFloat64()
	return st
}

// appendOC20 appends structure i of seed as an extended XYZ frame.
func appendOC20(b []byte, seed uint64, i int) ([]byte, int) {
	st := OC20(seed, i)
	n := len(st.Symbols)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, "\nLattice=\""...)
	for k, x := range st.Cell {
		if k > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendFloat(b, x, 'g', -1, 64)
	}
	b = append(b, "\" Properties=species:S:1:pos:R:3:tags:I:1:move_mask:L:1:forces:R:3 energy="...)
	b = strconv.AppendFloat(b, st.Energy, 'g', -1, 64)
	b = append(b, " pbc=\"T T T\"\n"...)
	for k := range n {
		b = append(b, st.Symbols[k]...)
		for c := range 3 {
			b = append(b, ' ')
			b = strconv.AppendFloat(b, st.Positions[3*k+c], 'f', 8, 64)
		}
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(st.Tags[k]), 10)
		if st.Tags[k] == 0 {
			b = append(b, " F"...)
		} else {
			b = append(b, " T"...)
		}
		for c := range 3 {
			b = append(b, ' ')
			b = strconv.AppendFloat(b, st.Forces[3*k+c], 'f', 8, 64)
		}
		b = append(b, '\n')
	}
	return b, n
}

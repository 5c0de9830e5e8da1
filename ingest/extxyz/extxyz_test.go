package extxyz_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/extxyz"
	"github.com/augloader/augloader/shard"
)

func write(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.xyz")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readAll(t *testing.T, path string, keys ingest.LabelKeys) ([]shard.Property, []ingest.Structure, error) {
	t.Helper()
	set, err := extxyz.Open(context.Background(), path, keys)
	if err != nil {
		return nil, nil, err
	}
	var out []ingest.Structure
	err = set.Structures(context.Background(), func(s *ingest.Structure) error {
		c := *s
		c.Numbers, c.Positions = slices.Clone(s.Numbers), slices.Clone(s.Positions)
		c.Props = make([][]float64, len(s.Props))
		for k, p := range s.Props {
			c.Props[k] = slices.Clone(p)
		}
		out = append(out, c)
		return nil
	})
	return set.Properties(), out, err
}

const twoFrames = `2
Lattice="4.0 0.0 0.0 0.5 4.0 0.0 0.0 0.0 5.0" Properties=species:S:1:pos:R:3:forces:R:3:tags:I:1:move_mask:L:1 energy=-1.5 stress="1 2 3 4 5 6 7 8 9" pbc="T T F" config_type=bulk name="two words" free="_JSON [1, 2]"
Cu 0.0 0.0 0.0 0.1 0.2 0.3 1 F
ni 1.0 1.0 1.0 -0.1 -0.2 -0.3 0 T
1
Properties=species:S:1:pos:R:3 energy=2
H 0.5 0.5 0.5
`

// A file as ase.io.write writes it reads as ase.io.read reads it: the
// Lattice's rows are the cell, pbc as given (or periodic where a Lattice
// is), stress 3×3 from the file's column-major values, move_mask stored
// as fixed (1 - mask), element symbols in any case, text values skipped,
// a property a frame lacks missing there.
func TestRead(t *testing.T) {
	props, got, err := readAll(t, write(t, twoFrames), ingest.LabelKeys{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range props {
		names = append(names, p.Name+"/"+p.Per)
	}
	want := []string{"energy/structure", "forces/atom", "stress/structure", "free/structure", "tags/atom", "fixed/atom"}
	if !slices.Equal(names, want) {
		t.Fatalf("properties %v, want %v", names, want)
	}
	a, b := got[0], got[1]
	if !slices.Equal(a.Numbers, []uint8{29, 28}) || a.Cell != [9]float64{4, 0, 0, 0.5, 4, 0, 0, 0, 5} || a.PBC != [3]bool{true, true, false} || a.Line != 1 {
		t.Fatalf("first frame %+v", a)
	}
	if !slices.Equal(a.Props[2], []float64{1, 4, 7, 2, 5, 8, 3, 6, 9}) {
		t.Fatalf("stress %v: want the file's column-major 3×3, row-major", a.Props[2])
	}
	if !slices.Equal(a.Props[5], []float64{1, 0}) || !slices.Equal(a.Props[4], []float64{1, 0}) || !slices.Equal(a.Props[3], []float64{1, 2}) {
		t.Fatalf("fixed %v, tags %v, free %v", a.Props[5], a.Props[4], a.Props[3])
	}
	if b.PBC != [3]bool{} || b.Cell != [9]float64{} || b.Line != 5 || len(b.Props[1]) != 0 || !slices.Equal(b.Props[0], []float64{2}) {
		t.Fatalf("second frame %+v", b)
	}
	// --energy-key: another key is the energy, and the file's own energy
	// is kept out of its way.
	props, got, err = readAll(t, write(t, strings.ReplaceAll(twoFrames, "energy", "REF_energy")+
		"1\nProperties=species:S:1:pos:R:3 REF_energy=3 energy=9\nH 0 0 0\n"), ingest.LabelKeys{Energy: "REF_energy"})
	if err != nil {
		t.Fatal(err)
	}
	if props[0].Name != "energy" || got[2].Props[0][0] != 3 || !slices.ContainsFunc(props, func(p shard.Property) bool { return p.Name == "input:energy" }) {
		t.Fatalf("--energy-key REF_energy: %v, %v", props, got[2].Props)
	}
}

// A bad input is refused naming the file, line and field.
func TestRefused(t *testing.T) {
	frame := func(count, comment string, atoms ...string) string {
		return count + "\n" + comment + "\n" + strings.Join(atoms, "\n") + "\n"
	}
	ok := frame("1", "energy=1", "H 0 0 0")
	for _, c := range []struct {
		name, text, want string
	}{
		{"nan", frame("2", "", "H 0 0 0", "H nan 0 0"), "x.xyz:4: field 2: atom 1 of structure 0: pos: NaN is not a finite position"},
		{"inf", frame("1", "", "H 0 inf 0"), "x.xyz:3: field 3: atom 0 of structure 0: pos: +Inf"},
		{"element", ok + frame("1", "", "Xq 0 0 0"), "x.xyz:6: field 1: atom 0 of structure 1: unknown element \"Xq\""},
		{"zero-atoms", ok + frame("0", ""), "x.xyz:4: field 1: structure 1 has 0 atoms"},
		{"count", frame("two", "", "H 0 0 0"), "x.xyz:1: field 1: \"two\" is not an atom count"},
		{"short-file", frame("3", "", "H 0 0 0"), "x.xyz:4: structure 0: the file ends after 1 of its 3 atoms"},
		{"short-line", frame("1", "Properties=species:S:1:pos:R:3:forces:R:3", "H 0 0 0 1 1"), "x.xyz:3: field 7: atom 0 of structure 0: 6 fields, Properties declares 7"},
		{"forces-shape", frame("1", "Properties=species:S:1:pos:R:3:forces:R:2", "H 0 0 0 1 1"), "x.xyz:2: structure 0: forces is 2 value(s) per atom, want 3 per atom"},
		{"energy-shape", frame("1", "energy=\"1 2\"", "H 0 0 0"), "x.xyz:2: field 1: structure 0: energy is 2 value(s) per structure, want 1"},
		{"size-changes", ok + frame("1", "dipole=\"1 2 3\"", "H 0 0 0") + frame("1", "dipole=4", "H 0 0 0"), "x.xyz:8: field 1: structure 2: dipole is 1 value(s) per structure, but 3 per structure from line 5 on"},
		{"lattice", frame("1", "Lattice=\"1 2 3\"", "H 0 0 0"), "x.xyz:2: field 1: structure 0: Lattice: \"1 2 3\" is not 9 numbers"},
		{"pbc", frame("1", "pbc=\"T T\"", "H 0 0 0"), "x.xyz:2: field 1: structure 0: pbc"},
		{"stress", frame("1", "stress=\"1 2 3 4 5 6\"", "H 0 0 0"), "structure 0: stress: \"1 2 3 4 5 6\" is not 9 numbers"},
		{"properties", frame("1", "Properties=species:S:1:pos:Q:3", "H 0 0 0"), "x.xyz:2: structure 0: Properties: pos: type \"Q\""},
		{"no-pos", frame("1", "Properties=species:S:1", "H"), "x.xyz:2: structure 0: Properties has no species:S:1 (or Z:I:1) and pos:R:3"},
		{"logical", frame("1", "Properties=species:S:1:pos:R:3:move_mask:L:1", "H 0 0 0 maybe"), "x.xyz:3: field 5: atom 0 of structure 0: move_mask: \"maybe\" is not a logical"},
		{"z", frame("1", "Properties=Z:I:1:pos:R:3", "200 0 0 0"), "x.xyz:3: field 1: atom 0 of structure 0: Z \"200\" is not an atomic number"},
		{"blank-inside", ok + "\n" + ok, "x.xyz:4: blank line before more structures"},
		{"empty", "", "x.xyz: no structures"},
	} {
		_, _, err := readAll(t, write(t, c.text), ingest.LabelKeys{})
		if !errors.Is(err, ingest.ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\n want %q", c.name, err, c.want)
		}
	}
	// A trailing blank line is the end of the file, as for ASE.
	if _, got, err := readAll(t, write(t, ok+"\n\n"), ingest.LabelKeys{}); err != nil || len(got) != 1 {
		t.Errorf("trailing blank lines: %v, %d structures", err, len(got))
	}
}

// Any bytes: an error or structures, never a panic.
func FuzzExtXYZ(f *testing.F) {
	f.Add([]byte(twoFrames))
	f.Add([]byte("1\nLattice=\"1 0 0 0 1 0 0 0 1\" pbc=\"T T T\" a={1 2} b='x y' c=[3] d\\=e\nH 0 0 0\nVEC1 1 0 0\n"))
	f.Add([]byte("3\n\nC 0 0 0\nO 1 0 0\nO -1 0 0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "f.xyz")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		set, err := extxyz.Open(context.Background(), p, ingest.LabelKeys{})
		if err != nil {
			if !errors.Is(err, ingest.ErrFormat) {
				t.Fatalf("not a format error: %v", err)
			}
			return
		}
		n := int64(0)
		err = set.Structures(context.Background(), func(s *ingest.Structure) error {
			if len(s.Positions) != 3*len(s.Numbers) || len(s.Numbers) == 0 {
				t.Fatalf("structure %d: %d positions for %d atoms", s.Index, len(s.Positions), len(s.Numbers))
			}
			n++
			return nil
		})
		if err == nil && n != set.Len() {
			t.Fatalf("%d structures, Len says %d", n, set.Len())
		}
	})
}

// The fast float parser gives strconv's value, bit for bit, on the
// numbers ase.io.write writes and on everything else (its fallback):
// random decimals of every length and sign, and the fuzzer's strings.
func TestParseFloatIsStrconv(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(s string) {
		want, werr := strconv.ParseFloat(s, 64)
		got, gerr := extxyz.ParseFloat([]byte(s))
		if (werr == nil) != (gerr == nil) || (werr == nil && math.Float64bits(got) != math.Float64bits(want)) {
			t.Fatalf("%q: %v (%v), strconv %v (%v)", s, got, gerr, want, werr)
		}
	}
	for _, s := range []string{"0", "-0", "+1", "1.", ".5", "-.5", "1e3", "inf", "-Inf", "nan", "", "-", ".", "1.2.3", "0x10",
		"123456789012345", "1234567890123456", "0.1234567890123456789012", "00000000000000000001.5", "9007199254740993"} {
		check(s)
	}
	for range 200000 {
		check(strconv.FormatFloat((r.Float64()-0.5)*math.Pow(10, float64(r.IntN(12)-4)), 'f', r.IntN(12), 64))
	}
}

func FuzzParseFloat(f *testing.F) {
	f.Add("-12.34567890")
	f.Add("1e-5")
	f.Fuzz(func(t *testing.T, s string) {
		want, werr := strconv.ParseFloat(s, 64)
		got, gerr := extxyz.ParseFloat([]byte(s))
		if (werr == nil) != (gerr == nil) || (werr == nil && math.Float64bits(got) != math.Float64bits(want)) {
			t.Fatalf("%q: %v (%v), strconv %v (%v)", s, got, gerr, want, werr)
		}
	})
}

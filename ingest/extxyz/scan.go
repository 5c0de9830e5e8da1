package extxyz

import (
	"slices"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/shard"
)

// scan is Open's pass: what every frame's keys and columns hold, checked
// to agree from frame to frame.
type scan struct {
	set     *Set
	props   []shard.Property
	first   []int64 // the line that first gave each property
	index   map[string]int
	skipped map[string]bool
}

func (sc *scan) frame(fr *frame) error {
	s := sc.set
	note := func(name, per string, size int, line int64, field int) error {
		if want, ok := labelShapes[name]; ok && (want.per != per || want.size != size) {
			return ingest.Errorf(Format, s.shown, line, field, "structure %d: %s is %d value(s) per %s, want %d per %s",
				fr.index, name, size, per, want.size, want.per)
		}
		k, ok := sc.index[name]
		if !ok {
			sc.index[name] = len(sc.props)
			sc.props = append(sc.props, shard.Property{Name: name, Per: per, Size: size})
			sc.first = append(sc.first, line)
			return nil
		}
		p := sc.props[k]
		if p.Per != per || p.Size != size {
			return ingest.Errorf(Format, s.shown, line, field, "structure %d: %s is %d value(s) per %s, but %d per %s from line %d on",
				fr.index, name, size, per, p.Size, p.Per, sc.first[k])
		}
		return nil
	}
	for i, p := range fr.info {
		v := fr.infoVals[i]
		if v.kind == kindText {
			sc.skipped[p.key] = true
			continue
		}
		name := s.keys.Canonical(p.key)
		size := len(v.nums)
		if voigt(name, size) {
			size = 9 // stored as the full 3×3
		}
		if err := note(name, shard.PerStructure, size, fr.line+1, i+1); err != nil {
			return err
		}
	}
	var species, pos bool
	for _, c := range fr.cols {
		switch c.name {
		case "species":
			species = c.typ == 'S' && c.cols == 1
			continue
		case "Z":
			if c.typ != 'I' || c.cols != 1 {
				return ingest.Errorf(Format, s.shown, fr.line+1, 0, "structure %d: Properties: Z:%c:%d, want Z:I:1", fr.index, c.typ, c.cols)
			}
			species = true
			continue
		case "pos":
			if c.typ != 'R' || c.cols != 3 {
				return ingest.Errorf(Format, s.shown, fr.line+1, 0, "structure %d: Properties: pos:%c:%d, want pos:R:3", fr.index, c.typ, c.cols)
			}
			pos = true
			continue
		}
		if c.typ == 'S' {
			sc.skipped[c.name] = true
			continue
		}
		if err := note(atomName(s.keys, c.name), shard.PerAtom, c.cols, fr.line+1, 0); err != nil {
			return err
		}
	}
	if !species || !pos {
		return ingest.Errorf(Format, s.shown, fr.line+1, 0, "structure %d: Properties has no species:S:1 (or Z:I:1) and pos:R:3", fr.index)
	}
	return nil
}

// labelShapes are the shapes of the labels MLIPs train on: a key stored
// under one of these names (ingest.LabelKeys) must have it.
var labelShapes = map[string]struct {
	per  string
	size int
}{
	"energy": {shard.PerStructure, 1}, "forces": {shard.PerAtom, 3}, "stress": {shard.PerStructure, 9},
	"virials": {shard.PerStructure, 9}, "charge": {shard.PerStructure, 1}, "spin": {shard.PerStructure, 1},
}

// voigt reports whether a value of name with size values is a stress or
// virials in Voigt order (xx, yy, zz, yz, xz, xy), as ASE writes a 6-value
// array and MACE reads one; it is stored as the full 3×3.
func voigt(name string, size int) bool { return size == 6 && (name == "stress" || name == "virials") }

// appendVoigt appends the row-major 3×3 of Voigt values v.
func appendVoigt(dst, v []float64) []float64 {
	xx, yy, zz, yz, xz, xy := v[0], v[1], v[2], v[3], v[4], v[5]
	return append(dst, xx, xy, xz, xy, yy, yz, xz, yz, zz)
}

// atomName is the property a per-atom column is stored as: ASE's name
// for it ("charge" is "charges", move_mask is "fixed"), the label keys
// renamed.
func atomName(keys ingest.LabelKeys, col string) string {
	switch col {
	case "charge":
		col = "charges"
	case "move_mask":
		return "fixed"
	}
	return keys.Canonical(col)
}

// ordered is the properties with the labels first, in the order MLIPs
// list them, then the others as first seen.
func (sc *scan) ordered() []shard.Property {
	rank := func(name string) int {
		if i := slices.Index([]string{"energy", "forces", "stress", "virials", "charge", "spin"}, name); i >= 0 {
			return i
		}
		return 100
	}
	out := slices.Clone(sc.props)
	slices.SortStableFunc(out, func(a, b shard.Property) int { return rank(a.Name) - rank(b.Name) })
	return out
}

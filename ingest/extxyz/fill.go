package extxyz

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"unsafe"

	"github.com/augloader/augloader/atoms"
	"github.com/augloader/augloader/ingest"
)

// fill parses frame fr into st.
func (s *Set) fill(fr *frame, index map[string]int, st *ingest.Structure) error {
	n := fr.natoms
	st.Index, st.Line, st.File = fr.index, fr.line, fr.file
	st.Numbers = slices.Grow(st.Numbers[:0], n)[:n]
	st.Positions = slices.Grow(st.Positions[:0], 3*n)[:3*n]
	st.Cell = [9]float64{}
	if fr.lattice != nil {
		copy(st.Cell[:], fr.lattice)
	}
	st.PBC = fr.pbc
	for k := range st.Props {
		st.Props[k] = st.Props[k][:0]
	}
	for i, p := range fr.info {
		v := fr.infoVals[i]
		if v.kind == kindText {
			continue
		}
		name := s.keys.Canonical(p.key)
		k := index[name]
		if voigt(name, len(v.nums)) {
			st.Props[k] = appendVoigt(st.Props[k], v.nums)
			continue
		}
		st.Props[k] = append(st.Props[k], v.nums...)
	}
	// Each column's destination.
	type dest struct {
		col  column
		prop int // -1: numbers (species, Z), -2: positions, -3: skipped
		neg  bool
	}
	var dests [16]dest
	ds := dests[:0]
	hasZ := slices.ContainsFunc(fr.cols, func(c column) bool { return c.name == "Z" })
	for _, c := range fr.cols {
		d := dest{col: c, prop: -3}
		switch {
		case c.name == "Z" || (c.name == "species" && !hasZ && c.typ == 'S'):
			d.prop = -1
		case c.name == "pos":
			d.prop = -2
		case c.typ != 'S':
			d.prop = index[atomName(s.keys, c.name)]
			d.neg = c.name == "move_mask"
			need := n * c.cols
			st.Props[d.prop] = slices.Grow(st.Props[d.prop][:0], need)[:need]
		}
		ds = append(ds, d)
	}
	var fields [64][]byte
	start := 0
	for a, end := range fr.ends {
		line := fr.text[start:end]
		start = end
		at := fr.atomAt + int64(a)
		f := splitFields(line, fields[:0])
		if len(f) < fr.width {
			return ingest.Errorf(Format, fr.file, at, len(f)+1, "atom %d of structure %d: %d fields, Properties declares %d", a, fr.index, len(f), fr.width)
		}
		for _, d := range ds {
			c := d.col
			for j := range c.cols {
				tok := f[c.at+j]
				field := c.at + j + 1
				switch d.prop {
				case -3:
				case -1:
					var z uint8
					if c.name == "Z" {
						v, err := strconv.ParseInt(str(tok), 10, 64)
						if err != nil || v < 1 || v > atoms.MaxZ {
							return ingest.Errorf(Format, fr.file, at, field, "atom %d of structure %d: Z %q is not an atomic number 1..%d", a, fr.index, tok, atoms.MaxZ)
						}
						z = uint8(v)
					} else if z = atoms.Number(tok); z == 0 {
						return ingest.Errorf(Format, fr.file, at, field, "atom %d of structure %d: unknown element %q", a, fr.index, tok)
					}
					st.Numbers[a] = z
				case -2:
					x, err := parseFloat(tok)
					if err != nil {
						return ingest.Errorf(Format, fr.file, at, field, "atom %d of structure %d: pos: %q is not a number", a, fr.index, tok)
					}
					if math.IsNaN(x) || math.IsInf(x, 0) {
						return ingest.Errorf(Format, fr.file, at, field, "atom %d of structure %d: pos: %v is not a finite position", a, fr.index, x)
					}
					st.Positions[3*a+j] = x
				default:
					x, err := columnValue(c.typ, tok)
					if err != nil {
						return ingest.Errorf(Format, fr.file, at, field, "atom %d of structure %d: %s: %v", a, fr.index, c.name, err)
					}
					if d.neg {
						x = 1 - x // move_mask: stored as fixed
					}
					st.Props[d.prop][a*c.cols+j] = x
				}
			}
		}
	}
	return nil
}

// columnValue parses one field of a per-atom column of type typ.
func columnValue(typ byte, tok []byte) (float64, error) {
	switch typ {
	case 'R':
		v, err := parseFloat(tok)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", tok)
		}
		return v, nil
	case 'I':
		v, err := strconv.ParseInt(str(tok), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not an integer", tok)
		}
		return float64(v), nil
	case 'L':
		switch string(tok) {
		case "T", "True":
			return 1, nil
		case "F", "False":
			return 0, nil
		}
		return 0, fmt.Errorf("%q is not a logical (T, F, True, False)", tok)
	}
	return 0, fmt.Errorf("type %c", typ)
}

// splitFields cuts b at whitespace into dst.
func splitFields(b []byte, dst [][]byte) [][]byte {
	i := 0
	for i < len(b) {
		for i < len(b) && isSpace(b[i]) {
			i++
		}
		j := i
		for j < len(b) && !isSpace(b[j]) {
			j++
		}
		if j > i {
			dst = append(dst, b[i:j])
		}
		i = j
	}
	return dst
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' }

// str views b as a string without copying, for a parse that keeps nothing.
func str(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// pow10 are the powers of ten a float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
	1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseFloat parses a number as strconv.ParseFloat does, correctly
// rounded: "[-+]digits[.digits]" of at most 15 significant digits (what
// ase.io.write's %16.8f gives) by Clinger's fast path, an integer below
// 2^53 divided by a power of ten, both exact, so one rounding; any other
// form (an exponent, more digits, inf, nan) through strconv.
func parseFloat(b []byte) (float64, error) {
	i, neg := 0, false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg, i = b[0] == '-', 1
	}
	start := i
	var m uint64
	digits, frac, dot, any := 0, 0, false, false
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= '0' && c <= '9':
			any = true
			if digits > 0 || c != '0' {
				digits++
			}
			m = m*10 + uint64(c-'0')
			if dot {
				frac++
			}
		case c == '.' && !dot:
			dot = true
		default:
			return strconv.ParseFloat(str(b), 64)
		}
		if digits > 15 || frac > 22 {
			return strconv.ParseFloat(str(b), 64)
		}
	}
	if !any || i == start {
		return strconv.ParseFloat(str(b), 64) // "", "-", ".": strconv's error
	}
	v := float64(m) / pow10[frac]
	if neg {
		v = -v
	}
	return v, nil
}

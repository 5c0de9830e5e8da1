// Package asedb reads ASE's SQLite databases (ase.db, the files
// ase.io.write("x.db", …) and ase.db.connect write) as ase.io.read reads
// them, through a pure-Go SQLite (modernc.org/sqlite: no cgo): per row of
// the systems table its numbers, positions, cell and pbc, the single-point
// results ASE keeps (energy, free_energy, forces, stress, dipole, charges,
// magmoms, magmom), the per-atom arrays (tags, initial_magmoms,
// initial_charges, masses, momenta), FixAtoms constraints as fixed, and
// the numeric key-value pairs.
//
// Contract:
//   - Open reads the database once to learn its rows and what they carry
//     (the same properties as ingest/extxyz's for the same structures:
//     stress 3×3 from ASE's Voigt order, the label keys renamed as
//     ingest.LabelKeys say); Structures reads the rows in id order.
//   - The file is opened read only and never written; a database ASE
//     itself would refuse (a schema version past 9, or before 5) is
//     refused.
//   - Every fault is an *ingest.FormatError naming the file, the row (its
//     id, as the line) and the column (the field, 1-based as in systems):
//     a blob whose length is not its atoms' (a forces array of the wrong
//     length), an unknown element, a position that is not finite, zero
//     atoms, a constraint that is not JSON.
package asedb

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/augloader/augloader/atoms"
	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/internal/iox"
	"github.com/augloader/augloader/shard"
)

// Format is this reader's name, its errors' prefix.
const Format = "asedb"

// The schema versions ASE reads (ase/db/sqlite.py: VERSION 9).
const minVersion, maxVersion = 5, 9

// Recognise reports whether a file's first bytes are an SQLite database's.
func Recognise(head []byte) bool { return bytes.HasPrefix(head, []byte("SQLite format 3\x00")) }

// The systems table's columns this reader reads, in ASE's order; field is
// the column's 1-based position there.
var columns = []struct {
	name  string
	field int
}{
	{"id", 1}, {"numbers", 6}, {"positions", 7}, {"cell", 8}, {"pbc", 9}, {"initial_magmoms", 10},
	{"initial_charges", 11}, {"masses", 12}, {"tags", 13}, {"momenta", 14}, {"constraints", 15},
	{"energy", 18}, {"free_energy", 19}, {"forces", 20}, {"stress", 21}, {"dipole", 22}, {"magmoms", 23},
	{"magmom", 24}, {"charges", 25}, {"key_value_pairs", 26},
}

// The blob columns stored as properties: per atom (values per atom) or per
// structure (values), and their element type (ASE's blob: float64, or
// int32 for tags).
var blobProps = []struct {
	col    string
	perAtm bool
	size   int // 0: from the blob's length (initial_magmoms: 1 or 3 per atom)
	ints   bool
}{
	{"initial_magmoms", true, 0, false}, {"initial_charges", true, 1, false}, {"masses", true, 1, false},
	{"tags", true, 1, true}, {"momenta", true, 3, false}, {"forces", true, 3, false},
	{"stress", false, 9, false}, {"dipole", false, 3, false}, {"magmoms", true, 0, false}, {"charges", true, 1, false},
}

// Set is an opened ASE database.
type Set struct {
	path, shown string
	keys        ingest.LabelKeys
	db          *sql.DB
	props       []shard.Property
	index       map[string]int
	n           int64
	skipped     []string
	source      ingest.SourceHash
	kvpSource   map[string]string // property name → the key-value pair it is read from
}

// Open opens the database at path read only and reads it once.
func Open(ctx context.Context, path string, keys ingest.LabelKeys) (*Set, error) {
	s := &Set{path: path, shown: filepath.Base(path), keys: keys, index: map[string]int{}, kvpSource: map[string]string{}}
	f, err := iox.OpenRegular(path)
	if err != nil {
		return nil, ingest.Errorf(Format, s.shown, 0, 0, "%v", err)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	f.Close()
	if err != nil {
		return nil, ingest.Errorf(Format, s.shown, 0, 0, "read: %v", err)
	}
	s.source = ingest.SourceHash{Name: s.shown, Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil))}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	dsn := (&url.URL{Scheme: "file", Path: abs, RawQuery: "mode=ro&_pragma=query_only(1)"}).String()
	if s.db, err = sql.Open("sqlite", dsn); err != nil {
		return nil, ingest.Errorf(Format, s.shown, 0, 0, "%v", err)
	}
	s.db.SetMaxOpenConns(1)
	if err := s.scan(ctx); err != nil {
		s.db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Set) fail(row int64, col string, format string, args ...any) error {
	field := 0
	for _, c := range columns {
		if c.name == col {
			field = c.field
		}
	}
	return ingest.Errorf(Format, s.shown, row, field, "%s%s", prefix(col), fmt.Sprintf(format, args...))
}

func prefix(col string) string {
	if col == "" {
		return ""
	}
	return col + ": "
}

// scan checks the schema version and learns the rows' count and
// properties.
func (s *Set) scan(ctx context.Context) error {
	var version string
	if err := s.db.QueryRowContext(ctx, "SELECT value FROM information WHERE name = 'version'").Scan(&version); err != nil {
		return ingest.Errorf(Format, s.shown, 0, 0, "not an ASE database (no version in its information table: %v)", err)
	}
	v, err := strconv.Atoi(version)
	if err != nil || v < minVersion || v > maxVersion {
		return ingest.Errorf(Format, s.shown, 0, 0, "ASE database version %q: this reader reads %d..%d", version, minVersion, maxVersion)
	}
	note := func(name, per string, size int, row int64, col string) error {
		if k, ok := s.index[name]; ok {
			if p := s.props[k]; p.Per != per || p.Size != size {
				return s.fail(row, col, "%d value(s) per %s, earlier rows have %d per %s", size, per, p.Size, p.Per)
			}
			return nil
		}
		s.index[name] = len(s.props)
		s.props = append(s.props, shard.Property{Name: name, Per: per, Size: size})
		return nil
	}
	skipped := map[string]bool{}
	err = s.rows(ctx, func(r *row) error {
		s.n++
		nat := len(r.numbers) / 4
		for _, b := range blobProps {
			blob := r.blobs[b.col]
			if blob == nil {
				continue
			}
			size := b.size
			switch {
			case b.col == "stress":
				if len(blob) != 48 && len(blob) != 72 {
					return s.fail(r.id, b.col, "%d bytes: want 6 (Voigt) or 9 float64", len(blob))
				}
			case size == 0:
				if nat == 0 || len(blob)%(8*nat) != 0 {
					return s.fail(r.id, b.col, "%d bytes for %d atoms", len(blob), nat)
				}
				size = len(blob) / (8 * nat)
			}
			per := shard.PerStructure
			if b.perAtm {
				per = shard.PerAtom
			}
			if err := note(s.keys.Canonical(b.col), per, size, r.id, b.col); err != nil {
				return err
			}
		}
		for _, c := range []string{"energy", "free_energy", "magmom"} {
			if r.reals[c] != nil {
				if err := note(s.keys.Canonical(c), shard.PerStructure, 1, r.id, c); err != nil {
					return err
				}
			}
		}
		if r.fixed {
			if err := note("fixed", shard.PerAtom, 1, r.id, "constraints"); err != nil {
				return err
			}
		}
		for k, v := range r.kvp {
			if _, ok := v.(float64); !ok {
				if _, ok := v.(bool); !ok {
					skipped["key_value_pairs."+k] = true
					continue
				}
			}
			name := s.keys.Canonical(k)
			if name == k && s.isColumnName(k) {
				name = "input:" + k // a pair named as a column keeps out of its way
			}
			s.kvpSource[name] = k
			if err := note(name, shard.PerStructure, 1, r.id, "key_value_pairs"); err != nil {
				return err
			}
		}
		if r.hasData {
			skipped["data"] = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	if s.n == 0 {
		return ingest.Errorf(Format, s.shown, 0, 0, "no structures")
	}
	for k := range skipped {
		s.skipped = append(s.skipped, k)
	}
	slices.Sort(s.skipped)
	// Labels first, as MLIPs list them, then the rest as first seen.
	rank := func(name string) int {
		if i := slices.Index([]string{"energy", "forces", "stress", "virials", "charge", "spin"}, name); i >= 0 {
			return i
		}
		return 100
	}
	slices.SortStableFunc(s.props, func(a, b shard.Property) int { return rank(a.Name) - rank(b.Name) })
	for k, p := range s.props {
		s.index[p.Name] = k
	}
	return nil
}

func (s *Set) isColumnName(k string) bool {
	return slices.ContainsFunc(columns, func(c struct {
		name  string
		field int
	}) bool {
		return c.name == k
	})
}

// row is one row of systems as read.
type row struct {
	id                   int64
	numbers, positions   []byte
	cell                 []byte
	pbc                  int64
	blobs                map[string][]byte
	reals                map[string]*float64
	fixedIdx             []int
	fixed                bool
	kvp                  map[string]any
	hasData              bool
	constraints, kvpText sql.NullString
}

// rows reads every row of systems in id order.
func (s *Set) rows(ctx context.Context, fn func(*row) error) error {
	q := "SELECT id, numbers, positions, cell, pbc, initial_magmoms, initial_charges, masses, tags, momenta, constraints, " +
		"energy, free_energy, forces, stress, dipole, magmoms, magmom, charges, key_value_pairs, data IS NOT NULL AND data != 'null' FROM systems ORDER BY id"
	rs, err := s.db.QueryContext(ctx, q)
	if err != nil {
		return ingest.Errorf(Format, s.shown, 0, 0, "reading systems: %v", err)
	}
	defer rs.Close()
	blobCols := []string{"initial_magmoms", "initial_charges", "masses", "tags", "momenta"}
	blobCols2 := []string{"forces", "stress", "dipole", "magmoms"}
	for rs.Next() {
		r := &row{blobs: map[string][]byte{}, reals: map[string]*float64{}}
		var pbc sql.NullInt64
		b1 := make([][]byte, len(blobCols))
		b2 := make([][]byte, len(blobCols2))
		var charges []byte
		var energy, free, magmom sql.NullFloat64
		dest := []any{&r.id, &r.numbers, &r.positions, &r.cell, &pbc}
		for i := range b1 {
			dest = append(dest, &b1[i])
		}
		dest = append(dest, &r.constraints, &energy, &free)
		for i := range b2 {
			dest = append(dest, &b2[i])
		}
		dest = append(dest, &magmom, &charges, &r.kvpText, &r.hasData)
		if err := rs.Scan(dest...); err != nil {
			return ingest.Errorf(Format, s.shown, r.id, 0, "reading row: %v", err)
		}
		r.pbc = pbc.Int64
		for i, c := range blobCols {
			if b1[i] != nil {
				r.blobs[c] = b1[i]
			}
		}
		for i, c := range blobCols2 {
			if b2[i] != nil {
				r.blobs[c] = b2[i]
			}
		}
		if charges != nil {
			r.blobs["charges"] = charges
		}
		for c, v := range map[string]sql.NullFloat64{"energy": energy, "free_energy": free, "magmom": magmom} {
			if v.Valid {
				x := v.Float64
				r.reals[c] = &x
			}
		}
		if err := s.decode(r); err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
		if r.id&63 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if err := rs.Err(); err != nil {
		return ingest.Errorf(Format, s.shown, 0, 0, "reading systems: %v", err)
	}
	return nil
}

// decode checks a row's blobs against its atoms and parses its
// constraints and key-value pairs.
func (s *Set) decode(r *row) error {
	if len(r.numbers)%4 != 0 || len(r.numbers) == 0 {
		return s.fail(r.id, "numbers", "%d bytes: want int32 atomic numbers of at least one atom", len(r.numbers))
	}
	n := len(r.numbers) / 4
	if len(r.positions) != 24*n {
		return s.fail(r.id, "positions", "%d bytes for %d atoms", len(r.positions), n)
	}
	if len(r.cell) != 72 {
		return s.fail(r.id, "cell", "%d bytes: want 9 float64", len(r.cell))
	}
	if r.pbc < 0 || r.pbc > 7 {
		return s.fail(r.id, "pbc", "%d: want a bit per axis (0..7)", r.pbc)
	}
	for _, b := range blobProps {
		blob, ok := r.blobs[b.col]
		if !ok || b.col == "stress" || b.size == 0 {
			continue
		}
		per := 8
		if b.ints {
			per = 4
		}
		want := b.size * per
		if b.perAtm {
			want *= n
		}
		if len(blob) != want {
			unit := "structure"
			if b.perAtm {
				unit = fmt.Sprintf("%d atoms", n)
			}
			return s.fail(r.id, b.col, "%d bytes: want %d values per %s × %d bytes", len(blob), b.size, unit, per)
		}
	}
	if r.constraints.Valid && r.constraints.String != "" {
		var cs []struct {
			Name   string          `json:"name"`
			Kwargs json.RawMessage `json:"kwargs"`
		}
		if err := json.Unmarshal([]byte(r.constraints.String), &cs); err != nil {
			return s.fail(r.id, "constraints", "not JSON: %v", err)
		}
		for _, c := range cs {
			if c.Name != "FixAtoms" {
				continue
			}
			var kw struct {
				Indices []int `json:"indices"`
			}
			if err := json.Unmarshal(c.Kwargs, &kw); err != nil {
				return s.fail(r.id, "constraints", "FixAtoms: %v", err)
			}
			for _, i := range kw.Indices {
				if i < 0 || i >= n {
					return s.fail(r.id, "constraints", "FixAtoms index %d of %d atoms", i, n)
				}
			}
			r.fixed = true
			r.fixedIdx = append(r.fixedIdx, kw.Indices...)
		}
	}
	if r.kvpText.Valid && r.kvpText.String != "" && r.kvpText.String != "{}" {
		if err := json.Unmarshal([]byte(r.kvpText.String), &r.kvp); err != nil {
			return s.fail(r.id, "key_value_pairs", "not JSON: %v", err)
		}
	}
	return nil
}

// Format implements ingest.StructureSet.
func (s *Set) Format() string { return Format }

// Properties implements ingest.StructureSet.
func (s *Set) Properties() []shard.Property { return slices.Clone(s.props) }

// Len implements ingest.StructureSet.
func (s *Set) Len() int64 { return s.n }

// Skipped implements ingest.StructureSet.
func (s *Set) Skipped() []string { return s.skipped }

// Sources implements ingest.StructureSet.
func (s *Set) Sources() []ingest.SourceHash { return []ingest.SourceHash{s.source} }

// Close implements ingest.StructureSet.
func (s *Set) Close() error { return s.db.Close() }

// Structures implements ingest.StructureSet.
func (s *Set) Structures(ctx context.Context, fn func(*ingest.Structure) error) error {
	var st ingest.Structure
	st.File = s.shown
	st.Props = make([][]float64, len(s.props))
	var index int64
	err := s.rows(ctx, func(r *row) error {
		n := len(r.numbers) / 4
		st.Index, st.Line = index, r.id
		index++
		st.Numbers = st.Numbers[:0]
		for a := range n {
			z := int32(binary.LittleEndian.Uint32(r.numbers[4*a:]))
			if z < 1 || z > atoms.MaxZ {
				return s.fail(r.id, "numbers", "atom %d: atomic number %d", a, z)
			}
			st.Numbers = append(st.Numbers, uint8(z))
		}
		st.Positions = floats(st.Positions[:0], r.positions)
		for i, x := range st.Positions {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return s.fail(r.id, "positions", "atom %d: %v is not a finite position", i/3, x)
			}
		}
		copy(st.Cell[:], floats(nil, r.cell))
		for k := range 3 {
			st.PBC[k] = r.pbc&(1<<k) != 0
		}
		for k := range st.Props {
			st.Props[k] = st.Props[k][:0]
		}
		for _, b := range blobProps {
			blob, ok := r.blobs[b.col]
			if !ok {
				continue
			}
			k := s.index[s.keys.Canonical(b.col)]
			switch {
			case b.ints:
				for i := 0; i+4 <= len(blob); i += 4 {
					st.Props[k] = append(st.Props[k], float64(int32(binary.LittleEndian.Uint32(blob[i:]))))
				}
			case b.col == "stress" && len(blob) == 48:
				v := floats(nil, blob)
				xx, yy, zz, yz, xz, xy := v[0], v[1], v[2], v[3], v[4], v[5]
				st.Props[k] = append(st.Props[k], xx, xy, xz, xy, yy, yz, xz, yz, zz)
			default:
				st.Props[k] = floats(st.Props[k], blob)
			}
		}
		for c, v := range r.reals {
			k := s.index[s.keys.Canonical(c)]
			st.Props[k] = append(st.Props[k], *v)
		}
		if r.fixed {
			k := s.index["fixed"]
			st.Props[k] = append(st.Props[k], make([]float64, n)...)
			for _, i := range r.fixedIdx {
				st.Props[k][i] = 1
			}
		}
		for name, key := range s.kvpSource {
			v, ok := r.kvp[key]
			if !ok {
				continue
			}
			k := s.index[name]
			switch x := v.(type) {
			case float64:
				st.Props[k] = append(st.Props[k], x)
			case bool:
				if x {
					st.Props[k] = append(st.Props[k], 1)
				} else {
					st.Props[k] = append(st.Props[k], 0)
				}
			}
		}
		return fn(&st)
	})
	if err != nil {
		return err
	}
	return s.unchanged()
}

// unchanged checks that the file is the one Open hashed.
func (s *Set) unchanged() error {
	f, err := os.Open(s.path)
	if err != nil {
		return ingest.Errorf(Format, s.shown, 0, 0, "%v", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ingest.Errorf(Format, s.shown, 0, 0, "read: %v", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != s.source.SHA256 {
		return ingest.Errorf(Format, s.shown, 0, 0, "the database changed while it was read")
	}
	return nil
}

// floats appends the little-endian float64s of b to dst.
func floats(dst []float64, b []byte) []float64 {
	for i := 0; i+8 <= len(b); i += 8 {
		dst = append(dst, math.Float64frombits(binary.LittleEndian.Uint64(b[i:])))
	}
	return dst
}

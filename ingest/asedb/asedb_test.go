package asedb_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/asedb"
)

// aseSchema is ase/db/sqlite.py's (VERSION 9) systems and information
// tables, as ASE creates them.
const aseSchema = `CREATE TABLE systems (
    id INTEGER PRIMARY KEY AUTOINCREMENT, unique_id TEXT UNIQUE, ctime REAL, mtime REAL, username TEXT,
    numbers BLOB, positions BLOB, cell BLOB, pbc INTEGER, initial_magmoms BLOB, initial_charges BLOB,
    masses BLOB, tags BLOB, momenta BLOB, constraints TEXT, calculator TEXT, calculator_parameters TEXT,
    energy REAL, free_energy REAL, forces BLOB, stress BLOB, dipole BLOB, magmoms BLOB, magmom REAL,
    charges BLOB, key_value_pairs TEXT, data BLOB, natoms INTEGER, fmax REAL, smax REAL, volume REAL,
    mass REAL, charge REAL);
CREATE TABLE information (name TEXT, value TEXT);
INSERT INTO information VALUES ('version', '9');`

func f64s(v ...float64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return b
}

func i32s(v ...int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

type sysRow struct {
	numbers, positions, cell, tags, forces, stress []byte
	pbc                                            int
	energy                                         any
	constraints, kvp                               string
}

func makeDB(t *testing.T, rows ...sysRow) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(aseSchema); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.kvp == "" {
			r.kvp = "{}"
		}
		var constraints any
		if r.constraints != "" {
			constraints = r.constraints
		}
		_, err := db.Exec(`INSERT INTO systems (numbers, positions, cell, pbc, tags, energy, forces, stress, constraints, key_value_pairs, data)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'null')`,
			r.numbers, r.positions, r.cell, r.pbc, nilIfEmpty(r.tags), r.energy, nilIfEmpty(r.forces), nilIfEmpty(r.stress), constraints, r.kvp)
		if err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func nilIfEmpty(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

var cube = f64s(4, 0, 0, 0, 4, 0, 0, 0, 4)

func water() sysRow {
	return sysRow{numbers: i32s(8, 1, 1), positions: f64s(0, 0, 0, 0.96, 0, 0, -0.24, 0.93, 0), cell: f64s(0, 0, 0, 0, 0, 0, 0, 0, 0)}
}

func copper() sysRow {
	return sysRow{numbers: i32s(29, 29), positions: f64s(0, 0, 0, 1.8, 1.8, 0), cell: cube, pbc: 7, energy: -1.25,
		forces: f64s(0.1, 0, 0, -0.1, 0, 0), stress: f64s(1, 2, 3, 4, 5, 6), tags: i32s(1, 0),
		constraints: `[{"name": "FixAtoms", "kwargs": {"indices": [1]}}]`, kvp: `{"weight": 2.5, "relaxed": true, "note": "text"}`}
}

// An ASE database reads as ase.io.read reads it: numbers, positions, cell
// and pbc; energy, forces, stress (3×3 from ASE's Voigt), tags, FixAtoms as
// fixed, numeric key-value pairs; a property a row lacks is missing there;
// text pairs are not stored.
func TestRead(t *testing.T) {
	path := makeDB(t, water(), copper())
	set, err := asedb.Open(context.Background(), path, ingest.LabelKeys{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	var names []string
	for _, p := range set.Properties() {
		names = append(names, p.Name)
	}
	want := []string{"energy", "forces", "stress", "tags", "fixed", "weight", "relaxed"}
	slices.Sort(names[3:])
	slices.Sort(want[3:])
	if !slices.Equal(names, want) || set.Len() != 2 || !slices.Equal(set.Skipped(), []string{"key_value_pairs.note"}) {
		t.Fatalf("properties %v, %d rows, skipped %v", names, set.Len(), set.Skipped())
	}
	props := set.Properties()
	var got []ingest.Structure
	err = set.Structures(context.Background(), func(s *ingest.Structure) error {
		c := *s
		c.Numbers, c.Positions = slices.Clone(s.Numbers), slices.Clone(s.Positions)
		c.Props = make([][]float64, len(s.Props))
		for k := range s.Props {
			c.Props[k] = slices.Clone(s.Props[k])
		}
		got = append(got, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	w, cu := got[0], got[1]
	if !slices.Equal(w.Numbers, []uint8{8, 1, 1}) || w.PBC != [3]bool{} || w.Line != 1 || len(w.Props[0]) != 0 {
		t.Fatalf("water %+v", w)
	}
	byName := map[string][]float64{}
	for k, p := range props {
		byName[p.Name] = cu.Props[k]
	}
	if cu.PBC != [3]bool{true, true, true} || cu.Cell[0] != 4 || !slices.Equal(byName["energy"], []float64{-1.25}) ||
		!slices.Equal(byName["stress"], []float64{1, 6, 5, 6, 2, 4, 5, 4, 3}) || !slices.Equal(byName["fixed"], []float64{0, 1}) ||
		!slices.Equal(byName["tags"], []float64{1, 0}) || !slices.Equal(byName["weight"], []float64{2.5}) || !slices.Equal(byName["relaxed"], []float64{1}) {
		t.Fatalf("copper %v", byName)
	}
}

// A damaged row is refused naming the file, the row and the column.
func TestRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*sysRow)
		want string
	}{
		{"forces-length", func(r *sysRow) { r.forces = f64s(1, 2, 3, 4) }, "x.db:2: field 20: forces: 32 bytes: want 3 values per 2 atoms × 8 bytes"},
		{"nan", func(r *sysRow) { r.positions = f64s(0, 0, 0, math.NaN(), 0, 0) }, "x.db:2: field 7: positions: atom 1: NaN is not a finite position"},
		{"element", func(r *sysRow) { r.numbers = i32s(29, 200) }, "x.db:2: field 6: numbers: atom 1: atomic number 200"},
		{"no-atoms", func(r *sysRow) { r.numbers, r.positions = nil, nil }, "x.db:2: field 6: numbers: 0 bytes"},
		{"cell", func(r *sysRow) { r.cell = f64s(1, 2) }, "x.db:2: field 8: cell: 16 bytes"},
		{"constraints", func(r *sysRow) { r.constraints = "[{" }, "x.db:2: field 15: constraints: not JSON"},
		{"fixed-index", func(r *sysRow) { r.constraints = `[{"name": "FixAtoms", "kwargs": {"indices": [5]}}]` }, "FixAtoms index 5 of 2 atoms"},
	} {
		r := copper()
		c.edit(&r)
		path := makeDB(t, water(), r)
		set, err := asedb.Open(context.Background(), path, ingest.LabelKeys{})
		if err == nil {
			err = set.Structures(context.Background(), func(*ingest.Structure) error { return nil })
			set.Close()
		}
		if !errors.Is(err, ingest.ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\n want %q", c.name, err, c.want)
		}
	}
	// Not ASE's: no version, or a version ASE would refuse.
	path := filepath.Join(t.TempDir(), "other.db")
	db, _ := sql.Open("sqlite", path)
	db.Exec("CREATE TABLE t (x INTEGER)")
	db.Close()
	if _, err := asedb.Open(context.Background(), path, ingest.LabelKeys{}); err == nil || !strings.Contains(err.Error(), "not an ASE database") {
		t.Errorf("another SQLite database: %v", err)
	}
}

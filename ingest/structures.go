package ingest

import (
	"context"

	"github.com/augloader/augloader/shard"
)

// Structures: the seam between the formats 3D atomistic structures come
// in (ingest/extxyz, ingest/asedb) and format 4 shards (ingest/convert's
// RunStructures). A structure reader reads its input once to learn what
// its structures carry (Properties) and how many there are, then hands
// them over in order; the converter computes each one's neighbour list.

// Structure is one structure as a reader hands it over. Its slices are
// reused after the callback returns.
type Structure struct {
	Index int64  // 0-based, in the input's order
	File  string // where it begins, for errors
	Line  int64  // 1-based line (0: not a text input)
	// Numbers are atomic numbers (1..118); Positions 3 per atom (Å).
	Numbers   []uint8
	Positions []float64
	// Cell's rows a, b, c (Å) and the periodic axes.
	Cell [9]float64
	PBC  [3]bool
	// Props are the set's Properties in order; nil or empty: this
	// structure has none.
	Props [][]float64
}

// StructureSet is an opened input of structures.
type StructureSet interface {
	// Format is the reader's name, its errors' prefix.
	Format() string
	// Properties are what the structures carry besides positions,
	// numbers, cell and pbc (Missing left 0: the writer counts it).
	Properties() []shard.Property
	// Len is the number of structures.
	Len() int64
	// Skipped names the input's keys that are not stored (text values),
	// for the converter's summary.
	Skipped() []string
	// Structures calls fn for every structure in order; an error from fn
	// stops the read and is returned.
	Structures(ctx context.Context, fn func(*Structure) error) error
	// Sources are the input files with their SHA-256.
	Sources() []SourceHash
	Close() error
}

// LabelKeys name the input keys that hold the labels MLIPs train on, as
// MACE's --energy_key, --forces_key and the like do: the key K's values
// are stored as the property of the canonical name (energy, forces,
// stress, virials, charge, spin). Keys left empty take the canonical name
// itself.
type LabelKeys struct {
	Energy, Forces, Stress, Virials, Charge, Spin string
}

// Canonical maps an input key to the property name it is stored under:
// a label key to its canonical name, anything else to itself; a canonical
// name whose label is read from another key is renamed out of the way
// ("energy" when --energy-key is REF_energy: "input:energy").
func (k LabelKeys) Canonical(key string) string {
	for _, c := range [...][2]string{{k.Energy, "energy"}, {k.Forces, "forces"}, {k.Stress, "stress"},
		{k.Virials, "virials"}, {k.Charge, "charge"}, {k.Spin, "spin"}} {
		from, to := c[0], c[1]
		if from == "" {
			from = to
		}
		if key == from {
			return to
		}
		if key == to {
			return "input:" + key
		}
	}
	return key
}

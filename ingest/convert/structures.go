package convert

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/augloader/augloader/atoms"
	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/asedb"
	"github.com/augloader/augloader/ingest/extxyz"
	"github.com/augloader/augloader/internal/ordered"
	"github.com/augloader/augloader/shard"
)

// StructureOptions configure the conversion of a set of 3D atomistic
// structures (format 4): the neighbour list computed once and stored, and
// which input keys hold the labels.
type StructureOptions struct {
	// Cutoff of the stored neighbour list, Å (default 6: a model may
	// take any cutoff up to it at serve time).
	Cutoff float64
	// Neighbours is the list's convention: "ase" (default; ASE, matscipy,
	// vesin, MACE) or "fairchem", with MaxNeighbors (0: no cap) and
	// Strict.
	Neighbours   string
	MaxNeighbors int
	Strict       bool
	// Keys name the labels' input keys (MACE's --energy_key, ...).
	Keys ingest.LabelKeys
	// Workers compute neighbour lists side by side (default GOMAXPROCS).
	Workers int
}

// DefaultCutoff is the stored neighbour list's default cutoff, Å.
const DefaultCutoff = 6.0

// convention is the neighbour-list convention the options name.
func (so StructureOptions) convention() (atoms.Convention, error) {
	switch so.Neighbours {
	case "", "ase":
		if so.MaxNeighbors != 0 || so.Strict {
			return atoms.Convention{}, errors.New("convert: --max-neighbors and --strict-max-neighbors take --neighbours fairchem")
		}
		return atoms.ConventionASE, nil
	case "fairchem":
		if so.MaxNeighbors < 0 {
			return atoms.Convention{}, fmt.Errorf("convert: --max-neighbors %d is negative", so.MaxNeighbors)
		}
		return atoms.ConventionFairchem(so.MaxNeighbors, so.Strict), nil
	}
	return atoms.Convention{}, fmt.Errorf("convert: --neighbours %q: want ase or fairchem", so.Neighbours)
}

// IsStructures reports whether the input at path is a set of structures
// (an extended XYZ file or a folder of them, an ASE database) rather than
// graphs.
func IsStructures(path string) bool {
	st, err := os.Stat(path)
	if err == nil && st.IsDir() {
		_, err := extxyz.Files(path)
		return err == nil
	}
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := f.Read(head)
	return extxyz.Recognise(path, head[:n]) || asedb.Recognise(head[:n])
}

// openStructures opens the input as the structure format that recognises it.
func openStructures(ctx context.Context, o Options) (ingest.StructureSet, error) {
	head := make([]byte, 16)
	if f, err := os.Open(o.Input); err == nil {
		n, _ := f.Read(head)
		head = head[:n]
		f.Close()
	}
	if asedb.Recognise(head) {
		return asedb.Open(ctx, o.Input, o.Structures.Keys)
	}
	return extxyz.Open(ctx, o.Input, o.Structures.Keys)
}

// runStructures converts a set of structures into format 4 shards: each
// structure's neighbour list computed once (o.Structures.Workers side by
// side), written in the input's order. On any error Out is untouched and
// the error names the file, line and field (a structure the neighbour list
// refuses: its first line).
func runStructures(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	so := o.Structures
	if so.Cutoff == 0 {
		so.Cutoff = DefaultCutoff
	}
	conv, err := so.convention()
	if err != nil {
		return nil, err
	}
	if so.Workers <= 0 {
		so.Workers = runtime.GOMAXPROCS(0)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if _, err := os.Lstat(o.Out); err == nil && !o.Force {
		return nil, fmt.Errorf("%w: %s (use --force to replace it)", shard.ErrExists, o.Out)
	}
	set, err := openStructures(ctx, o)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	readDone := time.Now()
	total := set.Len()
	log.Info("scanned structures", "structures", total, "properties", len(set.Properties()), "skipped", set.Skipped())
	name := o.Name
	if name == "" {
		name = trimExt(filepath.Base(o.Input))
	}
	spec := &shard.Structures{Cutoff: so.Cutoff, Neighbours: conv.Name, MaxNeighbors: conv.MaxNeighbors, Strict: conv.Strict,
		Properties: set.Properties()}
	w, err := shard.NewWriter(o.Out, shard.WriterOptions{Dataset: name, Structures: spec, Compression: o.Compression,
		ShardBytes: o.ShardBytes, Force: o.Force, Order: o.Order, Generation: o.Generation})
	if err != nil {
		return nil, err
	}
	if err := convertStructures(ctx, set, w, so, conv, o.Progress); err != nil {
		w.Abort()
		return nil, err
	}
	var m shard.Manifest
	for _, h := range set.Sources() {
		m.Sources = append(m.Sources, shard.Source{Name: h.Name, Bytes: h.Bytes, SHA256: h.SHA256})
	}
	if err := ctx.Err(); err != nil {
		w.Abort()
		return nil, err
	}
	man, err := w.FinishContext(ctx, m)
	if err != nil {
		w.Abort()
		return nil, err
	}
	res := &Result{Manifest: man, Elapsed: time.Since(start), ReadElapsed: readDone.Sub(start)}
	for _, s := range man.Sources {
		res.InputBytes += s.Bytes
	}
	return res, nil
}

func trimExt(name string) string {
	for _, ext := range []string{".gz", ".extxyz", ".xyz", ".db"} {
		if len(name) > len(ext) && name[len(name)-len(ext):] == ext {
			name = name[:len(name)-len(ext)]
		}
	}
	return name
}

// job is one structure on its way through the neighbour-list pool.
type job struct {
	g    shard.Graph
	cell [9]float64
	pbc  [3]bool
	file string
	line int64
	err  error
	list atoms.List
}

// convertStructures reads set, computes each structure's neighbour list on
// so.Workers goroutines (which also lay it out as the shard stores it) and
// appends the structures to w in order.
func convertStructures(ctx context.Context, set ingest.StructureSet, w *shard.Writer, so StructureOptions, conv atoms.Convention, progress func(done, total int)) error {
	done := 0
	return ordered.Run(ctx, so.Workers, func(p *ordered.Producer[job]) error {
		return set.Structures(p.Context(), func(s *ingest.Structure) error {
			j := p.Next()
			j.g = shard.Graph{ID: s.Index, NumNodes: int32(len(s.Numbers)), Numbers: append(j.g.Numbers[:0], s.Numbers...),
				Positions: append(j.g.Positions[:0], s.Positions...), Cell: append(j.g.Cell[:0], s.Cell[:]...),
				Props: grownProps(j.g.Props, len(s.Props)), Edges: j.g.Edges[:0], Shifts: j.g.Shifts[:0]}
			for k, p := range s.Props {
				j.g.Props[k] = append(j.g.Props[k][:0], p...)
			}
			j.cell, j.pbc, j.file, j.line, j.err = s.Cell, s.PBC, s.File, s.Line, nil
			for k, p := range s.PBC {
				if p {
					j.g.PBC |= 1 << k
				}
			}
			return p.Send()
		})
	}, func() func(*job) {
		var b atoms.Builder
		return func(j *job) {
			if j.err = b.Build(j.g.Positions, &j.cell, j.pbc, so.Cutoff, conv, &j.list); j.err != nil {
				return
			}
			l := &j.list
			m := l.Len()
			j.g.Edges = slices.Grow(j.g.Edges[:0], 2*m)[:2*m]
			j.g.Shifts = slices.Grow(j.g.Shifts[:0], 3*m)[:3*m]
			for e := range m {
				j.g.Edges[2*e], j.g.Edges[2*e+1] = l.I[e], l.J[e]
				s := l.S[3*e : 3*e+3 : 3*e+3]
				j.g.Shifts[3*e], j.g.Shifts[3*e+1], j.g.Shifts[3*e+2] = int8(s[0]), int8(s[1]), int8(s[2])
			}
		}
	}, func(j *job) error {
		if j.err != nil {
			return ingest.Errorf(set.Format(), j.file, j.line, 0, "structure %d: %v", j.g.ID, j.err)
		}
		if err := w.Append(&j.g); err != nil {
			return err
		}
		done++
		if progress != nil && (done&255 == 0 || done == int(set.Len())) {
			progress(done, int(set.Len()))
		}
		return nil
	})
}

func grownProps(p [][]float64, n int) [][]float64 {
	if cap(p) < n {
		q := make([][]float64, n)
		copy(q, p)
		return q
	}
	return p[:n]
}

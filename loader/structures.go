package loader

// Structures (format 4 shards): each structure of a batch read through the
// page cache, rotated and noised as the daemon is set, its stored
// neighbour list filtered to the served cutoff (or, under noise, built
// again for the noisy positions), collated into batch schema 3.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/augloader/augloader/atoms"
	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/internal/arrowx"
	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/wire"
)

// StructureConfig says what a daemon serving structures does to them.
type StructureConfig struct {
	// Rotate applies a uniform random rotation to each structure, keyed
	// by (seed, epoch, structure, aug.OpRotate): positions, cell, forces,
	// dipole turn, stress and virials as R σ Rᵀ; edges and shifts stay.
	Rotate bool
	// Noise, when positive, adds Gaussian noise of this σ (Å) to every
	// coordinate, keyed by (seed, epoch, structure, aug.OpNoise); the
	// displacements are served (the noise column) and the neighbour list
	// is built again for the noisy positions.
	Noise float64
	// Cutoff, when positive, serves the neighbour list under this cutoff
	// (Å): at most the stored one, whose pairs it filters by distance.
	// 0: the stored cutoff.
	Cutoff float64
}

// Canonical is the augmentation's canonical form (wire.MetaAugment).
func (c StructureConfig) Canonical() string {
	var parts []string
	if c.Rotate {
		parts = append(parts, "rotate")
	}
	if c.Noise > 0 {
		parts = append(parts, "noise="+strconv.FormatFloat(c.Noise, 'g', -1, 64))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// structures is what serving a structure set needs, fixed at New.
type structures struct {
	spec   *shard.Structures
	cfg    StructureConfig
	cutoff float64 // served
	conv   atoms.Convention
	info   wire.StructureInfo
}

func newStructures(man *shard.Manifest, cfg StructureConfig) (*structures, error) {
	s := man.Structures
	if s == nil {
		if cfg != (StructureConfig{}) {
			return nil, fmt.Errorf("loader: rotations, noise and a cutoff are for structures; %s holds graphs", man.Dataset)
		}
		return nil, nil
	}
	st := &structures{spec: s, cfg: cfg, cutoff: s.Cutoff}
	switch {
	case math.IsNaN(cfg.Noise) || cfg.Noise < 0 || cfg.Noise > 10:
		return nil, fmt.Errorf("loader: noise σ %v Å: want 0..10", cfg.Noise)
	case cfg.Cutoff < 0 || math.IsNaN(cfg.Cutoff):
		return nil, fmt.Errorf("loader: cutoff %v Å", cfg.Cutoff)
	case cfg.Cutoff > s.Cutoff:
		return nil, fmt.Errorf("loader: cutoff %g Å is above the %g Å the shards' neighbour lists were built with (shardconv convert --cutoff %g builds them for it)", cfg.Cutoff, s.Cutoff, cfg.Cutoff)
	case cfg.Cutoff > 0:
		st.cutoff = cfg.Cutoff
	}
	st.conv = atoms.ConventionASE
	if s.Neighbours == "fairchem" {
		st.conv = atoms.ConventionFairchem(s.MaxNeighbors, s.Strict)
	}
	st.info = wire.StructureInfo{Dataset: man.Dataset, Cutoff: st.cutoff, Neighbours: s.Neighbours,
		Augment: cfg.Canonical(), Noise: cfg.Noise > 0}
	for _, p := range s.Properties {
		st.info.Properties = append(st.info.Properties, wire.StructureProperty{Name: p.Name, Per: p.Per, Size: p.Size})
	}
	return st, nil
}

// schema is the stream's schema for req.
func (st *structures) schema(req wire.Request) *arrow.Schema {
	info := st.info
	info.Epoch, info.Rank, info.World = req.Epoch, req.Rank, req.World
	return wire.StructureSchema(info)
}

// structCollator accumulates one structure batch's columns; like
// collator, its slices back the record batch it builds.
type structCollator struct {
	ids                    []int64
	natoms                 []int32
	padded                 []bool
	numbers                []uint8
	pos, cell, noise       []float64
	atOff, posOff, cellOff []int32
	pbc                    []uint8
	src, dst               []int64
	unit, shifts           []float64
	eOff, shOff            []int32
	props                  [][]float64
	propOff                [][]int32
	base                   int64
}

func (c *structCollator) reset(nprops int) {
	c.ids, c.natoms, c.padded = c.ids[:0], c.natoms[:0], c.padded[:0]
	c.numbers, c.pos, c.cell, c.noise, c.pbc = c.numbers[:0], c.pos[:0], c.cell[:0], c.noise[:0], c.pbc[:0]
	c.atOff, c.posOff, c.cellOff = append(c.atOff[:0], 0), append(c.posOff[:0], 0), append(c.cellOff[:0], 0)
	c.src, c.dst, c.unit, c.shifts = c.src[:0], c.dst[:0], c.unit[:0], c.shifts[:0]
	c.eOff, c.shOff = append(c.eOff[:0], 0), append(c.shOff[:0], 0)
	if len(c.props) != nprops {
		c.props, c.propOff = make([][]float64, nprops), make([][]int32, nprops)
	}
	for k := range c.props {
		c.props[k] = c.props[k][:0]
		c.propOff[k] = append(c.propOff[k][:0], 0)
	}
	c.base = 0
}

// structWork is a worker's reusable state for structures.
type structWork struct {
	pcg  rand.PCG
	rnd  *rand.Rand
	nl   atoms.Builder
	list atoms.List
}

// buildStructures collates batch b of structures.
func (w *worker) buildStructures(ctx context.Context, col *collator, b int) (rec arrow.RecordBatch, err error) {
	defer func() {
		if p := recover(); p != nil {
			rec, err = nil, fmt.Errorf("loader: structure batch %d: panic: %v", b, p)
		}
	}()
	st := w.l.st
	sc := &col.st
	sc.reset(len(st.spec.Properties))
	if w.sw == nil {
		w.sw = &structWork{}
		w.sw.rnd = rand.New(&w.sw.pcg)
	}
	for _, it := range w.p.Batches[b] {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		err := w.l.src.pinStructure(ctx, w.pages, b, it.Graph, func(g *shard.Graph) error {
			return w.addStructure(sc, st, g, it.Pass, it.Padded)
		})
		if err != nil {
			return nil, &GraphError{Graph: it.Graph, Policy: st.info.Augment, Err: err}
		}
	}
	return sc.record(w.p.Schema, len(st.spec.Properties), st.cfg.Noise > 0), nil
}

// addStructure appends structure g (drawn in pass) to the batch.
func (w *worker) addStructure(c *structCollator, st *structures, g *shard.Graph, pass uint64, padded bool) error {
	sw := w.sw
	seed := w.l.cfg.Seed
	n := int(g.NumNodes)
	c.ids = append(c.ids, g.ID)
	c.natoms = append(c.natoms, g.NumNodes)
	c.padded = append(c.padded, padded)
	c.numbers = append(c.numbers, g.Numbers...)
	c.atOff = append(c.atOff, int32(len(c.numbers)))
	c.pbc = append(c.pbc, g.PBC)

	var R atoms.Rotation
	if st.cfg.Rotate {
		sw.pcg.Seed(aug.Stream(seed, pass, g.ID, aug.OpRotate))
		R = atoms.RandomRotation(sw.rnd)
		c.pos = R.Vectors(c.pos, g.Positions)
		c.cell = R.Vectors(c.cell, g.Cell)
	} else {
		c.pos = append(c.pos, g.Positions...)
		c.cell = append(c.cell, g.Cell...)
	}
	p0 := len(c.pos) - 3*n
	cell := c.cell[len(c.cell)-9:]
	if st.cfg.Noise > 0 {
		sw.pcg.Seed(aug.Stream(seed, pass, g.ID, aug.OpNoise))
		for k := range 3 * n {
			d := st.cfg.Noise * sw.rnd.NormFloat64()
			c.pos[p0+k] += d
			c.noise = append(c.noise, d)
		}
	}
	c.posOff = append(c.posOff, int32(len(c.pos)))
	c.cellOff = append(c.cellOff, int32(len(c.cell)))

	if err := w.structureEdges(c, st, g, p0, cell); err != nil {
		return err
	}
	c.eOff = append(c.eOff, int32(len(c.src)))
	c.shOff = append(c.shOff, int32(len(c.unit)))

	for k, p := range st.spec.Properties {
		v := g.Props[k]
		vector, tensor := atoms.Equivariant(p.Name, p.Size)
		switch {
		case len(v) == 0 || !st.cfg.Rotate || !(vector || tensor):
			c.props[k] = append(c.props[k], v...)
		case vector:
			c.props[k] = R.Vectors(c.props[k], v)
		default:
			c.props[k] = R.Tensor(c.props[k], v)
		}
		c.propOff[k] = append(c.propOff[k], int32(len(c.props[k])))
	}
	c.base += int64(n)
	return nil
}

// structureEdges appends g's edges: under noise its list built again for
// the positions served (from p0 in c.pos); else the stored one, filtered
// to the served cutoff.
func (w *worker) structureEdges(c *structCollator, st *structures, g *shard.Graph, p0 int, cell []float64) error {
	sw := w.sw
	if st.cfg.Noise > 0 {
		var cl [9]float64
		copy(cl[:], cell)
		pbc := [3]bool{g.PBC&1 != 0, g.PBC&2 != 0, g.PBC&4 != 0}
		if err := sw.nl.Build(c.pos[p0:], &cl, pbc, st.cutoff, st.conv, &sw.list); err != nil {
			return err
		}
		l := &sw.list
		for e := range l.Len() {
			c.appendEdge(int64(l.I[e]), int64(l.J[e]), float64(l.S[3*e]), float64(l.S[3*e+1]), float64(l.S[3*e+2]), cell)
		}
	} else {
		filter := st.cutoff < st.spec.Cutoff
		rc2 := st.cutoff * st.cutoff
		for e := 0; e < len(g.Edges); e += 2 {
			i, j := int64(g.Edges[e]), int64(g.Edges[e+1])
			s := g.Shifts[3*(e/2) : 3*(e/2)+3]
			s0, s1, s2 := float64(s[0]), float64(s[1]), float64(s[2])
			if filter {
				// Distance in the stored frame (a rotation keeps it).
				var r2 float64
				for k := range 3 {
					d := g.Positions[3*j+int64(k)] - g.Positions[3*i+int64(k)] + s0*g.Cell[k] + s1*g.Cell[3+k] + s2*g.Cell[6+k]
					r2 += d * d
				}
				if r2 >= rc2 && !(st.conv.IncludeCutoff && r2 == rc2) {
					continue
				}
			}
			c.appendEdge(i, j, s0, s1, s2, cell)
		}
	}
	return nil
}

// appendEdge appends edge (i, j) of the current structure with shift S:
// unit_shifts S and shifts S·cell.
func (c *structCollator) appendEdge(i, j int64, s0, s1, s2 float64, cell []float64) {
	c.src = append(c.src, c.base+i)
	c.dst = append(c.dst, c.base+j)
	c.unit = append(c.unit, s0, s1, s2)
	c.shifts = append(c.shifts,
		s0*cell[0]+s1*cell[3]+s2*cell[6],
		s0*cell[1]+s1*cell[4]+s2*cell[7],
		s0*cell[2]+s1*cell[5]+s2*cell[8])
}

// record wraps the columns as an Arrow record batch in the order of
// wire.StructureSchema.
func (c *structCollator) record(schema *arrow.Schema, nprops int, noise bool) arrow.RecordBatch {
	n := len(c.ids)
	f64, i64 := arrow.PrimitiveTypes.Float64, arrow.PrimitiveTypes.Int64
	cols := []arrow.Array{
		arrowx.Primitive(i64, n, arrow.Int64Traits.CastToBytes(c.ids)),
		arrowx.Primitive(arrow.PrimitiveTypes.Int32, n, arrow.Int32Traits.CastToBytes(c.natoms)),
		arrowx.List(arrow.PrimitiveTypes.Uint8, c.atOff, len(c.numbers), c.numbers),
		arrowx.List(f64, c.posOff, len(c.pos), arrow.Float64Traits.CastToBytes(c.pos)),
		arrowx.List(f64, c.cellOff, len(c.cell), arrow.Float64Traits.CastToBytes(c.cell)),
		arrowx.Primitive(arrow.PrimitiveTypes.Uint8, n, c.pbc),
		arrowx.List(i64, c.eOff, len(c.src), arrow.Int64Traits.CastToBytes(c.src)),
		arrowx.List(i64, c.eOff, len(c.dst), arrow.Int64Traits.CastToBytes(c.dst)),
		arrowx.List(f64, c.shOff, len(c.unit), arrow.Float64Traits.CastToBytes(c.unit)),
		arrowx.List(f64, c.shOff, len(c.shifts), arrow.Float64Traits.CastToBytes(c.shifts)),
	}
	for k := range nprops {
		cols = append(cols, arrowx.List(f64, c.propOff[k], len(c.props[k]), arrow.Float64Traits.CastToBytes(c.props[k])))
	}
	if noise {
		cols = append(cols, arrowx.List(f64, c.posOff, len(c.noise), arrow.Float64Traits.CastToBytes(c.noise)))
	}
	cols = append(cols, arrowx.Bools(memory.DefaultAllocator, c.padded))
	return arrowx.Record(schema, n, cols)
}

// pinStructure pins structure id (through the stream's page schedule when
// there is one) and calls fn with it, released after.
func (s *Source) pinStructure(ctx context.Context, pages *shard.Schedule, b int, id int64, fn func(*shard.Graph) error) error {
	var sg shard.Graph
	if pages != nil {
		var pin shard.Pinned
		var err error
		if sg, pin, err = pages.Pin(ctx, b, id); err != nil {
			return err
		}
		defer pin.Release(nil)
	} else {
		var release func()
		var err error
		if sg, release, err = s.ds.r.Pin(ctx, id); err != nil {
			return err
		}
		defer release()
	}
	if err := s.ds.checkSize(id, &sg); err != nil {
		return err
	}
	return fn(&sg)
}

// structureBytes bounds a structure batch's collated size: per atom its
// number, positions (and noise), its properties; per edge two ids, the
// unit shift and shift; per structure the cell and its offsets.
func (st *structures) batchBytes(bounds []aug.Size) int64 {
	perAtom, perEdge, perStruct := int64(1+24+4+4), int64(16+48), int64(8+4+72+1+1+6*4)
	if st.cfg.Noise > 0 {
		perAtom += 24
	}
	for _, p := range st.spec.Properties {
		if p.Per == shard.PerAtom {
			perAtom += 8 * int64(p.Size)
		} else {
			perStruct += 8*int64(p.Size) + 4
		}
	}
	var b int64
	for _, s := range bounds {
		b += int64(s.Nodes)*perAtom + int64(s.Edges)*perEdge + perStruct
	}
	return b
}

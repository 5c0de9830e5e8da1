package wire

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Batch schema 3: 3D atomistic structures (docs/protocol.md, "Batch schema
// 3"). One row per structure; every list column's values flatten, without
// a loop over structures, into the tensors interatomic-potential models
// take: edge_src/edge_dst are batch-global atom ids (int64: MACE's and
// fairchem's edge_index rows), unit_shifts and shifts 3 float64 per edge
// (the integer cell shift S and S·cell, in the cell served), positions 3
// per atom, cell 9 per structure (its rows), properties as the shards
// hold them.
const (
	ColNumbers    = "numbers"
	ColPositions  = "positions"
	ColCell       = "cell"
	ColPBC        = "pbc"
	ColUnitShifts = "unit_shifts"
	ColShifts     = "shifts"
	// ColNoise, when the daemon adds position noise, is each atom's
	// displacement (3 per atom, Å): a denoising objective's target.
	ColNoise = "noise"
	// ColPropPrefix names a property's column: "prop." and its name.
	ColPropPrefix = "prop."
)

// StructureSchemaVersion is batch schema 3's MetaProtocolVersion.
const StructureSchemaVersion = 3

// Schema-metadata keys of a structure stream (with MetaProtocolVersion
// "3", MetaDataset, MetaFeatureKind "structures", MetaEpoch, MetaRank,
// MetaWorld).
const (
	// MetaCutoff is the served neighbour list's cutoff (Å), shortest form.
	MetaCutoff = "augloader.cutoff"
	// MetaNeighbours is its convention (ase or fairchem).
	MetaNeighbours = "augloader.neighbours"
	// MetaProperties lists the property columns, comma-separated, each
	// NAME:PER:SIZE (PER structure or atom).
	MetaProperties = "augloader.properties"
	// MetaAugment is the augmentation applied ("none", or
	// "rotate", "noise=SIGMA", comma-separated).
	MetaAugment = "augloader.augment"
)

// StructureProperty is one property column of a structure stream.
type StructureProperty struct {
	Name string
	Per  string // "structure" or "atom"
	Size int
}

// StructureInfo is what a structure stream's schema says.
type StructureInfo struct {
	Dataset     string
	Epoch       uint64
	Rank, World int
	Cutoff      float64
	Neighbours  string
	Properties  []StructureProperty
	// Augment is the canonical augmentation ("none", "rotate",
	// "noise=0.05", "rotate,noise=0.05"); Noise adds the noise column.
	Augment string
	Noise   bool
}

// StructureSchema is the schema of every record batch of a structure
// stream.
func StructureSchema(s StructureInfo) *arrow.Schema {
	list := func(t arrow.DataType) arrow.DataType { return arrow.ListOfNonNullable(t) }
	f64, i64 := arrow.PrimitiveTypes.Float64, arrow.PrimitiveTypes.Int64
	fields := []arrow.Field{
		{Name: ColGraphID, Type: i64},
		{Name: ColNumNodes, Type: arrow.PrimitiveTypes.Int32},
		{Name: ColNumbers, Type: list(arrow.PrimitiveTypes.Uint8)},
		{Name: ColPositions, Type: list(f64)},
		{Name: ColCell, Type: list(f64)},
		{Name: ColPBC, Type: arrow.PrimitiveTypes.Uint8},
		{Name: ColEdgeSrc, Type: list(i64)},
		{Name: ColEdgeDst, Type: list(i64)},
		{Name: ColUnitShifts, Type: list(f64)},
		{Name: ColShifts, Type: list(f64)},
	}
	for _, p := range s.Properties {
		fields = append(fields, arrow.Field{Name: ColPropPrefix + p.Name, Type: list(f64)})
	}
	if s.Noise {
		fields = append(fields, arrow.Field{Name: ColNoise, Type: list(f64)})
	}
	fields = append(fields, arrow.Field{Name: ColPadded, Type: arrow.FixedWidthTypes.Boolean})
	props := make([]string, len(s.Properties))
	for i, p := range s.Properties {
		props[i] = fmt.Sprintf("%s:%s:%d", p.Name, p.Per, p.Size)
	}
	md := arrow.NewMetadata(
		[]string{MetaProtocolVersion, MetaDataset, MetaFeatureKind, MetaEpoch, MetaRank, MetaWorld,
			MetaCutoff, MetaNeighbours, MetaProperties, MetaAugment},
		[]string{strconv.Itoa(StructureSchemaVersion), s.Dataset, "structures", strconv.FormatUint(s.Epoch, 10),
			strconv.Itoa(s.Rank), strconv.Itoa(s.World), strconv.FormatFloat(s.Cutoff, 'g', -1, 64), s.Neighbours,
			strings.Join(props, ","), s.Augment},
	)
	return arrow.NewSchema(fields, &md)
}

// IsStructures reports whether a stream's schema is batch schema 3's.
func IsStructures(s *arrow.Schema) bool {
	if s == nil {
		return false
	}
	md := s.Metadata()
	i := md.FindKey(MetaFeatureKind)
	return i >= 0 && md.Values()[i] == "structures"
}

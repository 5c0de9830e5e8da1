package ingest

import (
	"fmt"
	"strconv"
)

// Limits bound what an input may make a reader hold, so that memory
// follows the data and not what a file declares: a graph's node count
// with nothing behind it, an edge listed a million times, a column count,
// a pickle, a compressed stream. Each is checked where the reader first
// learns the number, before anything is allocated for it, and crossing one
// is a *FormatError naming the file, the row and the field, and the flag
// of shardconv convert that raises it (docs/format.md, "Limits").
type Limits struct {
	// MaxNodes bounds one graph's nodes (--max-graph-nodes).
	MaxNodes int64
	// MaxEdges bounds one graph's edge listings, before duplicates and
	// self-loops are dropped (--max-graph-edges).
	MaxEdges int64
	// MaxColumns bounds a feature file's columns (--max-columns).
	MaxColumns int
	// MaxPickle bounds a split file's pickle, in bytes (--max-pickle).
	MaxPickle int64
	// Expansion bounds what compressed bytes may inflate to
	// (--max-expansion sets its ratio).
	Expansion Expansion
}

// DefaultLimits hold every dataset we know of with room to spare: the
// 233k-node Reddit graph has 114.6 million edge listings, FRANKENSTEIN
// 780 attribute columns, ogbg-ppa's split pickle a few megabytes.
var DefaultLimits = Limits{
	MaxNodes:   1 << 24,
	MaxEdges:   1 << 28,
	MaxColumns: 4096,
	MaxPickle:  256 << 20,
	Expansion:  DefaultExpansion,
}

// WithDefaults fills the limits left at zero.
func (l Limits) WithDefaults() Limits {
	if l.MaxNodes <= 0 {
		l.MaxNodes = DefaultLimits.MaxNodes
	}
	if l.MaxEdges <= 0 {
		l.MaxEdges = DefaultLimits.MaxEdges
	}
	if l.MaxColumns <= 0 {
		l.MaxColumns = DefaultLimits.MaxColumns
	}
	if l.MaxPickle <= 0 {
		l.MaxPickle = DefaultLimits.MaxPickle
	}
	if l.Expansion.Ratio <= 0 {
		l.Expansion = DefaultExpansion
	}
	return l
}

// CheckNodes refuses a graph of more than MaxNodes nodes, naming the
// file, its line (or row) and field.
func (l Limits) CheckNodes(format, file string, line int64, field int, graph int64, n int64) error {
	if limit := l.WithDefaults().MaxNodes; n > limit {
		return Errorf(format, file, line, field, "graph %d declares %d nodes, more than the limit of %d (shardconv convert --max-graph-nodes raises it)", graph, n, limit)
	}
	return nil
}

// CheckEdges refuses a graph of more than MaxEdges edge listings.
func (l Limits) CheckEdges(format, file string, line int64, field int, graph int64, m int64) error {
	if limit := l.WithDefaults().MaxEdges; m > limit {
		return Errorf(format, file, line, field, "graph %d lists %d edges, more than the limit of %d (shardconv convert --max-graph-edges raises it)", graph, m, limit)
	}
	return nil
}

// CheckColumns refuses a feature file of more than MaxColumns columns.
func (l Limits) CheckColumns(format, file string, line int64, cols int64) error {
	if limit := int64(l.WithDefaults().MaxColumns); cols > limit {
		return Errorf(format, file, line, 0, "%d feature columns, more than the limit of %d (shardconv convert --max-columns raises it)", cols, limit)
	}
	return nil
}

// String lists the limits, for logs.
func (l Limits) String() string {
	l = l.WithDefaults()
	return fmt.Sprintf("nodes %d, edges %d, columns %d, pickle %d bytes, expansion %d×", l.MaxNodes, l.MaxEdges, l.MaxColumns, l.MaxPickle, l.Expansion.Ratio)
}

// ExactInt refuses an integer a float64 cannot hold exactly (beyond
// ±2^53): readers carry values as float64, and two such labels would
// become one class.
func ExactInt(v int64) error {
	if v >= 1<<53 || v <= -(1<<53) {
		return BeyondFloat64(strconv.FormatInt(v, 10))
	}
	return nil
}

// ExactUint is ExactInt for an unsigned value.
func ExactUint(v uint64) error {
	if v >= 1<<53 {
		return BeyondFloat64(strconv.FormatUint(v, 10))
	}
	return nil
}

// BeyondFloat64 is ExactInt's error for the integer written as digits.
func BeyondFloat64(digits string) error {
	return fmt.Errorf("integer %s is beyond ±2^53, what a float64 holds exactly (two such labels would become one)", digits)
}

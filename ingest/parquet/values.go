package parquet

// A column's values as numbers, exactly: matrices, labels, counts.

import (
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/augloader/augloader/ingest"
)

// matrix is a list<list<number>> column: rows of a graph, fields of a row.
type matrix struct {
	rows, inner array.ListLike
	at          func(int) float64
	nullAt      func(int) bool
}

func newMatrix(a arrow.Array) (matrix, error) {
	var m matrix
	var ok bool
	if a == nil {
		return m, errors.New("the column is missing from this file")
	}
	if m.rows, ok = a.(array.ListLike); !ok {
		return m, fmt.Errorf("a %s, not a list of lists", a.DataType())
	}
	if m.inner, ok = m.rows.ListValues().(array.ListLike); !ok {
		return m, fmt.Errorf("a %s, not a list of lists", a.DataType())
	}
	leaf := m.inner.ListValues()
	at, _, err := numbers(leaf)
	m.at, m.nullAt = at, leaf.IsNull
	return m, err
}

// pairLen is the number of sources edge_index row i lists (0 when it is
// not two lists: pair says why).
func (m matrix) pairLen(i int) int {
	if m.rows.IsNull(i) {
		return 0
	}
	s, e := m.rows.ValueOffsets(i)
	if e-s != 2 {
		return 0
	}
	a0, a1 := m.inner.ValueOffsets(int(s))
	return int(a1 - a0)
}

// pair appends edge_index row i's two lists, sources and targets, to src
// and dst.
func (m matrix) pair(i int, src, dst []float64) ([]float64, []float64, error) {
	if m.rows.IsNull(i) {
		return nil, nil, fmt.Errorf("null")
	}
	s, e := m.rows.ValueOffsets(i)
	if e-s != 2 {
		return nil, nil, fmt.Errorf("%d lists, want 2 (sources, targets)", e-s)
	}
	a0, a1 := m.inner.ValueOffsets(int(s))
	b0, b1 := m.inner.ValueOffsets(int(s + 1))
	if a1-a0 != b1-b0 {
		return nil, nil, fmt.Errorf("%d sources and %d targets", a1-a0, b1-b0)
	}
	for k := range int(a1 - a0) {
		if m.nullAt(int(a0)+k) || m.nullAt(int(b0)+k) {
			return nil, nil, fmt.Errorf("edge %d: null node id", k)
		}
		src, dst = append(src, m.at(int(a0)+k)), append(dst, m.at(int(b0)+k))
	}
	return src, dst, nil
}

// numbers reads an array of numbers as float64, saying whether its type
// is an integer (or bool) type.
func numbers(a arrow.Array) (func(int) float64, bool, error) {
	short := func(n int) error {
		if n < a.Len() {
			return fmt.Errorf("a damaged column: %d values of %d", n, a.Len())
		}
		return nil
	}
	switch x := a.(type) {
	case *array.Int64:
		return func(i int) float64 { return float64(x.Value(i)) }, true, short(len(x.Int64Values()))
	case *array.Int32:
		return func(i int) float64 { return float64(x.Value(i)) }, true, short(len(x.Int32Values()))
	case *array.Int16:
		return func(i int) float64 { return float64(x.Value(i)) }, true, short(len(x.Int16Values()))
	case *array.Int8:
		return func(i int) float64 { return float64(x.Value(i)) }, true, short(len(x.Int8Values()))
	case *array.Uint64:
		return func(i int) float64 { return float64(x.Value(i)) }, true, short(len(x.Uint64Values()))
	case *array.Uint32:
		return func(i int) float64 { return float64(x.Value(i)) }, true, short(len(x.Uint32Values()))
	case *array.Uint16:
		return func(i int) float64 { return float64(x.Value(i)) }, true, short(len(x.Uint16Values()))
	case *array.Uint8:
		return func(i int) float64 { return float64(x.Value(i)) }, true, short(len(x.Uint8Values()))
	case *array.Float64:
		return func(i int) float64 { return x.Value(i) }, false, short(len(x.Float64Values()))
	case *array.Float32:
		return func(i int) float64 { return float64(x.Value(i)) }, false, short(len(x.Float32Values()))
	case *array.Float16:
		return func(i int) float64 { return float64(x.Value(i).Float32()) }, false, short(len(x.Values()))
	case *array.Boolean:
		bufs := x.Data().Buffers()
		if len(bufs) < 2 || bufs[1] == nil || bufs[1].Len()*8 < x.Data().Offset()+x.Len() {
			return nil, false, fmt.Errorf("a damaged column: too few values")
		}
		return func(i int) float64 {
			if x.Value(i) {
				return 1
			}
			return 0
		}, true, nil
	}
	return nil, false, fmt.Errorf("%s values, not numbers", a.DataType())
}

// validate checks a list column's offsets against its values, at every
// level, before any is followed: a damaged file can decode to lists whose
// offsets point past their values.
func validate(a arrow.Array) error {
	for {
		l, ok := a.(array.ListLike)
		if !ok {
			return nil
		}
		if v, ok := a.(interface{ ValidateFull() error }); ok {
			if err := v.ValidateFull(); err != nil {
				return fmt.Errorf("a damaged column: %v", err)
			}
		}
		a = l.ListValues()
	}
}

// rowVals is one graph's labels.
type rowVals struct {
	vals []float64
	ints bool
}

// label reads row i of y: a number, a list of numbers, or a list holding
// one list of numbers; nulls are missing (NaN).
func (r *rowVals) label(a arrow.Array, i int) error {
	r.vals, r.ints = r.vals[:0], true
	if a.IsNull(i) {
		return fmt.Errorf("null (a missing target is a null inside the list)")
	}
	l, ok := a.(array.ListLike)
	if !ok {
		at, isInt, err := numbers(a)
		if err != nil {
			return err
		}
		if err := exact(a, i); err != nil {
			return err
		}
		r.vals, r.ints = append(r.vals, at(i)), isInt
		return nil
	}
	s, e := l.ValueOffsets(i)
	vals := l.ListValues()
	if inner, ok := vals.(array.ListLike); ok {
		if e-s != 1 {
			return fmt.Errorf("%d lists, want one list of targets", e-s)
		}
		s, e = inner.ValueOffsets(int(s))
		vals = inner.ListValues()
	}
	at, isInt, err := numbers(vals)
	if err != nil {
		return err
	}
	r.ints = isInt
	for k := s; k < e; k++ {
		if vals.IsNull(int(k)) {
			r.vals, r.ints = append(r.vals, math.NaN()), false
			continue
		}
		if err := exact(vals, int(k)); err != nil {
			return err
		}
		r.vals = append(r.vals, at(int(k)))
	}
	return nil
}

// exact refuses value i of a when a float64 cannot hold it: an integer
// beyond ±2^53 (two such labels would become one class) or an infinity.
func exact(a arrow.Array, i int) error {
	switch x := a.(type) {
	case *array.Int64:
		return ingest.ExactInt(x.Value(i))
	case *array.Uint64:
		return ingest.ExactUint(x.Value(i))
	case *array.Float64:
		if math.IsInf(x.Value(i), 0) {
			return fmt.Errorf("%v is not a finite number", x.Value(i))
		}
	case *array.Float32:
		if math.IsInf(float64(x.Value(i)), 0) {
			return fmt.Errorf("%v is not a finite number", x.Value(i))
		}
	}
	return nil
}

// nodeCount reads a graph's node count: num_nodes, or node_feat's rows.
func nodeCount(a arrow.Array, i int) (int32, error) {
	if a.IsNull(i) {
		return 0, fmt.Errorf("null")
	}
	if l, ok := a.(array.ListLike); ok {
		s, e := l.ValueOffsets(i)
		return int32(e - s), nil
	}
	at, isInt, err := numbers(a)
	if err != nil {
		return 0, err
	}
	v := at(i)
	if !isInt || v < 0 || v > math.MaxInt32/2 {
		return 0, fmt.Errorf("%v is not a node count", v)
	}
	return int32(v), nil
}

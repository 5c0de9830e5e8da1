// Package arrowx wraps Go slices as Arrow arrays without copying: the
// shard writer and the batch collator build record batches this way. The
// arrays reference the slices; the caller must not modify them until the
// record batch is written and released. It also holds the one rule for
// categorical codes stored narrow (shard format 3, batch schema 2): their
// width, Arrow type and bytes.
package arrowx

import (
	"encoding/binary"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Primitive is a non-null array of n fixed-width values stored in data.
func Primitive(dt arrow.DataType, n int, data []byte) arrow.Array {
	d := array.NewData(dt, n, []*memory.Buffer{nil, memory.NewBufferBytes(data)}, nil, 0, 0)
	defer d.Release()
	return array.MakeFromData(d)
}

// List is a non-null list<elem> array (items non-null) with the given
// int32 offsets (len rows+1, from 0) over nvals values stored in vals.
func List(elem arrow.DataType, offsets []int32, nvals int, vals []byte) arrow.Array {
	child := array.NewData(elem, nvals, []*memory.Buffer{nil, memory.NewBufferBytes(vals)}, nil, 0, 0)
	defer child.Release()
	d := array.NewData(arrow.ListOfNonNullable(elem), len(offsets)-1,
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets))},
		[]arrow.ArrayData{child}, 0, 0)
	defer d.Release()
	return array.MakeFromData(d)
}

// CodeWidth is the narrowest code width (1, 2 or 4 bytes) holding codes
// 0..maxCode.
func CodeWidth(maxCode int64) int {
	switch {
	case maxCode < 1<<8:
		return 1
	case maxCode < 1<<16:
		return 2
	}
	return 4
}

// CodeType is the Arrow type of codes width bytes wide: uint8, uint16 or
// int32.
func CodeType(width int) arrow.DataType {
	switch width {
	case 1:
		return arrow.PrimitiveTypes.Uint8
	case 2:
		return arrow.PrimitiveTypes.Uint16
	}
	return arrow.PrimitiveTypes.Int32
}

// AppendCodes appends codes to b, width bytes each, little endian (the
// layout of a CodeType(width) array's values).
func AppendCodes(b []byte, codes []int32, width int) []byte {
	switch width {
	case 1:
		for _, v := range codes {
			b = append(b, byte(v))
		}
	case 2:
		for _, v := range codes {
			b = binary.LittleEndian.AppendUint16(b, uint16(v))
		}
	default:
		for _, v := range codes {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
	}
	return b
}

// Record is a record batch of n rows over cols, which it takes over: the
// caller's references to them are released, the batch holds its own.
func Record(schema *arrow.Schema, n int, cols []arrow.Array) arrow.RecordBatch {
	rec := array.NewRecordBatch(schema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// Bools is a non-null boolean array of vals (bit-packed, so copied).
func Bools(mem memory.Allocator, vals []bool) arrow.Array {
	b := array.NewBooleanBuilder(mem)
	defer b.Release()
	b.AppendValues(vals, nil)
	return b.NewArray()
}

// Package arrowx wraps Go slices as Arrow arrays without copying: the
// shard writer and the batch collator build record batches this way. The
// arrays reference the slices; the caller must not modify them until the
// record batch is written and released.
package arrowx

import (
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

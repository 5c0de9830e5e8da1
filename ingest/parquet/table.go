package parquet

// One Parquet file read by bounded record batches, under an allocator
// that refuses what the file's size cannot justify.

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/augloader/augloader/internal/arrowx"
)

// table is one Parquet file.
type table struct {
	shown  string
	fr     *pqarrow.FileReader
	close  func() error
	rows   int64
	leaves map[string]int // a column's leaf index
	first  int64          // the id of its first graph
	mem    *boundedAllocator
}

func (d *Dataset) openTable(entry string) (*table, error) {
	fh, _, err := d.files.OpenRandom(entry, entry)
	if err != nil {
		return nil, err
	}
	// What the decoder holds is bounded as a decompressed stream is: a
	// Parquet file's dictionary and run-length encodings turn a few
	// kilobytes into gigabytes of values (7.6 KB of dictionary-encoded
	// lists decoded to 2.7 GiB).
	lim, in := d.files.Limit()
	bound := lim.Bound(in)
	mem := newBoundedAllocator(min(bound, (1<<62)/decoderFactor)*decoderFactor, bound, lim.Ratio, in)
	var pf *file.Reader
	err = guard(entry, 0, func() (err error) {
		pf, err = file.NewParquetReader(fh, file.WithReadProps(parquet.NewReaderProperties(mem)))
		return err
	})
	if err != nil {
		fh.Close()
		return nil, formatErr(entry, 0, "not a readable Parquet file: %v", err)
	}
	t := &table{shown: entry, close: func() error { pf.Close(); return fh.Close() }, rows: pf.NumRows(), leaves: map[string]int{}, mem: mem}
	err = guard(entry, 0, func() (err error) {
		t.fr, err = pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: batchRows}, mem)
		return err
	})
	if err != nil {
		t.close()
		return nil, formatErr(entry, 0, "Parquet schema: %v", err)
	}
	sc := pf.MetaData().Schema
	for i := range sc.NumColumns() {
		top := sc.Column(i).ColumnPath()[0]
		if _, dup := t.leaves[top]; dup {
			t.leaves[top] = -1 // a struct column: not one of ours
			continue
		}
		t.leaves[top] = i
	}
	for _, c := range []string{colEdges, colLabel} {
		if !hasLeaf(t, c) {
			t.close()
			return nil, formatErr(entry, 0, "no %s column (the columns are %s)", c, strings.Join(t.columnNames(), ", "))
		}
	}
	if !hasLeaf(t, colNodes) && !hasLeaf(t, colNodeFeat) {
		t.close()
		return nil, formatErr(entry, 0, "neither num_nodes nor node_feat: the node count of a graph is unknown")
	}
	return t, nil
}

func hasLeaf(t *table, col string) bool {
	i, ok := t.leaves[col]
	return ok && i >= 0
}

func (t *table) columnNames() []string {
	var out []string
	for k := range t.leaves {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// read calls fn with every record batch of cols (the columns present),
// and the row of the file its first row is.
func (t *table) read(ctx context.Context, cols []string, fn func(rec arrow.RecordBatch, row int64) error) error {
	var idx []int
	for _, c := range cols {
		if hasLeaf(t, c) {
			idx = append(idx, t.leaves[c])
		}
	}
	var rr pqarrow.RecordReader
	err := guard(t.shown, 0, func() (err error) { rr, err = t.fr.GetRecordReader(ctx, idx, nil); return err })
	if err != nil {
		return formatErr(t.shown, 0, "read: %v", err)
	}
	defer rr.Release()
	var row int64
	for {
		more := false
		if err := guard(t.shown, row+1, func() error { more = rr.Next(); return nil }); err != nil {
			return err
		}
		if !more {
			break
		}
		rec := rr.RecordBatch()
		var values int64
		for i, c := range rec.Columns() {
			if int64(c.Len()) != rec.NumRows() {
				return formatErr(t.shown, row+1, "%s: a damaged column: %d rows of %d", rec.ColumnName(i), c.Len(), rec.NumRows())
			}
			if err := validate(c); err != nil {
				return formatErr(t.shown, row+1, "%s: %v", rec.ColumnName(i), err)
			}
			values += dataBytes(c.Data())
		}
		if m := t.mem; values > m.values {
			return formatErr(t.shown, row+1, "its values decode to %d bytes in one batch of rows, more than %d, %d times the input's %d bytes (a decompression bomb, or a dataset that needs shardconv convert --max-expansion raised)",
				values, m.values, m.ratio, m.size)
		}
		if err := fn(rec, row); err != nil {
			return err
		}
		row += rec.NumRows()
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return formatErr(t.shown, row+1, "read: %v", err)
	}
	return nil
}

// guard runs fn, a call into the Parquet decoder, turning a panic into
// an error naming the file: arrow-go's decoder trusts a file's page
// headers and can dereference what a damaged file leaves nil
// (FuzzParquet). Only the decoder's calls are guarded, never this
// package's own code. (The reader is not Parallel, so the decoder runs
// on the caller's goroutine, where the panic can be caught.)
func guard(shown string, line int64, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(*overAllocation); ok {
				err = formatErr(shown, line, "decoding its values needs more than %d bytes held at once, %d times what they may decode to (%d times the input's %d bytes: a decompression bomb, or a dataset that needs shardconv convert --max-expansion raised)",
					e.limit, decoderFactor, e.ratio, e.size)
				return
			}
			err = formatErr(shown, line, "a damaged Parquet file (the decoder failed: %v)", r)
		}
	}()
	return fn()
}

// What the input may decode to is bounded by its values: the bytes of the
// Arrow arrays each batch of rows decodes to (what the table holds), at
// most the expansion bound. The decoder needs more than that while it
// works, and holds it for every column at once: a column's value buffer
// grows by doubling, its definition and repetition levels take 4 bytes a
// value (as much as the values themselves for 4-byte types, 4 times as
// much for 1-byte ones), and the decompressed page sits beside them
// (a table of 1,017 molecules with 300 mostly-empty targets each held 10.8
// MB to decode 5 MB of values, and was refused as a bomb when the decoder's
// allocations were counted against the bound on values). So the decoder's
// allocator is bounded at decoderFactor times the bound: enough for any
// legitimate table, and it still stops a bomb before it is allocated (7.6
// KB of dictionary-encoded lists asked for 2.7 GiB); what lies between is
// refused by the count of values after each batch.
const decoderFactor = 8

// boundedAllocator is the decoder's allocator (arrowx.Bounded): past
// limit bytes held at once it panics with an *overAllocation, which guard
// turns into an error naming the file (the decoder runs on guard's
// goroutine). values is the bound on the values a batch of rows decodes
// to (table.read checks it).
type boundedAllocator struct {
	arrowx.Bounded
	values      int64
	ratio, size int64
}

func newBoundedAllocator(limit, values, ratio, size int64) *boundedAllocator {
	a := &boundedAllocator{values: values, ratio: ratio, size: size}
	a.Bounded = arrowx.Bounded{Allocator: memory.DefaultAllocator, Limit: limit,
		Over: func(_, _ int64) any { return &overAllocation{limit: limit, ratio: ratio, size: size} }}
	return a
}

type overAllocation struct{ limit, ratio, size int64 }

// dataBytes is what an array's buffers hold, its children's included.
func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	return n
}

// column returns rec's column called name, or nil.
func column(rec arrow.RecordBatch, col string) arrow.Array {
	for i, f := range rec.Schema().Fields() {
		if f.Name == col {
			return rec.Column(i)
		}
	}
	return nil
}

package loader

import (
	"bufio"
	"context"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// WriteStream writes the plan as one Arrow IPC stream (schema, one record
// batch per training batch, end-of-stream marker) to w, flushing after each
// batch. On error the stream is still ended with the end-of-stream marker
// when the writer allows, so the reader can find what follows it.
func (l *Loader) WriteStream(ctx context.Context, p *Plan, w io.Writer) (Stats, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	iw := ipc.NewWriter(bw, ipc.WithSchema(p.Schema), ipc.WithAllocator(l.cfg.Mem))
	st, err := l.Stream(ctx, p, func(rec arrow.RecordBatch) error {
		if err := iw.Write(rec); err != nil {
			return err
		}
		return bw.Flush()
	})
	if cerr := iw.Close(); err == nil {
		err = cerr
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return st, err
}

// SchemaBytes is the schema message that opens every stream of the plan's
// request: an empty stream minus its 8-byte end-of-stream marker.
func SchemaBytes(schema *arrow.Schema) ([]byte, error) {
	var buf bytesBuffer
	iw := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := iw.Close(); err != nil {
		return nil, err
	}
	return buf.b[:len(buf.b)-8], nil
}

type bytesBuffer struct{ b []byte }

func (b *bytesBuffer) Write(p []byte) (int, error) { b.b = append(b.b, p...); return len(p), nil }

// EOS is the Arrow IPC end-of-stream marker.
var EOS = []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}

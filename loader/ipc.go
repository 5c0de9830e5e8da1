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
	// Small enough that a batch's large buffers (edge columns, about half a
	// megabyte each) bypass it after one short fill instead of being
	// copied in whole; large enough to coalesce the small ones.
	bw := bufio.NewWriterSize(w, 64<<10)
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

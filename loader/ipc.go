package loader

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/augloader/augloader/wire"
)

// WriteStream writes the plan as one Arrow IPC stream (schema, one record
// batch per training batch, end-of-stream marker) to w, flushing after each
// batch; record batch bodies compressed as p.Compression says (Arrow IPC
// body compression, which every Arrow reader undoes). On error the stream is still ended with the end-of-stream marker
// when the writer allows, so the reader can find what follows it.
func (l *Loader) WriteStream(ctx context.Context, p *Plan, w io.Writer) (Stats, error) {
	// Small enough that a batch's large buffers (edge columns, about half a
	// megabyte each) bypass it after one short fill instead of being
	// copied in whole; large enough to coalesce the small ones.
	var bw flusher = bufio.NewWriterSize(w, 64<<10)
	if p.Lender != nil {
		// The lender's writer takes each buffer where it lies (a lent
		// batch's edges are not copied at all): a buffer in between would
		// copy what it coalesces.
		bw = unbuffered{w}
	}
	opts := []ipc.Option{ipc.WithSchema(p.Schema), ipc.WithAllocator(l.cfg.Mem)}
	switch p.Compression {
	case wire.CompressNone:
	case wire.CompressZstd:
		opts = append(opts, ipc.WithZstd())
	case wire.CompressLZ4:
		opts = append(opts, ipc.WithLZ4())
	default:
		return Stats{}, fmt.Errorf("loader: unknown compression %q (want zstd or lz4)", p.Compression)
	}
	iw := ipc.NewWriter(bw, opts...)
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

type flusher interface {
	io.Writer
	Flush() error
}

// unbuffered is a flusher with nothing to flush.
type unbuffered struct{ io.Writer }

func (unbuffered) Flush() error { return nil }

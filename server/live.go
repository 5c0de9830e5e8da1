package server

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/wire"
)

// Live serves streams built on the fly: by one loader (L), or by a
// daemon's views (Views: a request's view and fold pick the loader).
type Live struct {
	L     *loader.Loader
	Views *loader.Views
}

// Open implements Source.
func (v Live) Open(req wire.Request) (Stream, error) {
	l := v.L
	if v.Views != nil {
		var err error
		if l, err = v.Views.Loader(req); err != nil {
			return nil, err
		}
	} else if req.View != "" || req.Fold != 0 {
		return nil, fmt.Errorf("%w: this daemon serves no views (view %q, fold %d asked)", epoch.ErrRange, req.View, req.Fold)
	}
	p, err := l.Plan(req)
	if err != nil {
		return nil, err
	}
	return &liveStream{l: l, p: p}, nil
}

type liveStream struct {
	l  *loader.Loader
	p  *loader.Plan
	st loader.Stats
}

func (s *liveStream) Info() wire.Response {
	id := s.p.Identity
	r := wire.Response{Dataset: s.l.Source().Manifest().Dataset, Epoch: s.p.Request.Epoch,
		Batches: len(s.p.Batches), TotalBatches: s.p.Total, Graphs: s.p.Graphs(), Twins: s.p.Twins, Config: &id}
	for _, b := range s.p.OverBudget {
		if b >= s.p.Request.StartBatch {
			r.OverBudget = append(r.OverBudget, b)
		}
	}
	return r
}

func (s *liveStream) Schema() *arrow.Schema { return s.p.Schema }

// MaxMessageBytes bounds the stream's largest IPC message: the largest
// batch's collated bytes and room for its metadata and padding.
func (s *liveStream) MaxMessageBytes() int64 {
	return slices.Max(append([]int64{0}, s.p.Bytes...)) + 64<<10
}

// SetLender has the stream's batches write their edge columns into the
// transport's buffer (the shared-memory ring) where it lends room.
func (s *liveStream) SetLender(l loader.EdgeLender) { s.p.Lender = l }

// SetCompression compresses the stream's record batch bodies.
func (s *liveStream) SetCompression(codec wire.Compression) error {
	if _, err := wire.ParseCompression(string(codec)); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.p.Compression = codec
	return nil
}

func (s *liveStream) WriteTo(ctx context.Context, w io.Writer) (int, int, error) {
	st, err := s.l.WriteStream(ctx, s.p, w)
	s.st = st
	return st.Batches, st.Graphs, err
}

// SubMixUnchanged reports the graphs SubMix left unchanged (no edge in
// the mix).
func (s *liveStream) SubMixUnchanged() int { return s.st.SubMixUnchanged }

// Busy reports the workers' time spent building batches, and waiting.
func (s *liveStream) Busy() (busy, idle time.Duration) { return s.st.WorkerBusy, s.st.WorkerIdle }

// Waits reports time spent waiting on the workers and on the client.
func (s *liveStream) Waits() (time.Duration, time.Duration) { return s.st.WaitWorkers, s.st.WaitSink }

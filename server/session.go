package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/augloader/augloader/internal/iox"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/wire"
)

// A session serves one request, on either transport: it admits the
// stream (one count of streams for both), opens it, applies the
// transport's wire compression (stamping it into the response's
// configuration identity), counts it, writes the Arrow IPC stream (with
// its SHA-256 when asked), ends it with a trailer and logs one line. A
// transport supplies only its framing (a framer): the socket's frames and
// shared-memory ring, or Flight's FlightData.
type session struct {
	src     Source
	adm     *admission
	metrics *Metrics
	log     *slog.Logger
	// compress is the transport's wire compression of live streams;
	// replays are sent as stored.
	compress wire.Compression
	// served counts streams that ran to their trailer, on every transport
	// of a daemon (the shutdown log line).
	served *atomic.Int64
}

// framer is a transport's framing of one stream.
type framer interface {
	// name is the transport, for the log.
	name() string
	// refuse answers a request that will not be served, with its code.
	refuse(code string, err error) error
	// open delivers the response and returns where the stream's bytes go.
	// The stream ends early, without error from the transport, when the
	// client goes away: open may call cancel for that.
	open(ctx context.Context, cancel context.CancelFunc, st Stream, info wire.Response) (io.Writer, error)
	// close ends the stream once its bytes are written: err is what cut it
	// (nil: complete), tr its trailer (cut: Code and Message set). It
	// returns the error the transport reports, if any.
	close(ctx context.Context, tr wire.Trailer, err error) error
	// attrs are the transport's fields of the stream's log line.
	attrs() []any
}

// compressible is a stream whose record batch bodies can be compressed.
type compressible interface {
	SetCompression(codec wire.Compression) error
}

// lendable is a stream whose batches can write their edge columns into
// the transport's buffer (the shared-memory writer, a loader.EdgeLender).
type lendable interface {
	SetLender(loader.EdgeLender)
}

// refuse counts and logs a refusal, then lets the transport answer it.
func (s *session) refuse(f framer, code string, err error) error {
	s.metrics.reject(code)
	s.log.Warn("request rejected", "transport", f.name(), "code", code, "err", err)
	return f.refuse(code, err)
}

// serve runs one request; client names the peer for the per-client limit.
func (s *session) serve(ctx context.Context, req wire.Request, client string, f framer) error {
	start := time.Now()
	release, err := s.adm.acquire(client)
	if err != nil {
		return s.refuse(f, wire.CodeUnavailable, err)
	}
	defer release()
	if ctx.Err() != nil {
		return s.refuse(f, wire.CodeUnavailable, errors.New("server shutting down"))
	}
	st, err := s.src.Open(req)
	if err != nil {
		return s.refuse(f, codeOf(err), err)
	}
	info := st.Info()
	if cs, ok := st.(compressible); ok && s.compress != "" {
		if err := cs.SetCompression(s.compress); err != nil {
			return s.refuse(f, wire.CodeInternal, err)
		}
		if info.Config != nil {
			// The bytes (and per-batch digests) are the compressed
			// messages': another configuration to a client reading one
			// epoch from several daemons.
			id := *info.Config
			id.WireCompression = s.compress
			id = id.WithID()
			info.Config = &id
		}
	}
	s.metrics.start()
	s.metrics.overBudgetBatches(len(info.OverBudget))
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := f.open(sctx, cancel, st, info)
	if err != nil {
		s.metrics.done(0, 0, 0, workerTimes{}, err)
		return err
	}
	if lw, ok := w.(loader.EdgeLender); ok {
		if ls, ok := st.(lendable); ok {
			ls.SetLender(lw)
		}
	}
	cw := &iox.CountingWriter{W: w}
	if req.Digest {
		cw.Hash = sha256.New()
	}
	batches, graphs, err := st.WriteTo(sctx, cw)
	tr := wire.Trailer{Batches: batches, Graphs: graphs}
	if err != nil {
		// A stream that started was not refused: it broke (or the daemon
		// is stopping).
		tr.Code, tr.Message = wire.CodeInternal, err.Error()
		if ctx.Err() != nil {
			tr.Code, tr.Message = wire.CodeUnavailable, "server shutting down"
		}
	} else if cw.Hash != nil {
		tr.SHA256 = hex.EncodeToString(cw.Hash.Sum(nil))
	}
	// Counters settle before the trailer: a client that has read it sees
	// its stream counted and no longer active.
	times, measured := streamTimes(st)
	s.metrics.done(batches, graphs, cw.N, times, err)
	s.served.Add(1)
	ferr := f.close(ctx, tr, err)
	secs := time.Since(start).Seconds()
	attrs := []any{"transport", f.name(), "epoch", req.Epoch, "rank", req.Rank, "world", req.World}
	if req.View != "" {
		attrs = append(attrs, "view", req.View, "fold", req.Fold)
	}
	attrs = append(attrs, "graphs", graphs, "batches", batches, "MB", float64(cw.N)/1e6,
		"seconds", secs, "graphs_per_s", float64(graphs)/max(secs, 1e-9))
	if measured {
		attrs = append(attrs, "wait_workers_s", times.waitWorkers.Seconds(), "wait_client_s", times.waitClient.Seconds())
	}
	attrs = append(attrs, f.attrs()...)
	switch {
	case err != nil:
		s.log.Warn("stream cut", append(attrs, "err", err)...)
	case ferr != nil:
		s.log.Warn("trailer not delivered", append(attrs, "err", ferr)...)
	default:
		s.log.Info("epoch served", attrs...)
	}
	return ferr
}

package server

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/wire"
)

// Stream is one request's batches: a live loader's (Live) or an epoch
// materialized to disk (Replay).
type Stream interface {
	// Info is the response the client gets before the batches.
	Info() wire.Response
	// Schema is the batches' Arrow schema.
	Schema() *arrow.Schema
	// WriteTo writes the Arrow IPC stream, schema to end-of-stream marker.
	WriteTo(ctx context.Context, w io.Writer) (batches, graphs int, err error)
}

// Source opens streams. Errors wrapping epoch.ErrRange are reported as
// out_of_range, wire.ErrProtocol as bad_request, a *wire.Error with its
// own code; anything else is internal.
type Source interface {
	Open(req wire.Request) (Stream, error)
}

// codeOf is the protocol error code for err (both transports).
func codeOf(err error) string {
	var we *wire.Error
	switch {
	case errors.As(err, &we):
		return we.Code
	case errors.Is(err, wire.ErrProtocol):
		return wire.CodeBadRequest
	case errors.Is(err, epoch.ErrRange):
		return wire.CodeOutOfRange
	case errors.Is(err, context.Canceled):
		return wire.CodeUnavailable
	}
	return wire.CodeInternal
}

// workerTimes are a stream's timings and counts that /metrics sums.
type workerTimes struct {
	waitWorkers, waitClient, busy, idle time.Duration
	unchanged                           int
}

// streamTimes returns a finished stream's waits on its workers and on its
// client, and its workers' busy and idle time, when it measures them (live
// streams do; replayed ones have no workers).
func streamTimes(st Stream) (t workerTimes, measured bool) {
	ws, ok := st.(interface {
		Waits() (time.Duration, time.Duration)
		Busy() (time.Duration, time.Duration)
	})
	if ok {
		t.waitWorkers, t.waitClient = ws.Waits()
		t.busy, t.idle = ws.Busy()
	}
	if u, ok := st.(interface{ SubMixUnchanged() int }); ok {
		t.unchanged = u.SubMixUnchanged()
	}
	return t, ok
}

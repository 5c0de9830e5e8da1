// Package client reads augloader streams from a Unix socket (directly, or
// through a shared-memory ring with Options.ShmRing) or Arrow Flight: one
// request, the record batches in order, the trailer. Used by tests,
// benchmarks and `augloader fetch`.
//
// Safe for concurrent use: each Fetch opens its own connection.
package client

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/augloader/augloader/wire"
)

// Result summarises a fetched stream.
type Result struct {
	Info    wire.Response
	Trailer wire.Trailer
	Schema  *arrow.Schema
	Batches int
	Graphs  int
	Bytes   int64 // Arrow IPC stream bytes (FetchMany: the record batches' alone)
	// Digest is the SHA-256 of the Arrow IPC stream bytes, schema to
	// end-of-stream marker: equal digests mean byte-identical streams.
	// BatchDigests[i] is the SHA-256 of record batch i's message bytes.
	// Both are computed only with Options.Digests.
	Digest       [32]byte
	BatchDigests [][32]byte
}

// Options tune a fetch.
type Options struct {
	// Mem allocates the decoded buffers. By default a batch's memory is
	// reused for a later batch once fn has returned and the record batch
	// is released: Retain it (and Release it when done) to keep it past fn.
	Mem memory.Allocator
	// Digests computes Result.Digest and BatchDigests (SHA-256 over every
	// byte: about 1.5 GB/s per hash on this hardware).
	Digests bool
	// Token is Flight's bearer token.
	Token string
	// TLS configures grpc+tls:// Flight addresses (default: the system's
	// roots).
	TLS *tls.Config
	// ShmRing, when > 0, has Fetch take the stream through the
	// shared-memory transport, a memfd ring of that many bytes
	// (docs/protocol.md, "Shared memory"); Linux, Unix socket only.
	ShmRing int
	// BatchTimeout, with FetchMany, is how long a daemon may take to send
	// its next batch before its share is asked of another; default 30 s.
	BatchTimeout time.Duration
	// Logger, with FetchMany, is told which daemon failed; nil: discard.
	Logger *slog.Logger

	onInfo  func(wire.Response) error // FetchMany's first-contact check
	onBatch func([32]byte, int64)     // FetchMany: each batch's digest (with Digests) and bytes, before fn
}

// Fetch sends req to the server at socket and calls fn for each record
// batch (valid until fn returns). A server error is a *wire.Error.
func Fetch(ctx context.Context, socket string, req wire.Request, o Options, fn func(arrow.RecordBatch) error) (*Result, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, dialError(socket, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if o.ShmRing > 0 {
		return fetchShm(conn.(*net.UnixConn), req, o, fn)
	}
	if err := wire.WriteFrame(conn, wire.MagicRequest, wire.StatusOK, req); err != nil {
		return nil, fmt.Errorf("client: send request: %w", err)
	}
	return Read(bufio.NewReaderSize(conn, 1<<20), o, fn)
}

// ErrNoDaemon is a fetch that found no daemon where it was pointed: the
// error says what to start.
var ErrNoDaemon = errors.New("client: no daemon")

// dialError says what a failed dial of a Unix socket means and what to
// start, keeping the system's error in the chain.
func dialError(socket string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%w at %s: no such socket (start one: augloader serve --shards DIR --socket %s): %w", ErrNoDaemon, socket, socket, err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w at %s: nothing listens there (the daemon stopped, or the file is a stale socket; start one: augloader serve --shards DIR --socket %s): %w",
			ErrNoDaemon, socket, socket, err)
	}
	return fmt.Errorf("client: %w", err)
}

// FetchAddr reads req from the daemon at addr: a Unix socket (a path, or
// unix:///path) or a Flight URL (grpc://, grpc+tls://, grpc+unix://).
func FetchAddr(ctx context.Context, addr string, req wire.Request, o Options, fn func(arrow.RecordBatch) error) (*Result, error) {
	if strings.HasPrefix(addr, "grpc") {
		return FetchFlight(ctx, addr, o.Token, req, o, fn)
	}
	return Fetch(ctx, strings.TrimPrefix(addr, "unix://"), req, o, fn)
}

// Read reads a response, stream and trailer from r (exposed for other
// transports).
func Read(r io.Reader, o Options, fn func(arrow.RecordBatch) error) (*Result, error) {
	return read(r, r, o, fn)
}

// read reads the frames from r and the Arrow IPC stream between them from
// stream (on the socket, r itself).
func read(r, stream io.Reader, o Options, fn func(arrow.RecordBatch) error) (*Result, error) {
	status, body, err := wire.ReadFrame(r, wire.MagicResponse)
	if err != nil {
		return nil, err
	}
	if status != wire.StatusOK {
		var e wire.Error
		if err := json.Unmarshal(body, &e); err != nil {
			return nil, fmt.Errorf("client: unreadable error body: %w", err)
		}
		return nil, &e
	}
	res := &Result{}
	if err := json.Unmarshal(body, &res.Info); err != nil {
		return nil, fmt.Errorf("client: response body: %w", err)
	}
	if o.onInfo != nil {
		if err := o.onInfo(res.Info); err != nil {
			return nil, err
		}
	}
	if err := readArrow(stream, o, fn, res); err != nil {
		return res, err
	}
	status, body, err = wire.ReadFrame(r, wire.MagicTrailer)
	if err != nil {
		return res, fmt.Errorf("client: stream ended without a trailer after %d batches: %w", res.Batches, err)
	}
	if err := json.Unmarshal(body, &res.Trailer); err != nil {
		return res, fmt.Errorf("client: trailer: %w", err)
	}
	if status != wire.StatusOK {
		return res, &wire.Error{Code: res.Trailer.Code, Message: res.Trailer.Message}
	}
	if res.Trailer.Batches != res.Batches || res.Batches != res.Info.Batches {
		return res, fmt.Errorf("client: received %d batches, trailer says %d, response promised %d",
			res.Batches, res.Trailer.Batches, res.Info.Batches)
	}
	return res, nil
}

// readArrow decodes one Arrow IPC stream from r into res, calling fn per
// batch and hashing the bytes when asked.
func readArrow(r io.Reader, o Options, fn func(arrow.RecordBatch) error, res *Result) error {
	tee := &hashingReader{r: r}
	if o.Digests {
		tee.one = sha256.New()
		tee.startAll()
		defer tee.stopAll()
	}
	var mem memory.Allocator = o.Mem
	if mem == nil {
		mem = &recycler{}
	}
	ir, err := ipc.NewReader(tee, ipc.WithAllocator(mem))
	if err != nil {
		return fmt.Errorf("client: arrow stream: %w", err)
	}
	defer ir.Release()
	res.Schema = ir.Schema()
	if o.Digests {
		tee.one.Reset() // the schema message is not a batch
	}
	seen := tee.n
	for ir.Next() {
		rec := ir.RecordBatch()
		var d [32]byte
		if o.Digests {
			copy(d[:], tee.one.Sum(nil))
			tee.one.Reset()
			res.BatchDigests = append(res.BatchDigests, d)
		}
		if o.onBatch != nil {
			o.onBatch(d, tee.n-seen)
		}
		seen = tee.n
		res.Batches++
		res.Graphs += int(rec.NumRows()) / wire.Copies(res.Schema)
		if fn != nil {
			if err := fn(rec); err != nil {
				return err
			}
		}
	}
	if err := ir.Err(); err != nil {
		return fmt.Errorf("client: arrow stream after %d batches: %w", res.Batches, err)
	}
	if o.Digests {
		copy(res.Digest[:], tee.stopAll())
	}
	res.Bytes = tee.n
	return nil
}

// hashingReader hashes every byte the Arrow reader consumes: all of them,
// and those since the last batch. arrow-go reads message by message with
// exact lengths, so the bytes between two Next calls are one message.
//
// The whole stream's SHA-256 is computed on a goroutine of its own, over
// copies of what was read: hashing each byte twice on the reading
// goroutine was most of a fetch's serial cost (2 × 200 MB a COLLAB epoch,
// at ~2 GB/s), and the per-batch hash is needed in step with the batches.
type hashingReader struct {
	r   io.Reader
	one hash.Hash
	n   int64

	chunks chan []byte // to the whole-stream hasher; nil once stopped
	free   chan []byte // its returned buffers
	sum    chan []byte // the hasher's digest, once chunks is closed
	digest []byte
}

const hashChunk = 1 << 20

func (h *hashingReader) startAll() {
	// The goroutine holds its channels in locals: stopAll clears the field.
	chunks, free, sum := make(chan []byte, 8), make(chan []byte, 8), make(chan []byte, 1)
	h.chunks, h.free, h.sum = chunks, free, sum
	go func() {
		all := sha256.New()
		for c := range chunks {
			all.Write(c)
			select {
			case free <- c[:0]:
			default:
			}
		}
		sum <- all.Sum(nil)
	}()
}

// stopAll ends the whole-stream hasher and returns its digest (idempotent).
func (h *hashingReader) stopAll() []byte {
	if h.chunks != nil {
		close(h.chunks)
		h.chunks = nil
		h.digest = <-h.sum
	}
	return h.digest
}

func (h *hashingReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if h.one != nil && h.chunks != nil && n > 0 {
		h.one.Write(p[:n])
		for rest := p[:n]; len(rest) > 0; {
			var c []byte
			select {
			case c = <-h.free:
			default:
				c = make([]byte, 0, hashChunk)
			}
			k := min(len(rest), hashChunk)
			c = append(c, rest[:k]...)
			rest = rest[k:]
			h.chunks <- c
		}
	}
	h.n += int64(n)
	return n, err
}

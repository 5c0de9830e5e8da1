// Package server is augloader's Unix-socket daemon: each connection sends
// one request (package wire) and receives that epoch's batches for its rank
// as one Arrow IPC stream, then a trailer. Many connections are served at
// once. Streams come from a live loader or from materialized epochs.
//
// Contract: the socket file is created with the given mode (0600 by default)
// and removed on shutdown; an existing path that is not a socket, or a
// symlink, is never replaced; a live socket is never stolen. Shutdown (ctx
// cancelled) stops accepting, lets streams finish for the drain period,
// then cuts them with an "unavailable" trailer.
package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/internal/iox"
	"github.com/augloader/augloader/wire"
)

// Stream is one request's batches.
type Stream interface {
	Info() wire.Response
	// WriteTo writes the Arrow IPC stream, schema to end-of-stream marker.
	WriteTo(ctx context.Context, w io.Writer) (batches, graphs int, err error)
}

// Source opens streams; errors wrapping epoch.ErrRange are reported to the
// client as out_of_range.
type Source interface {
	Open(req wire.Request) (Stream, error)
}

// Options configure a Server.
type Options struct {
	Source Source
	Logger *slog.Logger // nil: discard
	// Mode of the socket file; default 0600.
	Mode fs.FileMode
	// Drain is how long shutdown waits for running streams; default 5 s.
	Drain time.Duration
	// MaxStreams caps concurrent streams; default 256. Beyond it a client
	// gets an "unavailable" error.
	MaxStreams int
	// RequestTimeout bounds reading the request; default 10 s.
	RequestTimeout time.Duration
	// Metrics, when set, counts streams, graphs, bytes and waits.
	Metrics *Metrics
	// MaxStreamsPerClient caps concurrent streams per client, a client
	// being the peer's user id on the Unix socket; 0: MaxStreams.
	MaxStreamsPerClient int
}

// Server serves streams on a Unix socket.
type Server struct {
	opts    Options
	log     *slog.Logger
	active  atomic.Int64
	served  atomic.Int64
	wg      sync.WaitGroup
	streams chan struct{}

	mu        sync.Mutex
	perClient map[uint32]int // streams per peer uid
}

// New returns a server; call ListenAndServe.
func New(o Options) (*Server, error) {
	if o.Source == nil {
		return nil, errors.New("server: a source is required")
	}
	if o.Mode == 0 {
		o.Mode = 0o600
	}
	if o.Drain <= 0 {
		o.Drain = 5 * time.Second
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = 256
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 10 * time.Second
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.MaxStreamsPerClient <= 0 {
		o.MaxStreamsPerClient = o.MaxStreams
	}
	return &Server{opts: o, log: log, streams: make(chan struct{}, o.MaxStreams), perClient: map[uint32]int{}}, nil
}

// Active is the number of streams being served.
func (s *Server) Active() int { return int(s.active.Load()) }

// Listen creates the Unix socket at path, refusing to replace anything
// that is not a stale socket of ours.
func Listen(path string, mode fs.FileMode) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, fmt.Errorf("server: %s is a symlink: refusing to follow or replace it", path)
		case fi.Mode()&fs.ModeSocket == 0:
			return nil, fmt.Errorf("server: %s exists and is not a socket: refusing to replace it", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("server: %s: another server is listening", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("server: remove stale socket: %w", err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("server: chmod %s: %w", path, err)
	}
	return ln, nil
}

// Serve accepts connections until ctx is cancelled, then drains and
// returns nil. The listener is closed (and its socket file removed).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	streamCtx, cut := context.WithCancel(context.WithoutCancel(ctx))
	defer cut()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("server: accept: %w", err)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(streamCtx, conn)
		}()
	}
	s.log.Info("shutting down", "active_streams", s.Active(), "drain", s.opts.Drain)
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.opts.Drain):
		cut()
		<-done
	}
	s.log.Info("stopped", "streams_served", s.served.Load())
	return nil
}

// sendBuffer is the socket send buffer asked for each stream.
const sendBuffer = 4 << 20

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
	return t, ok
}

// workerTimes are a stream's timings that /metrics sums.
type workerTimes struct{ waitWorkers, waitClient, busy, idle time.Duration }

func (s *Server) handle(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(s.opts.RequestTimeout))
	req, err := wire.ParseRequest(bufio.NewReaderSize(conn, 4096))
	conn.SetReadDeadline(time.Time{})
	if err != nil {
		s.reject(conn, wire.CodeBadRequest, err)
		return
	}
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		s.reject(conn, wire.CodeUnavailable, fmt.Errorf("%d streams already running", s.opts.MaxStreams))
		return
	}
	if uid, ok := peerUID(conn); ok {
		if !s.acquireClient(uid) {
			s.reject(conn, wire.CodeUnavailable, fmt.Errorf("user %d already has %d streams running", uid, s.opts.MaxStreamsPerClient))
			return
		}
		defer s.releaseClient(uid)
	}
	if ctx.Err() != nil {
		s.reject(conn, wire.CodeUnavailable, errors.New("server shutting down"))
		return
	}
	st, err := s.opts.Source.Open(req)
	if err != nil {
		code := wire.CodeInternal
		if errors.Is(err, epoch.ErrRange) {
			code = wire.CodeOutOfRange
		}
		s.reject(conn, code, err)
		return
	}
	if uc, ok := conn.(*net.UnixConn); ok {
		// A batch is about a megabyte: with the default ~200 KiB send
		// buffer the sender blocks and is woken several times per batch.
		// The kernel caps this at net.core.wmem_max.
		uc.SetWriteBuffer(sendBuffer)
	}
	s.active.Add(1)
	defer s.active.Add(-1)
	s.opts.Metrics.start()
	info := st.Info()
	if err := wire.WriteFrame(conn, wire.MagicResponse, wire.StatusOK, info); err != nil {
		return
	}
	// A closed client connection cancels the stream: watch for EOF.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		var b [1]byte
		conn.Read(b[:]) // returns on close (clients send nothing more)
		cancel()
	}()
	cw := &iox.CountingWriter{W: conn}
	batches, graphs, err := st.WriteTo(sctx, cw)
	tr := wire.Trailer{Batches: batches, Graphs: graphs}
	status := byte(wire.StatusOK)
	if err != nil {
		status = wire.StatusError
		tr.Code, tr.Message = wire.CodeInternal, err.Error()
		if ctx.Err() != nil {
			tr.Code, tr.Message = wire.CodeUnavailable, "server shutting down"
		}
	}
	// Counters settle before the trailer: a client that has read it sees
	// its stream counted and no longer active.
	times, measured := streamTimes(st)
	s.opts.Metrics.done(batches, graphs, cw.N, times, err)
	s.served.Add(1)
	werr := wire.WriteFrame(conn, wire.MagicTrailer, status, tr)
	secs := time.Since(start).Seconds()
	attrs := []any{"epoch", req.Epoch, "rank", req.Rank, "world", req.World,
		"graphs", graphs, "batches", batches, "MB", float64(cw.N) / 1e6,
		"seconds", secs, "graphs_per_s", float64(graphs) / max(secs, 1e-9)}
	if measured {
		attrs = append(attrs, "wait_workers_s", times.waitWorkers.Seconds(), "wait_client_s", times.waitClient.Seconds())
	}
	switch {
	case err != nil:
		s.log.Warn("stream cut", append(attrs, "err", err)...)
	case werr != nil:
		s.log.Warn("trailer not delivered", append(attrs, "err", werr)...)
	default:
		s.log.Info("epoch served", attrs...)
	}
}

func (s *Server) acquireClient(uid uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perClient[uid] >= s.opts.MaxStreamsPerClient {
		return false
	}
	s.perClient[uid]++
	return true
}

func (s *Server) releaseClient(uid uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perClient[uid]--; s.perClient[uid] <= 0 {
		delete(s.perClient, uid)
	}
}

// peerUID reads the connecting process's user id (SO_PEERCRED).
func peerUID(conn net.Conn) (uint32, bool) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return 0, false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return 0, false
	}
	return cred.Uid, true
}

func (s *Server) reject(conn net.Conn, code string, err error) {
	s.opts.Metrics.reject(code)
	s.log.Warn("request rejected", "code", code, "err", err)
	wire.WriteFrame(conn, wire.MagicResponse, wire.StatusError, wire.Error{Code: code, Message: err.Error()})
}

// Package server is augloader's daemon: it serves streams of augmented
// batches (Live, from a loader; Replay, from epochs materialized to disk)
// over a Unix socket (package wire's frames around an Arrow IPC stream, or
// around descriptors of the same messages placed in the client's memfd
// ring: the shared-memory transport) and Arrow Flight (the same request as
// a ticket, the same IPC messages as FlightData), with Prometheus
// counters. Run starts all of it as one daemon; Server and Flight are its
// two transports.
//
// Contract:
//   - The socket file is created with the given mode (0600 by default) and
//     removed on shutdown; an existing path that is not a socket, or a
//     symlink, is never replaced; a live socket is never stolen.
//   - Both transports share one set of Limits: streams in all and per
//     client, connections waiting for their request; the excess is refused
//     with "unavailable", never by dying (accept keeps going after
//     running out of descriptors, backing off).
//   - A shared-memory request's descriptor is checked before anything is
//     served (a writable memfd sealed against shrinking, of bounded size);
//     anything else is refused as bad_request, and no client can make the
//     daemon's mapping fault.
//   - Shutdown (ctx cancelled) stops accepting, lets streams finish for
//     the drain period, then cuts them with an "unavailable" trailer,
//     within a bounded time even when a client has stopped reading.
package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
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

	"golang.org/x/sys/unix"

	"github.com/augloader/augloader/internal/iox"
	"github.com/augloader/augloader/wire"
)

// Options configure a Server.
type Options struct {
	Source Source
	Logger *slog.Logger // nil: discard
	// Mode of the socket file; default 0600.
	Mode   fs.FileMode
	Limits Limits
	// Metrics, when set, counts streams, graphs, bytes and waits.
	Metrics *Metrics

	// admission, when set (by Run), is shared with the Flight endpoint.
	admission *admission
}

// Server serves streams on a Unix socket.
type Server struct {
	opts   Options
	lim    Limits
	log    *slog.Logger
	adm    *admission
	active atomic.Int64
	served atomic.Int64
	wg     sync.WaitGroup

	mu      sync.Mutex
	pending []*pendingConn        // accepted, request not read yet; oldest first
	conns   map[net.Conn]struct{} // streaming
}

type pendingConn struct {
	net.Conn
	evicted atomic.Bool
}

// New returns a server; call Serve.
func New(o Options) (*Server, error) {
	if o.Source == nil {
		return nil, errors.New("server: a source is required")
	}
	if o.Mode == 0 {
		o.Mode = 0o600
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lim := o.Limits.withDefaults()
	adm := o.admission
	if adm == nil {
		adm = newAdmission(lim)
	}
	return &Server{opts: o, lim: lim, log: log, adm: adm, conns: map[net.Conn]struct{}{}}, nil
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
	var backoff time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if retryable(err) {
				// Out of descriptors (or another passing failure): wait
				// for streams to end, as net/http does, instead of dying.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "in", backoff)
				s.opts.Metrics.acceptError()
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
				}
				continue
			}
			return fmt.Errorf("server: accept: %w", err)
		}
		backoff = 0
		pc := s.admit(conn)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(streamCtx, pc)
		}()
	}
	s.log.Info("shutting down", "active_streams", s.Active(), "drain", s.lim.Drain)
	// Connections still waiting to send a request hold no stream: refuse
	// them now rather than wait for them through the drain.
	s.mu.Lock()
	for _, p := range s.pending {
		p.SetReadDeadline(time.Now())
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.lim.Drain):
		cut()
		s.unblock()
		<-done
	}
	s.log.Info("stopped", "streams_served", s.served.Load())
	return nil
}

// retryable: accept errors that pass (EMFILE, ENFILE, ENOBUFS, ENOMEM,
// ECONNABORTED, timeouts).
func retryable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// admit queues a new connection as waiting for its request, evicting the
// oldest waiting one when MaxPending are already waiting.
func (s *Server) admit(conn net.Conn) *pendingConn {
	pc := &pendingConn{Conn: conn}
	// The request deadline is set here, before the handler runs, so an
	// eviction (which moves it to now) can never be overwritten by it.
	conn.SetReadDeadline(time.Now().Add(s.lim.RequestTimeout))
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) >= s.lim.MaxPending {
		old := s.pending[0]
		s.pending = s.pending[1:]
		old.evicted.Store(true)
		old.SetReadDeadline(time.Now()) // unblocks its request read
	}
	s.pending = append(s.pending, pc)
	return pc
}

// requestRead takes pc off the waiting list.
func (s *Server) requestRead(pc *pendingConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range s.pending {
		if p == pc {
			s.pending = append(s.pending[:i], s.pending[i+1:]...)
			return
		}
	}
}

// unblock makes every stream's pending and future writes fail within
// cutGrace, so that a cut stream whose client stopped reading still ends.
func (s *Server) unblock() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.SetWriteDeadline(time.Now().Add(cutGrace))
	}
	for _, p := range s.pending {
		p.SetReadDeadline(time.Now())
	}
}

// cutGrace is how long a cut stream may take to deliver its trailer.
const cutGrace = 200 * time.Millisecond

// sendBuffer is the socket send buffer asked for each stream.
const sendBuffer = 4 << 20

func (s *Server) handle(ctx context.Context, pc *pendingConn) {
	conn := pc.Conn
	defer conn.Close()
	start := time.Now()
	// The request is read through fdReader on a Unix connection: a
	// shared-memory client's ring comes with it.
	fdr := &fdReader{}
	var rd io.Reader = conn
	if uc, ok := conn.(*net.UnixConn); ok {
		fdr.uc, rd = uc, fdr
	}
	req, err := wire.ParseRequest(bufio.NewReaderSize(rd, 4096))
	s.requestRead(pc)
	conn.SetReadDeadline(time.Time{})
	var ring []byte
	if err == nil {
		ring, err = fdr.ring(req)
	} else {
		fdr.close()
	}
	if ring != nil {
		defer unix.Munmap(ring)
	}
	switch {
	case pc.evicted.Load():
		s.reject(conn, wire.CodeUnavailable, fmt.Errorf("too many connections waiting to send a request (%d)", s.lim.MaxPending))
		return
	case err != nil:
		s.reject(conn, wire.CodeBadRequest, err)
		return
	}
	client := ""
	if uid, ok := peerUID(conn); ok {
		client = fmt.Sprintf("uid %d", uid)
	}
	release, err := s.adm.acquire(client)
	if err != nil {
		s.reject(conn, wire.CodeUnavailable, err)
		return
	}
	defer release()
	if ctx.Err() != nil {
		s.reject(conn, wire.CodeUnavailable, errors.New("server shutting down"))
		return
	}
	st, err := s.opts.Source.Open(req)
	if err != nil {
		s.reject(conn, codeOf(err), err)
		return
	}
	if uc, ok := conn.(*net.UnixConn); ok {
		// A batch is about a megabyte: with the default ~200 KiB send
		// buffer the sender blocks and is woken several times per batch.
		// The kernel caps this at net.core.wmem_max.
		uc.SetWriteBuffer(sendBuffer)
	}
	s.track(conn, true)
	defer s.track(conn, false)
	s.active.Add(1)
	defer s.active.Add(-1)
	s.opts.Metrics.start()
	info := st.Info()
	s.opts.Metrics.overBudgetBatches(len(info.OverBudget))
	if err := wire.WriteFrame(conn, wire.MagicResponse, wire.StatusOK, info); err != nil {
		s.opts.Metrics.done(0, 0, 0, workerTimes{}, err)
		return
	}
	// A closed client connection cancels the stream: watch for EOF (and,
	// over shared memory, read the client's records until then).
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out io.Writer = conn
	var shm *shmWriter
	if ring != nil {
		shm = newShmWriter(sctx, ring, conn)
		out = shm
	}
	go func() {
		if shm != nil {
			shm.readRecords(conn)
		} else {
			var b [1]byte
			conn.Read(b[:]) // returns on close (clients send nothing more)
		}
		cancel()
	}()
	cw := &iox.CountingWriter{W: out}
	if req.Digest {
		cw.Hash = sha256.New()
	}
	batches, graphs, err := st.WriteTo(sctx, cw)
	tr := wire.Trailer{Batches: batches, Graphs: graphs}
	if cw.Hash != nil && err == nil {
		tr.SHA256 = hex.EncodeToString(cw.Hash.Sum(nil))
	}
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
	if ctx.Err() == nil {
		conn.SetWriteDeadline(time.Now().Add(s.lim.RequestTimeout))
	}
	werr := wire.WriteFrame(conn, wire.MagicTrailer, status, tr)
	secs := time.Since(start).Seconds()
	attrs := []any{"epoch", req.Epoch, "rank", req.Rank, "world", req.World,
		"graphs", graphs, "batches", batches, "MB", float64(cw.N) / 1e6,
		"seconds", secs, "graphs_per_s", float64(graphs) / max(secs, 1e-9)}
	if measured {
		attrs = append(attrs, "wait_workers_s", times.waitWorkers.Seconds(), "wait_client_s", times.waitClient.Seconds())
	}
	if shm != nil {
		attrs = append(attrs, "shm_ring_MB", float64(len(ring))/1e6, "shm_inline_messages", shm.inline)
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

func (s *Server) track(c net.Conn, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
	}
}

// peerUID reads the connecting process's user id (SO_PEERCRED).
func peerUID(conn net.Conn) (uint32, bool) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return 0, false
	}
	if _, unix := conn.LocalAddr().(*net.UnixAddr); !unix {
		return 0, false
	}
	raw, err := sc.SyscallConn()
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
	conn.SetWriteDeadline(time.Now().Add(time.Second))
	msg := err.Error()
	var we *wire.Error
	if errors.As(err, &we) {
		msg = we.Message
	}
	wire.WriteFrame(conn, wire.MagicResponse, wire.StatusError, wire.Error{Code: code, Message: msg})
}

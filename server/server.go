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
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/augloader/augloader/loader"
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
	// Memory, when set, is the budget shared-memory rings are counted
	// against (the loaders' loader.Memory): a ring the budget has no room
	// for is not used, and its stream goes through the socket.
	Memory *loader.Memory
	// ShmRingLimit caps how much of a client's ring one stream uses (and
	// maps); 0: DefaultShmRingLimit. See ringUse.
	ShmRingLimit int64

	// admission and served, when set (by Run), are shared with the Flight
	// endpoint.
	admission *admission
	served    *atomic.Int64
}

// Server serves streams on a Unix socket.
type Server struct {
	opts   Options
	lim    Limits
	log    *slog.Logger
	sess   *session
	active atomic.Int64
	wg     sync.WaitGroup
	rings  *ringCache // shared-memory clients' rings, mapped between streams

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
	lim := o.Limits.EnsureDefaults()
	adm := o.admission
	if adm == nil {
		adm = newAdmission(lim)
	}
	served := o.served
	if served == nil {
		served = new(atomic.Int64)
	}
	if o.ShmRingLimit <= 0 {
		o.ShmRingLimit = DefaultShmRingLimit
	}
	sess := &session{src: o.Source, adm: adm, metrics: o.Metrics, log: log, served: served}
	return &Server{opts: o, lim: lim, log: log, sess: sess, conns: map[net.Conn]struct{}{}, rings: newRingCache(o.Memory, o.Metrics)}, nil
}

// Active is the number of streams being served.
func (s *Server) Active() int { return int(s.active.Load()) }

// Listen creates the Unix socket at path, refusing to replace anything
// that is not a stale socket of ours. The path appears only once the
// socket listens with its mode: it is made under a temporary name in the
// same folder and linked into place (the file a bind makes comes before
// its listen, and a client that waits for the file, as a probe or a
// test does, was refused in between, more often on a loaded machine).
func Listen(path string, mode fs.FileMode) (*SocketListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, fmt.Errorf("server: %s is a symlink: refusing to follow or replace it", path)
		case fi.Mode()&fs.ModeSocket == 0:
			return nil, fmt.Errorf("server: %s exists and is not a socket: refusing to replace it", path)
		}
		// A server that is dying still answers for a moment: a killed
		// process's main thread shows as ended (a zombie) while its other
		// threads still hold its sockets. One that still answers after
		// two seconds is alive.
		for try := 0; ; try++ {
			c, err := net.DialTimeout("unix", path, time.Second)
			if err != nil {
				break
			}
			c.Close()
			if try == 10 {
				return nil, fmt.Errorf("server: %s: another server is listening", path)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("server: remove stale socket: %w", err)
		}
	}
	// A socket's path has at most 107 bytes: a temporary name past that
	// falls back to the path itself.
	at := filepath.Join(filepath.Dir(path), fmt.Sprintf(".augsock-%d-%d", os.Getpid(), rand.Uint32()))
	if len(at) > 107 {
		at = path
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: at, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (*SocketListener, error) {
		ln.Close()
		os.Remove(at)
		return nil, err
	}
	if err := os.Chmod(at, mode); err != nil {
		return fail(fmt.Errorf("server: chmod %s: %w", path, err))
	}
	if at != path {
		// link, not rename: what another process put at path meanwhile
		// is refused, never replaced.
		if err := os.Link(at, path); err != nil {
			return fail(fmt.Errorf("server: %s: %w", path, err))
		}
		os.Remove(at)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fail(fmt.Errorf("server: %w", err))
	}
	return &SocketListener{UnixListener: ln, path: path, file: fi, unlink: true}, nil
}

// SocketListener is the listener Listen makes: its Close removes the
// socket file it made (not another one put at its path since).
type SocketListener struct {
	*net.UnixListener
	path   string
	file   fs.FileInfo
	unlink bool
	once   sync.Once
}

// SetUnlinkOnClose says whether Close removes the socket file (default
// true).
func (l *SocketListener) SetUnlinkOnClose(unlink bool) { l.unlink = unlink }

// Close removes the socket file, then stops listening (in that order, as
// net.UnixListener does: an Accept that returns finds the file gone).
func (l *SocketListener) Close() error {
	l.once.Do(func() {
		if fi, e := os.Lstat(l.path); l.unlink && e == nil && os.SameFile(fi, l.file) {
			os.Remove(l.path)
		}
	})
	return l.UnixListener.Close()
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
	s.rings.close()
	if s.opts.admission == nil { // a daemon (Run) logs its own, for every transport
		s.log.Info("stopped", "streams_served", s.sess.served.Load())
	}
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
	sf := &socketFramer{srv: s, conn: conn, fdr: fdReader{fd: -1}}
	defer sf.release()
	// The request is read through fdReader on a Unix connection: a
	// shared-memory client's ring comes with it.
	var rd io.Reader = conn
	if uc, ok := conn.(*net.UnixConn); ok {
		sf.fdr = newFDReader(uc)
		rd = &sf.fdr
	}
	req, err := wire.ParseRequest(bufio.NewReaderSize(rd, 4096))
	s.requestRead(pc)
	conn.SetReadDeadline(time.Time{})
	if err == nil {
		err = sf.fdr.check(req)
	}
	switch {
	case pc.evicted.Load():
		s.sess.refuse(sf, wire.CodeUnavailable, fmt.Errorf("too many connections waiting to send a request (%d)", s.lim.MaxPending))
		return
	case err != nil:
		s.sess.refuse(sf, wire.CodeBadRequest, err)
		return
	}
	client := ""
	if uid, ok := peerUID(conn); ok {
		client = fmt.Sprintf("uid %d", uid)
	}
	s.sess.serve(ctx, req, client, sf)
}

// socketFramer frames a stream on the Unix socket (docs/protocol.md): the
// response frame, the Arrow IPC stream inline or through the client's
// shared-memory ring, the trailer frame.
type socketFramer struct {
	srv    *Server
	conn   net.Conn
	fdr    fdReader
	ring   []byte      // the mapped part of a shared-memory client's ring
	mapped *cachedRing // ring's mapping (and its budget), back to the cache at release
	shm    *shmWriter
	// tracked: the stream counts as active and its connection is cut at
	// shutdown (release undoes it).
	tracked bool
}

func (f *socketFramer) name() string { return "socket" }

func (f *socketFramer) refuse(code string, err error) error {
	f.conn.SetWriteDeadline(time.Now().Add(time.Second))
	msg := err.Error()
	var we *wire.Error
	if errors.As(err, &we) {
		msg = we.Message
	}
	return wire.WriteFrame(f.conn, wire.MagicResponse, wire.StatusError, wire.Error{Code: code, Message: msg})
}

func (f *socketFramer) open(ctx context.Context, cancel context.CancelFunc, st Stream, info wire.Response) (io.Writer, error) {
	if f.fdr.shm {
		// Shared memory: map as much of the client's ring as the stream
		// can use, counted against the memory budget (or none at all when
		// the budget has no room now: every message then goes inline).
		n := ringUse(f.fdr.size, f.srv.opts.ShmRingLimit, st)
		// Populated: the pages are the client's ring, which the Python
		// client populated when it made it and reuses stream after stream,
		// so this maps pages that exist in one call instead of a fault per
		// page as messages land. A ring whose pages do not exist yet gets
		// its n bytes now instead of as the stream fills them; they are
		// counted against the budget either way. The mapping is kept for
		// the client's next stream over the same ring (ringCache).
		r, err := f.srv.rings.get(f.fdr.fd, n)
		if err != nil {
			err = fmt.Errorf("%w: shm ring: map: %v", wire.ErrProtocol, err)
			f.srv.sess.refuse(f, wire.CodeBadRequest, err)
			return nil, err
		}
		if r != nil {
			f.mapped, f.ring = r, r.mem[:n]
		}
		f.fdr.close()
	}
	if uc, ok := f.conn.(*net.UnixConn); ok {
		// A batch is about a megabyte: with the default ~200 KiB send
		// buffer the sender blocks and is woken several times per batch.
		// The kernel caps this at net.core.wmem_max.
		uc.SetWriteBuffer(sendBuffer)
	}
	f.srv.track(f.conn, true)
	f.srv.active.Add(1)
	f.tracked = true
	if err := wire.WriteFrame(f.conn, wire.MagicResponse, wire.StatusOK, info); err != nil {
		return nil, err
	}
	// A closed client connection cancels the stream: watch for EOF (and,
	// over shared memory, read the client's records until then).
	var out io.Writer = f.conn
	if f.fdr.shm {
		f.shm = newShmWriter(ctx, f.ring, f.conn)
		out = f.shm
	}
	go func() {
		if f.shm != nil {
			f.shm.readRecords(f.conn)
		} else {
			var b [1]byte
			f.conn.Read(b[:]) // returns on close (clients send nothing more)
		}
		cancel()
	}()
	return out, nil
}

func (f *socketFramer) close(ctx context.Context, tr wire.Trailer, err error) error {
	status := byte(wire.StatusOK)
	if err != nil {
		status = wire.StatusError
	}
	// Nothing is written into the ring after its stream: its mapping goes
	// back to the cache before the trailer, so the client's next request,
	// sent once the trailer is read, finds it idle (after the trailer it
	// raced this handler's return). f.ring keeps only its length (attrs).
	if f.shm != nil {
		f.srv.sess.metrics.shmStream(f.shm.lent, f.shm.inline)
	}
	f.putRing()
	if ctx.Err() == nil {
		f.conn.SetWriteDeadline(time.Now().Add(f.srv.lim.RequestTimeout))
	}
	return wire.WriteFrame(f.conn, wire.MagicTrailer, status, tr)
}

func (f *socketFramer) attrs() []any {
	if f.shm == nil {
		return nil
	}
	return []any{"shm_ring_MB", float64(len(f.ring)) / 1e6, "shm_inline_messages", f.shm.inline, "shm_lent_messages", f.shm.lent}
}

// release ends the stream's hold on the server: it stops counting as
// active, its ring's mapping goes back to the cache (with the budget it
// holds), a descriptor still held is closed.
func (f *socketFramer) release() {
	if f.tracked {
		f.srv.active.Add(-1)
		f.srv.track(f.conn, false)
		f.tracked = false
	}
	f.putRing()
	f.ring = nil
	f.fdr.close()
}

// putRing gives the stream's ring mapping back to the cache, once.
func (f *socketFramer) putRing() {
	if f.mapped != nil {
		f.srv.rings.put(f.mapped)
		f.mapped = nil
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

package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/augloader/augloader/internal/ipcframe"
	"github.com/augloader/augloader/wire"
)

// The shared-memory transport, server side (package wire's ShmRing): the
// client's memfd arrives with the request and is checked; once the stream
// is open, the part of it the stream will use (ringUse) is mapped, without
// populating it, and counted against the memory budget; the stream's
// messages are copied into the mapping (no kernel copy), or written
// around the edge columns the workers put there (LendEdges), and
// descriptors go out on the socket. A mapping faults (SIGBUS) where its
// file has shrunk away, so only a memfd sealed against shrinking is taken; a memfd lives
// in no size-limited mount and is never hugetlb-backed (tmpfs is checked),
// so a write into the mapping cannot fault either.

// fdReader reads from a Unix connection and keeps the one file
// descriptor that may come with the request's bytes (SCM_RIGHTS): a
// shared-memory client's ring. Any other descriptor is closed as it
// arrives and remembered only as a count, so no client can fill the
// daemon's descriptor table (a request sent one byte per sendmsg, four
// descriptors each, once took it to its limit of 20,000 in 0.6 s and
// locked every other client out).
type fdReader struct {
	uc    *net.UnixConn
	fd    int   // the first descriptor received, -1 when none is held
	extra int   // descriptors received beyond the first (closed)
	trunc bool  // the kernel dropped some (more than the control buffer holds)
	size  int64 // the ring's size, once check took it
	shm   bool  // the request asked for shared memory and its ring passed check
	oob   []byte
}

// maxRequestFDs is how many descriptors one read's control buffer has
// room for: one is expected; more are refused (and closed at once).
const maxRequestFDs = 4

func newFDReader(uc *net.UnixConn) fdReader { return fdReader{uc: uc, fd: -1} }

func (r *fdReader) Read(p []byte) (int, error) {
	if r.oob == nil {
		r.oob = make([]byte, syscall.CmsgSpace(4*maxRequestFDs))
	}
	n, oobn, flags, _, err := r.uc.ReadMsgUnix(p, r.oob)
	if oobn > 0 {
		msgs, perr := syscall.ParseSocketControlMessage(r.oob[:oobn])
		if perr != nil {
			r.trunc = true
		}
		for i := range msgs {
			fds, err := syscall.ParseUnixRights(&msgs[i])
			if err != nil {
				continue
			}
			for _, fd := range fds {
				if r.fd < 0 && r.extra == 0 {
					r.fd = fd
					continue
				}
				syscall.Close(fd)
				r.extra++
			}
		}
	}
	if flags&syscall.MSG_CTRUNC != 0 {
		r.trunc = true
	}
	// On an error (a deadline) ReadMsgUnix may return the syscall's -1,
	// which an io.Reader must never (bufio panics on it).
	return max(n, 0), err
}

// count is how many descriptors came with the request.
func (r *fdReader) count() int {
	n := r.extra
	if r.fd >= 0 {
		n++
	}
	return n
}

// close closes the descriptor held, if any.
func (r *fdReader) close() {
	if r.fd >= 0 {
		syscall.Close(r.fd)
		r.fd = -1
	}
}

// check checks what came with a request: for Shm, exactly one
// descriptor, a writable memfd of MinShmRing to MaxShmRing bytes sealed
// against shrinking (kept, to be mapped once the stream is open);
// otherwise none at all. A descriptor refused is closed.
func (r *fdReader) check(req wire.Request) error {
	if !req.Shm {
		if r.count() > 0 || r.trunc {
			r.close()
			return fmt.Errorf("%w: file descriptors sent without shm", wire.ErrProtocol)
		}
		return nil
	}
	if r.count() != 1 || r.trunc {
		r.close()
		return fmt.Errorf("%w: shm needs exactly one file descriptor with the request, got %d", wire.ErrProtocol, r.count())
	}
	size, err := checkRing(r.fd)
	if err != nil {
		r.close()
		return fmt.Errorf("%w: shm ring: %v", wire.ErrProtocol, err)
	}
	r.size, r.shm = size, true
	return nil
}

// DefaultShmRingLimit is how much of a client's ring one stream uses at
// most when the daemon is given no limit.
const DefaultShmRingLimit = 64 << 20

// ringUse is how many bytes of a client's ring of size bytes a stream
// maps and uses: room for a few of its largest messages (the ring is the
// stream's window of batches ahead of the trainer, as the socket buffer
// is), at least MinShmRing, at most limit and the ring. The daemon's
// memory is then bounded by what its streams can use, whatever ring a
// client passes (four clients with 1 GiB rings cost the host 4.2 GB of
// shared memory when the daemon mapped and populated whole rings). It is
// rounded up to a power of two: a client's next stream, whose largest
// batch differs a little, then asks for the same size, and reuses the
// mapping (ringCache).
func ringUse(size, limit int64, st Stream) int64 {
	want := int64(wire.MinShmRing)
	if m, ok := st.(interface{ MaxMessageBytes() int64 }); ok {
		want = max(want, ringMessages*m.MaxMessageBytes())
		want = 1 << bits.Len64(uint64(want-1))
	} else {
		want = limit
	}
	return min(want, limit, size)
}

// ringMessages is how many of a stream's largest messages its ring holds.
const ringMessages = 8

func checkRing(fd int) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, errors.New("not a regular file (want a memfd)")
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return 0, err
	}
	if fs.Type != unix.TMPFS_MAGIC {
		return 0, fmt.Errorf("not in memory (file system %#x; want a memfd)", fs.Type)
	}
	if st.Size < wire.MinShmRing || st.Size > wire.MaxShmRing {
		return 0, fmt.Errorf("%d bytes (want %d to %d)", st.Size, wire.MinShmRing, wire.MaxShmRing)
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return 0, err
	}
	if fl&unix.O_ACCMODE != unix.O_RDWR {
		return 0, errors.New("not open for reading and writing")
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	switch {
	case err != nil || seals&unix.F_SEAL_SHRINK == 0:
		return 0, errors.New("not sealed against shrinking (want a memfd with F_SEAL_SHRINK)")
	case seals&(unix.F_SEAL_WRITE|unix.F_SEAL_FUTURE_WRITE) != 0:
		return 0, errors.New("sealed against writing")
	}
	return st.Size, nil
}

// shmWriter takes an Arrow IPC stream, as the socket transport would send
// it, and delivers it message by message through the ring: each message
// is placed in the ring's free space (or inline on the socket when there
// is none), written there, and announced by its descriptor.
//
// It also lends batches room before they are built (LendEdges): a lent
// batch's record batch message is placed inside its region so that the
// edge columns the workers wrote there are where the message has them,
// and they are not copied. The message's bytes are the same as anywhere
// else: where its layout does not meet the columns, it is placed and
// written elsewhere in full.
type shmWriter struct {
	ctx  context.Context
	ring []byte // the client's memfd, mapped
	// out is the connection, buffered: descriptors and inline messages,
	// flushed as each message ends (the writer above it writes a
	// message's buffers one by one, unbuffered, so that a lent batch's
	// columns reach put where they lie).
	out *bufio.Writer

	mu       sync.Mutex
	inflight []shmRegion   // regions reserved and not reclaimed, in ring order
	read     uint64        // ring messages the client has read (ShmRead)
	changed  chan struct{} // wakes place
	// lendChanged wakes lendRoom (the dispatcher's goroutine), as changed
	// wakes place (the sender's): each has its own, so neither takes the
	// other's wake-up.
	lendChanged chan struct{}
	next        int64     // where the next region may start
	announced   uint64    // ring messages whose descriptor is out
	loans       []shmLoan // regions lent to batches not written yet, in batch order
	// lentBytes is the size of the loans whose message is not written
	// yet: at most half the ring, so that a message without a loan (the
	// schema, a batch refused one) finds room once the client releases.
	lentBytes int64
	// refused is the last batch refused a loan while one refused is not
	// written yet (-1: none): no later batch gets one before it is
	// written, or the messages of those refused would have to find room
	// around theirs.
	refused int
	written int // record batch messages written (placed and announced or inline)

	// The message being written.
	placed  bool   // its header is whole: it is placed, or being staged
	hdr     []byte // its prefix and metadata, until its length is known
	left    int64  // its bytes still to come once placed
	at      int64  // where its next byte goes in the ring; -1: inline
	start   int64
	length  int64
	region  int64 // the start of the region it is in
	batches int   // record batch messages begun
	isBatch bool  // it is a record batch
	// A lent batch's message is staged (its header and first body bytes
	// kept) until a body write shows where the lent columns are.
	loan    *shmLoan
	staging bool
	stage   []byte
	bufs    []ipcframe.Buffer
	// spent is the region of a loan given up (dropLoan), released when
	// the message ends.
	spent *shmLoan

	inline int // messages sent inline
	lent   int // messages written around their lent columns
	desc   [wire.ShmDescriptorSize]byte
}

// shmRegion is a reserved stretch of the ring: a message's, or a loan's.
// A message's number (seq) is given as it is announced.
type shmRegion struct {
	start     int64
	seq       uint64
	announced bool
	released  bool
}

func newShmWriter(ctx context.Context, ring []byte, out io.Writer) *shmWriter {
	return &shmWriter{ctx: ctx, ring: ring, out: bufio.NewWriterSize(out, 64<<10), changed: make(chan struct{}, 1), lendChanged: make(chan struct{}, 1), refused: -1}
}

// Write implements io.Writer.
func (w *shmWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if !w.placed {
			k, err := w.header(p)
			p = p[k:]
			if err != nil {
				return n - len(p), err
			}
			continue
		}
		k := min(int64(len(p)), w.left)
		var err error
		if w.staging {
			err = w.stageBody(p[:k])
		} else {
			err = w.put(p[:k])
		}
		if err != nil {
			return n - len(p), err
		}
		p, w.left = p[k:], w.left-k
		if w.left == 0 {
			if w.staging {
				err = w.unstage() // the lent columns never came
			}
			if err == nil {
				err = w.finish()
			}
			if err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

// header collects the current message's prefix and metadata from p; once
// they are whole, it places the message and writes them, or, for a lent
// batch's record batch, stages them.
func (w *shmWriter) header(p []byte) (int, error) {
	need := 8
	if len(w.hdr) >= 8 {
		need = 8 + int(int32(binary.LittleEndian.Uint32(w.hdr[4:])))
	}
	k := min(need-len(w.hdr), len(p))
	w.hdr = append(w.hdr, p[:k]...)
	if len(w.hdr) < need {
		return k, nil
	}
	if need == 8 {
		if binary.LittleEndian.Uint32(w.hdr) != 0xffffffff {
			return k, fmt.Errorf("server: shm: %w: no continuation marker", ipcframe.ErrFrame)
		}
		m := int32(binary.LittleEndian.Uint32(w.hdr[4:]))
		if m < 0 || m > ipcframe.MaxMetadata || m%8 != 0 {
			return k, fmt.Errorf("server: shm: %w: metadata length %d", ipcframe.ErrFrame, m)
		}
		if m > 0 {
			return k, nil // the metadata next
		}
	}
	var body int64
	if len(w.hdr) > 8 {
		var err error
		if body, err = ipcframe.BodyLength(w.hdr[8:]); err != nil {
			return k, fmt.Errorf("server: shm: %w", err)
		}
		bufs, batch, err := ipcframe.RecordBatchBuffers(w.hdr[8:], w.bufs[:0])
		if err != nil {
			return k, fmt.Errorf("server: shm: %w", err)
		}
		w.bufs = bufs
		if batch {
			w.loan = w.loanFor(w.batches)
			w.batches++
			w.isBatch = true
		}
	}
	w.length, w.left, w.placed = int64(len(w.hdr))+body, body, true
	if w.loan != nil && body > 0 {
		w.staging, w.stage = true, w.stage[:0]
		return k, nil
	}
	w.dropLoan()
	if err := w.place(w.length); err != nil {
		return k, err
	}
	err := w.put(w.hdr)
	w.hdr = w.hdr[:0]
	if err == nil && body == 0 {
		err = w.finish()
	}
	return k, err
}

// place finds room for a message of n bytes, waiting for releases while
// the client has ring messages left to read; when it has read them all
// and still keeps the ring full, the message goes inline, its descriptor
// first.
func (w *shmWriter) place(n int64) error {
	w.start, w.at = 0, -1
	if n > 1<<32-1 {
		return fmt.Errorf("server: shm: message of %d bytes", n)
	}
	if n <= int64(len(w.ring)) {
		at := w.room(n)
		for at < 0 && w.behind() {
			select {
			case <-w.changed:
				at = w.room(n)
			case <-w.ctx.Done():
				return w.ctx.Err()
			}
		}
		if at >= 0 {
			w.start, w.at, w.region = at, at, at
			return nil
		}
	}
	w.inline++
	return w.descriptor(wire.ShmInline, 0)
}

// behind reports whether the client has ring messages left to read.
func (w *shmWriter) behind() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.read < w.announced
}

// room reserves n contiguous bytes of the ring for the next message and
// returns where, or -1. Regions are taken in ring order: the free space is
// after the newest region (up to the end, or up to the oldest after a
// wrap) and before the oldest.
func (w *shmWriter) room(n int64) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.roomLocked(n)
}

// roomLocked is room with w.mu held.
func (w *shmWriter) roomLocked(n int64) int64 {
	for len(w.inflight) > 0 && w.inflight[0].released {
		w.inflight = w.inflight[1:]
	}
	at := int64(-1)
	if len(w.inflight) == 0 {
		at = 0
	} else {
		oldest, newest := w.inflight[0].start, w.inflight[len(w.inflight)-1].start
		switch {
		case newest >= oldest && int64(len(w.ring))-w.next >= n:
			at = w.next
		case newest >= oldest && oldest >= n:
			at = 0
		case newest < oldest && oldest-w.next >= n:
			at = w.next
		}
	}
	if at >= 0 {
		w.inflight = append(w.inflight, shmRegion{start: at})
		w.next = at + n
	}
	return at
}

// records takes the client's records that arrived together: releases
// (numbers of messages not announced or already reclaimed are ignored)
// and how many ring messages it has read. They are applied under one
// lock: a client writes "read n" and "release n−1" in one write, and a
// writer that saw the first without the second would find the client
// caught up with the ring full, and send the next message inline.
func (w *shmWriter) records(vs []uint64) {
	w.mu.Lock()
	for _, v := range vs {
		switch {
		case v&wire.ShmRead != 0:
			w.read = v &^ wire.ShmRead
		default:
			for i := range w.inflight {
				if r := &w.inflight[i]; r.announced && r.seq == v {
					r.released = true
					break
				}
			}
		}
	}
	w.mu.Unlock()
	w.signal()
}

// signal wakes a writer and a lender waiting for room.
func (w *shmWriter) signal() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
	select {
	case w.lendChanged <- struct{}{}:
	default:
	}
}

// readRecords reads the client's records until the connection closes,
// applying together the records of one arrival (all those buffered).
func (w *shmWriter) readRecords(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64*wire.ShmRecordSize)
	var b [wire.ShmRecordSize]byte
	vs := make([]uint64, 0, 64)
	for {
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return err
		}
		vs = append(vs[:0], binary.LittleEndian.Uint64(b[:]))
		for br.Buffered() >= wire.ShmRecordSize {
			io.ReadFull(br, b[:])
			vs = append(vs, binary.LittleEndian.Uint64(b[:]))
		}
		w.records(vs)
	}
}

// put writes the current message's next bytes; bytes already where they
// go (a lent batch's edge columns) are left there.
func (w *shmWriter) put(b []byte) error {
	if w.at < 0 {
		_, err := w.out.Write(b)
		return err
	}
	if len(b) > 0 && unsafe.SliceData(b) == &w.ring[w.at] {
		w.at += int64(len(b))
		return nil
	}
	w.at += int64(copy(w.ring[w.at:], b))
	return nil
}

// finish ends the current message, announcing it when it is in the ring.
func (w *shmWriter) finish() error {
	w.placed = false
	if w.isBatch {
		w.isBatch = false
		w.mu.Lock()
		w.written++
		w.mu.Unlock()
	}
	if w.spent != nil {
		w.mu.Lock()
		w.releaseRegion(w.spent.start)
		w.mu.Unlock()
		w.spent = nil
		w.signal()
	}
	if w.at < 0 {
		return w.out.Flush()
	}
	w.mu.Lock()
	for i := range w.inflight {
		if r := &w.inflight[i]; r.start == w.region && !r.announced {
			r.seq, r.announced = w.announced, true
			break
		}
	}
	w.announced++
	w.mu.Unlock()
	if err := w.descriptor(wire.ShmRing, w.start); err != nil {
		return err
	}
	return w.out.Flush()
}

func (w *shmWriter) descriptor(kind uint32, offset int64) error {
	b := wire.AppendShmDescriptor(w.desc[:0], wire.ShmDescriptor{Kind: kind, Length: uint32(w.length), Offset: uint64(offset)})
	_, err := w.out.Write(b)
	return err
}

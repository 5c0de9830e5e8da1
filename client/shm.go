package client

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sys/unix"

	"github.com/augloader/augloader/wire"
)

// fetchShm reads req through the shared-memory transport: a memfd ring of
// o.ShmRing bytes, sealed against shrinking and growing and mapped here,
// goes to the server with the request; the Arrow IPC stream is then read
// out of the ring, one memcpy into the decoded buffers where the socket
// costs two kernel copies, and each ring message released as soon as it is
// read. The decoded batches are in Go memory, as over the socket: arrow-go
// hands out strings that alias its buffers, which a view of the ring would
// leave pointing at memory the server rewrites.
func fetchShm(conn *net.UnixConn, req wire.Request, o Options, fn func(arrow.RecordBatch) error) (*Result, error) {
	if o.ShmRing < wire.MinShmRing || o.ShmRing > wire.MaxShmRing {
		return nil, fmt.Errorf("client: shm ring of %d bytes (want %d to %d)", o.ShmRing, wire.MinShmRing, wire.MaxShmRing)
	}
	fd, err := unix.MemfdCreate("augloader-ring", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("client: shm ring: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(o.ShmRing)); err != nil {
		return nil, fmt.Errorf("client: shm ring: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return nil, fmt.Errorf("client: shm ring: seal: %w", err)
	}
	ring, err := unix.Mmap(fd, 0, o.ShmRing, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("client: shm ring: map: %w", err)
	}
	defer unix.Munmap(ring)
	req.Shm = true
	var frame bytes.Buffer
	if err := wire.WriteFrame(&frame, wire.MagicRequest, wire.StatusOK, req); err != nil {
		return nil, err
	}
	if _, _, err := conn.WriteMsgUnix(frame.Bytes(), unix.UnixRights(fd), nil); err != nil {
		return nil, fmt.Errorf("client: send request: %w", err)
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	return read(br, &shmStream{src: br, conn: conn, ring: ring}, o, fn)
}

// shmStream is the Arrow IPC stream of a shared-memory conversation, as
// bytes: each descriptor's message, from the ring or inline from the
// socket. Before it reads a descriptor it tells the server how many ring
// messages it has read and releases the ones it has read whole.
type shmStream struct {
	src    *bufio.Reader // the socket: descriptors, inline messages
	conn   io.Writer     // records back to the server
	ring   []byte
	cur    []byte // the rest of the current ring message
	inline int64  // bytes of the current inline message still on the socket
	seq    uint64 // ring messages read
	recs   []byte
}

func (s *shmStream) Read(p []byte) (int, error) {
	for len(p) > 0 {
		switch {
		case len(s.cur) > 0:
			n := copy(p, s.cur)
			if s.cur = s.cur[n:]; len(s.cur) == 0 {
				s.recs = binary.LittleEndian.AppendUint64(s.recs, s.seq-1) // read whole: released
			}
			return n, nil
		case s.inline > 0:
			n, err := s.src.Read(p[:min(int64(len(p)), s.inline)])
			s.inline -= int64(n)
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
		// A failed write is left to the descriptor read: near the end the
		// server may have sent everything and closed its side.
		s.recs = binary.LittleEndian.AppendUint64(s.recs, wire.ShmRead|s.seq)
		s.conn.Write(s.recs)
		s.recs = s.recs[:0]
		var b [wire.ShmDescriptorSize]byte
		if _, err := io.ReadFull(s.src, b[:]); err != nil {
			return 0, fmt.Errorf("client: shm descriptor: %w", err)
		}
		d, err := wire.ParseShmDescriptor(b[:], uint64(len(s.ring)))
		if err != nil {
			return 0, err
		}
		if d.Kind == wire.ShmRing {
			s.cur = s.ring[d.Offset : d.Offset+uint64(d.Length)]
			s.seq++
		} else {
			s.inline = int64(d.Length)
		}
	}
	return 0, nil
}

package wire

import (
	"encoding/binary"
	"fmt"
)

// The shared-memory transport (docs/protocol.md, "Shared memory"). A client
// on the daemon's host sets Request.Shm and passes, with the request
// frame's bytes, one file descriptor (SCM_RIGHTS): a memfd of its own of
// MinShmRing to MaxShmRing bytes, which it has mapped: the ring. After the
// response frame, the server puts each Arrow IPC message of the stream
// (the very bytes the socket would carry) into the ring and sends on the
// socket, in its place, a descriptor; the client reads the message where
// the descriptor says, without a copy. The client sends back (records of
// ShmRecordSize bytes) the sequence number of each ring message it no
// longer needs, so the server may write over it, and before it reads each
// descriptor how many ring messages it has read. When the ring has no
// room for a message, the server waits for a release while the client has
// ring messages left to read; once it has read them all (it is keeping
// them), the message goes inline: its descriptor is followed by its bytes
// on the socket. The trailer frame follows the end-of-stream message's
// descriptor.
const (
	// ShmDescriptorSize is a descriptor's length:
	//
	//	kind u32 | length u32 | offset u64   (little-endian)
	ShmDescriptorSize = 16
	// ShmRing: the message is bytes [offset, offset+length) of the ring.
	// Ring messages are numbered 0, 1, … in the order of their
	// descriptors: the sequence number a release names.
	ShmRing = 1
	// ShmInline: the message's length bytes follow on the socket (offset
	// 0).
	ShmInline = 2
	// ShmRecordSize is the length of a client's record, a u64 LE: the
	// sequence number of a ring message it is done with (a release), or
	// ShmRead|n: it has read n ring messages' descriptors.
	ShmRecordSize = 8
	ShmRead       = 1 << 63
	// MinShmRing and MaxShmRing bound the ring's size.
	MinShmRing = 64 << 10
	MaxShmRing = 1 << 30
)

// ShmDescriptor says where the next message of a shared-memory stream is.
type ShmDescriptor struct {
	Kind   uint32 // ShmRing or ShmInline
	Length uint32
	Offset uint64
}

// AppendShmDescriptor appends d's ShmDescriptorSize bytes.
func AppendShmDescriptor(dst []byte, d ShmDescriptor) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, d.Kind)
	dst = binary.LittleEndian.AppendUint32(dst, d.Length)
	return binary.LittleEndian.AppendUint64(dst, d.Offset)
}

// ParseShmDescriptor reads a descriptor from b (ShmDescriptorSize bytes)
// and checks it against a ring of ringSize bytes: a known kind, a message
// of at least 8 bytes (an end-of-stream marker), a ring message inside the
// ring, an inline one at offset 0.
func ParseShmDescriptor(b []byte, ringSize uint64) (ShmDescriptor, error) {
	if len(b) != ShmDescriptorSize {
		return ShmDescriptor{}, fmt.Errorf("%w: shm descriptor of %d bytes", ErrProtocol, len(b))
	}
	d := ShmDescriptor{Kind: binary.LittleEndian.Uint32(b), Length: binary.LittleEndian.Uint32(b[4:]), Offset: binary.LittleEndian.Uint64(b[8:])}
	switch {
	case d.Length < 8:
		return d, fmt.Errorf("%w: shm message of %d bytes", ErrProtocol, d.Length)
	case d.Kind == ShmRing && (d.Offset > ringSize || uint64(d.Length) > ringSize-d.Offset):
		return d, fmt.Errorf("%w: shm message [%d, +%d) outside the ring of %d bytes", ErrProtocol, d.Offset, d.Length, ringSize)
	case d.Kind == ShmInline && d.Offset != 0:
		return d, fmt.Errorf("%w: inline shm message at offset %d", ErrProtocol, d.Offset)
	case d.Kind != ShmRing && d.Kind != ShmInline:
		return d, fmt.Errorf("%w: shm descriptor kind %d", ErrProtocol, d.Kind)
	}
	return d, nil
}

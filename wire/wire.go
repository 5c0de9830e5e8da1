// Package wire is augloader's protocol, in one place (docs/protocol.md):
// the frames of the Unix-socket conversation, the request, response,
// trailer and error bodies both transports carry, the error codes, and the
// Arrow schema of a served batch (columns and schema-metadata keys).
//
// A socket conversation is a request frame from the client; a response
// frame from the server, then on success an Arrow IPC stream of the
// batches, then a trailer frame. Every frame is
//
//	magic [4]byte | version u8 | status u8 | reserved u16 (0) | length u32 LE | JSON body
//
// with the body at most MaxBody bytes. Over shared memory (shm.go) the
// messages of the stream lie in the client's memfd ring and the socket
// carries a descriptor for each. Arrow Flight carries the same request as
// a ticket and the same IPC messages as FlightData.
//
// Contract: these constants are the protocol; they change only together
// with docs/protocol.md and testdata/golden/protocol.json, which the Go and
// Python tests both check. Parsing never panics and never reads past
// MaxBody.
package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/augloader/augloader/internal/ipcframe"
)

// Protocol constants.
const (
	// Version is the frame version.
	Version = 1
	// MaxBody caps a frame's JSON body.
	MaxBody = 64 << 10
	// HeaderSize is a frame header's length.
	HeaderSize = 12
	// MaxArrowMetadata and MaxArrowBody cap one Arrow IPC message's
	// flatbuffer metadata and body, on every reader of the protocol.
	MaxArrowMetadata = ipcframe.MaxMetadata
	MaxArrowBody     = ipcframe.MaxBody
)

// Frame magics.
var (
	MagicRequest  = [4]byte{'A', 'U', 'G', 'Q'}
	MagicResponse = [4]byte{'A', 'U', 'G', 'R'}
	MagicTrailer  = [4]byte{'A', 'U', 'G', 'T'}
)

// Status values.
const (
	StatusOK    = 0
	StatusError = 1
)

// ErrProtocol is the category of framing errors.
var ErrProtocol = errors.New("wire: protocol error")

// WriteFrame writes one frame with body v encoded as JSON.
func WriteFrame(w io.Writer, magic [4]byte, status byte, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(body) > MaxBody {
		return fmt.Errorf("%w: body of %d bytes", ErrProtocol, len(body))
	}
	hdr := make([]byte, HeaderSize, HeaderSize+len(body))
	copy(hdr, magic[:])
	hdr[4], hdr[5] = Version, status
	binary.LittleEndian.PutUint32(hdr[8:], uint32(len(body)))
	_, err = w.Write(append(hdr, body...))
	return err
}

// ReadFrame reads one frame, checking magic, version and length, and
// returns its status and body.
func ReadFrame(r io.Reader, magic [4]byte) (byte, []byte, error) {
	var hdr [HeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.EOF {
			return 0, nil, fmt.Errorf("%w: connection closed before a %s frame", ErrProtocol, magic[:])
		}
		return 0, nil, fmt.Errorf("%w: reading a %s frame: %v", ErrProtocol, magic[:], err)
	}
	if !bytes.Equal(hdr[:4], magic[:]) {
		return 0, nil, fmt.Errorf("%w: magic %q, want %q", ErrProtocol, hdr[:4], magic[:])
	}
	if hdr[4] != Version {
		return 0, nil, fmt.Errorf("%w: version %d, this side speaks %d", ErrProtocol, hdr[4], Version)
	}
	if hdr[5] > StatusError || hdr[6] != 0 || hdr[7] != 0 {
		return 0, nil, fmt.Errorf("%w: bad status or reserved bytes", ErrProtocol)
	}
	n := binary.LittleEndian.Uint32(hdr[8:])
	if n > MaxBody {
		return 0, nil, fmt.Errorf("%w: body of %d bytes exceeds %d", ErrProtocol, n, MaxBody)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, fmt.Errorf("%w: short body: %v", ErrProtocol, err)
	}
	return hdr[5], body, nil
}

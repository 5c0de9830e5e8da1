// Package wire frames augloader's socket protocol (docs/protocol.md): a
// request frame from the client; a response frame from the server, then on
// success an Arrow IPC stream of the batches, then a trailer frame.
//
// Every frame is
//
//	magic [4]byte | version u8 | status u8 | reserved u16 (0) | length u32 LE | JSON body
//
// with the body at most MaxBody bytes. These constants are part of the
// protocol. Parsing never panics and never reads past MaxBody.
package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Protocol constants.
const (
	Version = 1
	MaxBody = 64 << 10
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

// Error codes in an error body.
const (
	CodeBadRequest  = "bad_request"  // malformed frame or JSON
	CodeOutOfRange  = "out_of_range" // epoch, rank, batch size, start batch
	CodeUnavailable = "unavailable"  // shutting down, too many streams
	CodeInternal    = "internal"     // augmentation or storage failure
)

// ErrProtocol is the category of framing errors.
var ErrProtocol = errors.New("wire: protocol error")

// Request is the request body.
type Request struct {
	Epoch      uint64 `json:"epoch"`
	Rank       int    `json:"rank"`
	World      int    `json:"world"`
	BatchSize  int    `json:"batch_size,omitempty"`
	StartBatch int    `json:"start_batch,omitempty"`
}

// Response is the body of a successful response frame.
type Response struct {
	Dataset      string `json:"dataset"`
	Epoch        uint64 `json:"epoch"`
	Batches      int    `json:"batches"`       // batches that follow
	TotalBatches int    `json:"total_batches"` // batches of the whole rank slice
	Graphs       int    `json:"graphs"`        // graphs that follow
}

// Error is the body of an error response or trailer.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"error"`
}

func (e *Error) Error() string { return fmt.Sprintf("server: %s: %s", e.Code, e.Message) }

// Trailer closes a stream.
type Trailer struct {
	Batches int    `json:"batches"`
	Graphs  int    `json:"graphs"`
	Code    string `json:"code,omitempty"`
	Message string `json:"error,omitempty"`
}

// WriteFrame writes one frame with body v encoded as JSON.
func WriteFrame(w io.Writer, magic [4]byte, status byte, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(body) > MaxBody {
		return fmt.Errorf("%w: body of %d bytes", ErrProtocol, len(body))
	}
	hdr := make([]byte, 12, 12+len(body))
	copy(hdr, magic[:])
	hdr[4], hdr[5] = Version, status
	binary.LittleEndian.PutUint32(hdr[8:], uint32(len(body)))
	_, err = w.Write(append(hdr, body...))
	return err
}

// ReadFrame reads one frame, checking magic, version and length, and
// returns its status and body.
func ReadFrame(r io.Reader, magic [4]byte) (byte, []byte, error) {
	var hdr [12]byte
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

// ParseRequest reads and validates a request frame: known fields only,
// non-negative values. Range checks against the dataset are the server's.
func ParseRequest(r io.Reader) (Request, error) {
	var req Request
	status, body, err := ReadFrame(r, MagicRequest)
	if err != nil {
		return req, err
	}
	if status != StatusOK {
		return req, fmt.Errorf("%w: request status %d", ErrProtocol, status)
	}
	return DecodeRequest(body)
}

// DecodeRequest checks a request body (the JSON of a request frame, or a
// Flight ticket): at most MaxBody bytes, known fields only, no trailing
// data, non-negative values.
func DecodeRequest(body []byte) (Request, error) {
	var req Request
	if len(body) > MaxBody {
		return req, fmt.Errorf("%w: body of %d bytes exceeds %d", ErrProtocol, len(body), MaxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("%w: request body: %v", ErrProtocol, err)
	}
	if dec.More() {
		return req, fmt.Errorf("%w: trailing data after the request body", ErrProtocol)
	}
	if req.Rank < 0 || req.World < 0 || req.BatchSize < 0 || req.StartBatch < 0 {
		return req, fmt.Errorf("%w: negative rank, world, batch_size or start_batch", ErrProtocol)
	}
	return req, nil
}

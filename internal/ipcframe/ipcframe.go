// Package ipcframe splits an Arrow IPC stream into its messages' raw
// (metadata, body) bytes and joins them back, byte for byte. Arrow Flight
// carries exactly these two parts in FlightData (data_header, data_body),
// so the Flight endpoint forwards the socket stream's messages unchanged and
// a Flight client can rebuild the identical stream (and its digest).
//
// Message framing (Arrow columnar format, "Encapsulated message format"):
//
//	FF FF FF FF | int32 LE metadata length L (padded so 8+L is a multiple of 8) | metadata (L bytes) | body
//
// where the body length is the flatbuffer Message's bodyLength; an
// end-of-stream marker is FF FF FF FF 00 00 00 00.
package ipcframe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	flatbuffers "github.com/google/flatbuffers/go"
)

// Limits on what a Reader accepts.
const (
	MaxMetadata = 64 << 20
	MaxBody     = 1 << 30
)

// ErrFrame is the category of malformed framing.
var ErrFrame = errors.New("ipcframe: malformed stream")

// EOS is the end-of-stream marker.
var EOS = []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}

// Reader yields the messages of a stream.
type Reader struct{ r io.Reader }

// NewReader reads messages from r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Next returns the next message's metadata (as framed, padding included)
// and body; io.EOF after the end-of-stream marker.
func (m *Reader) Next() (meta, body []byte, err error) {
	var pre [8]byte
	if _, err := io.ReadFull(m.r, pre[:]); err != nil {
		return nil, nil, fmt.Errorf("%w: message prefix: %v", ErrFrame, err)
	}
	if binary.LittleEndian.Uint32(pre[:4]) != 0xffffffff {
		return nil, nil, fmt.Errorf("%w: no continuation marker", ErrFrame)
	}
	n := int32(binary.LittleEndian.Uint32(pre[4:]))
	if n == 0 {
		return nil, nil, io.EOF
	}
	if n < 0 || n > MaxMetadata || n%8 != 0 {
		return nil, nil, fmt.Errorf("%w: metadata length %d", ErrFrame, n)
	}
	meta = make([]byte, n)
	if _, err := io.ReadFull(m.r, meta); err != nil {
		return nil, nil, fmt.Errorf("%w: metadata: %v", ErrFrame, err)
	}
	bl, err := BodyLength(meta)
	if err != nil {
		return nil, nil, err
	}
	body = make([]byte, bl)
	if _, err := io.ReadFull(m.r, body); err != nil {
		return nil, nil, fmt.Errorf("%w: body: %v", ErrFrame, err)
	}
	return meta, body, nil
}

// BodyLength reads Message.bodyLength (field 3) from a flatbuffer Message.
func BodyLength(meta []byte) (n int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: metadata flatbuffer: %v", ErrFrame, p)
		}
	}()
	if len(meta) < 8 {
		return 0, fmt.Errorf("%w: metadata of %d bytes", ErrFrame, len(meta))
	}
	t := flatbuffers.Table{Bytes: meta, Pos: flatbuffers.GetUOffsetT(meta)}
	if o := t.Offset(10); o != 0 {
		n = t.GetInt64(flatbuffers.UOffsetT(o) + t.Pos)
	}
	if n < 0 || n > MaxBody {
		return 0, fmt.Errorf("%w: body length %d", ErrFrame, n)
	}
	return n, nil
}

// Append appends one framed message (as arrow-go's stream writer writes it).
func Append(dst, meta, body []byte) []byte {
	padded := (len(meta) + 8 + 7) &^ 7
	dst = binary.LittleEndian.AppendUint32(dst, 0xffffffff)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(padded-8))
	dst = append(dst, meta...)
	for i := len(meta) + 8; i < padded; i++ {
		dst = append(dst, 0)
	}
	return append(dst, body...)
}

// Buffer is one buffer of a record batch message's body: where it starts
// in the body and its length, as the metadata lists it.
type Buffer struct{ Offset, Length int64 }

// recordBatch is MessageHeader's union type of a RecordBatch.
const recordBatch = 3

// RecordBatchBuffers appends to dst the body buffers a record batch
// message's metadata (Message.header, a RecordBatch, field 2: a vector of
// Buffer structs) lists, in order; ok is false for any other message
// (a schema, a dictionary batch). Each buffer lies within the body
// (Message.bodyLength), or the metadata is refused.
func RecordBatchBuffers(meta []byte, dst []Buffer) (bufs []Buffer, ok bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			bufs, ok, err = dst, false, fmt.Errorf("%w: metadata flatbuffer: %v", ErrFrame, p)
		}
	}()
	body, err := BodyLength(meta)
	if err != nil {
		return dst, false, err
	}
	m := flatbuffers.Table{Bytes: meta, Pos: flatbuffers.GetUOffsetT(meta)}
	o := m.Offset(6)
	if o == 0 || m.GetByte(flatbuffers.UOffsetT(o)+m.Pos) != recordBatch {
		return dst, false, nil
	}
	var rb flatbuffers.Table
	if o = m.Offset(8); o == 0 {
		return dst, false, fmt.Errorf("%w: record batch message without its header", ErrFrame)
	}
	m.Union(&rb, flatbuffers.UOffsetT(o))
	o = rb.Offset(8)
	if o == 0 {
		return dst, true, nil
	}
	vec := rb.Vector(flatbuffers.UOffsetT(o))
	n := rb.VectorLen(flatbuffers.UOffsetT(o))
	if n < 0 || vec+flatbuffers.UOffsetT(16*n) > flatbuffers.UOffsetT(len(meta)) {
		return dst, false, fmt.Errorf("%w: %d buffers past the metadata's end", ErrFrame, n)
	}
	for i := range n {
		at := vec + flatbuffers.UOffsetT(16*i)
		b := Buffer{Offset: rb.GetInt64(at), Length: rb.GetInt64(at + 8)}
		if b.Offset < 0 || b.Length < 0 || b.Offset > body || b.Length > body-b.Offset {
			return dst, false, fmt.Errorf("%w: buffer %d at %d of %d bytes, body of %d", ErrFrame, i, b.Offset, b.Length, body)
		}
		dst = append(dst, b)
	}
	return dst, true, nil
}

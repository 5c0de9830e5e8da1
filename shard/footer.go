package shard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	flatbuffers "github.com/google/flatbuffers/go"
)

// arrowMagic opens and closes an Arrow IPC file.
var arrowMagic = []byte("ARROW1")

// checkFooter bounds every vector length in the Arrow file footer before
// arrow-go decodes it. arrow-go sizes allocations from these lengths (the
// schema's field count, a field's children, metadata, the block lists)
// without checking them against the buffer, so a forged file could
// otherwise exhaust memory, which no recover catches. The CRC-32C already
// rules out accidental corruption; this guards against crafted input.
func checkFooter(data []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("footer: %v", p)
		}
	}()
	n := len(data)
	if n < 8+10 || !bytes.Equal(data[:6], arrowMagic) {
		return errors.New("not an Arrow IPC file (magic bytes missing)")
	}
	flen, err := footerLength(data[n-10:], int64(n))
	if err != nil {
		return err
	}
	buf := data[int64(n)-10-flen : n-10]
	footer := table(buf, flatbuffers.GetUOffsetT(buf))
	for _, slot := range []flatbuffers.VOffsetT{8, 10} { // dictionaries, recordBatches: structs of 24 bytes
		if err := checkVector(buf, footer, slot, 24); err != nil {
			return err
		}
	}
	if o := footer.Offset(6); o != 0 { // schema
		return checkSchemaTable(buf, table(buf, footer.Indirect(footer.Pos+flatbuffers.UOffsetT(o))), 0)
	}
	return nil
}

// footerLength reads the footer's length from an Arrow file's last 10
// bytes (the length, then the closing magic) and bounds it by the file's
// size n.
func footerLength(tail []byte, n int64) (int64, error) {
	if !bytes.Equal(tail[4:], arrowMagic) {
		return 0, errors.New("not an Arrow IPC file (magic bytes missing)")
	}
	flen := int64(int32(binary.LittleEndian.Uint32(tail)))
	if flen <= 0 || flen > n-18 {
		return 0, fmt.Errorf("footer length %d out of range", flen)
	}
	return flen, nil
}

func table(buf []byte, pos flatbuffers.UOffsetT) *flatbuffers.Table {
	if int(pos) >= len(buf) {
		panic(fmt.Sprintf("table offset %d beyond %d bytes", pos, len(buf)))
	}
	return &flatbuffers.Table{Bytes: buf, Pos: pos}
}

// checkVector bounds the vector at slot: length × elem must fit the buffer.
func checkVector(buf []byte, t *flatbuffers.Table, slot flatbuffers.VOffsetT, elem int) error {
	o := t.Offset(slot)
	if o == 0 {
		return nil
	}
	start := t.Vector(flatbuffers.UOffsetT(o))
	if l := t.VectorLen(flatbuffers.UOffsetT(o)); l < 0 || int(start)+l*elem > len(buf) {
		return fmt.Errorf("footer vector of %d elements overruns %d bytes", l, len(buf))
	}
	return nil
}

// checkSchemaTable bounds Schema.fields and Schema.custom_metadata, then
// each Field's children and custom_metadata, recursively.
func checkSchemaTable(buf []byte, t *flatbuffers.Table, depth int) error {
	return checkFields(buf, t, 6, 8, depth)
}

func checkFields(buf []byte, t *flatbuffers.Table, fieldsSlot, metaSlot flatbuffers.VOffsetT, depth int) error {
	if depth > 8 {
		return errors.New("footer: fields nested too deep")
	}
	if err := checkVector(buf, t, fieldsSlot, 4); err != nil {
		return err
	}
	if err := checkVector(buf, t, metaSlot, 4); err != nil {
		return err
	}
	o := t.Offset(fieldsSlot)
	if o == 0 {
		return nil
	}
	start, l := t.Vector(flatbuffers.UOffsetT(o)), t.VectorLen(flatbuffers.UOffsetT(o))
	for i := 0; i < l; i++ {
		at := start + flatbuffers.UOffsetT(i*4)
		child := table(buf, at+flatbuffers.GetUOffsetT(buf[at:]))
		// Field: children at slot 14, custom_metadata at slot 16.
		if err := checkFields(buf, child, 14, 16, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// checkSchemaMessage bounds the vectors of a framed schema message (the
// one that opens a shard file, read when its pages are) as checkFooter
// bounds the footer's, before arrow-go decodes it.
func checkSchemaMessage(msg []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("schema message: %v", p)
		}
	}()
	buf, m, err := messageTable(msg)
	if err != nil {
		return fmt.Errorf("schema message: %w", err)
	}
	// Message: version (4), header_type (6), header (8), bodyLength (10),
	// custom_metadata (12); header type 1 is a Schema.
	if o := m.Offset(6); o == 0 || m.GetByte(m.Pos+flatbuffers.UOffsetT(o)) != 1 {
		return errors.New("schema message: not a schema")
	}
	if err := checkVector(buf, m, 12, 4); err != nil {
		return err
	}
	o := m.Offset(8)
	if o == 0 {
		return errors.New("schema message: no schema")
	}
	return checkSchemaTable(buf, table(buf, m.Indirect(m.Pos+flatbuffers.UOffsetT(o))), 0)
}

// messageTable returns a framed IPC message's flatbuffer (what follows the
// continuation marker and the length) and its root table, a Message. It
// panics on a root offset past the buffer: callers recover.
func messageTable(frame []byte) ([]byte, *flatbuffers.Table, error) {
	if len(frame) < 8 || binary.LittleEndian.Uint32(frame) != 0xFFFFFFFF {
		return nil, nil, errors.New("no continuation marker")
	}
	n := int(int32(binary.LittleEndian.Uint32(frame[4:])))
	if n <= 0 || n > len(frame)-8 {
		return nil, nil, fmt.Errorf("length %d out of range", n)
	}
	buf := frame[8 : 8+n]
	return buf, table(buf, flatbuffers.GetUOffsetT(buf)), nil
}

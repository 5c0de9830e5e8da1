package shard

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/augloader/augloader/internal/crc32c"
)

// ipcFile writes one Arrow IPC file from record batch payloads that were
// encoded (and compressed) elsewhere, possibly on other goroutines, byte for
// byte what ipc.FileWriter writes for the same batches
// (TestIPCFileMatchesArrow): the magic, the schema message, each batch's
// message and body, the end-of-stream marker, the footer, its length and the
// magic again. arrow-go compresses one batch at a time inside
// FileWriter.Write; writing payloads lets the Writer compress several
// batches at once.
type ipcFile struct {
	w      io.Writer
	pos    int64
	schema *arrow.Schema
	blocks []fileBlock
	// crc sums what was written since the last reset: the schema message,
	// then each batch's message and body (the manifest's page map).
	crc       uint32
	schemaLen int64
	schemaCRC uint32
}

// fileBlock is a record batch's entry in the footer, and its CRC-32C.
type fileBlock struct {
	offset int64 // of its message
	meta   int32 // message bytes: prefix, flatbuffer and padding
	body   int64 // body bytes, padded
	crc    uint32
}

var endOfStream = [8]byte{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0}

func newIPCFile(w io.Writer, schema *arrow.Schema, mem memory.Allocator) (*ipcFile, error) {
	f := &ipcFile{w: w, schema: schema}
	if _, err := f.Write(append(append([]byte{}, ipc.Magic...), 0, 0)); err != nil { // magic padded to 8
		return nil, err
	}
	p := ipc.GetSchemaPayload(schema, mem)
	defer p.Release()
	f.crc = 0
	if _, err := p.WritePayload(f); err != nil {
		return nil, err
	}
	f.schemaLen, f.schemaCRC = f.pos-8, f.crc
	return f, nil
}

func (f *ipcFile) Write(b []byte) (int, error) {
	n, err := f.w.Write(b)
	f.pos += int64(n)
	f.crc = crc32c.Update(f.crc, b[:n])
	return n, err
}

// writeBatch writes one record batch payload (from ipc.GetRecordBatchPayload).
func (f *ipcFile) writeBatch(p *ipc.Payload) error {
	start := f.pos
	f.crc = 0
	meta, err := p.WritePayload(f)
	if err != nil {
		return err
	}
	f.blocks = append(f.blocks, fileBlock{offset: start, meta: int32(meta), body: f.pos - start - int64(meta), crc: f.crc})
	return nil
}

// pageMap is the file's page map (call after the last batch).
func (f *ipcFile) pageMap() *PageMap {
	pm := &PageMap{Schema: Extent{Offset: 8, Length: f.schemaLen, CRC32C: fmt.Sprintf("%08x", f.schemaCRC)},
		Pages: make([]PageExtent, len(f.blocks))}
	for i, b := range f.blocks {
		pm.Pages[i] = PageExtent{Offset: b.offset, Metadata: int64(b.meta), Length: int64(b.meta) + b.body, CRC32C: fmt.Sprintf("%08x", b.crc)}
	}
	return pm
}

// close writes the end of the stream and the footer.
func (f *ipcFile) close() error {
	footer, err := fileFooter(f.schema, f.blocks)
	if err != nil {
		return err
	}
	var size [4]byte
	binary.LittleEndian.PutUint32(size[:], uint32(len(footer)))
	for _, b := range [][]byte{endOfStream[:], footer, size[:], ipc.Magic} {
		if _, err := f.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// fileFooter returns the footer flatbuffer for blocks. The footer is the
// schema and a vector of fixed-size Block structs, so its layout depends
// only on the schema and the number of blocks: it is taken from a file that
// ipc.FileWriter writes with as many empty batches, and the blocks' values
// are written into its vector. That keeps the schema's encoding arrow-go's
// own.
func fileFooter(schema *arrow.Schema, blocks []fileBlock) ([]byte, error) {
	var buf bytes.Buffer
	fw, err := ipc.NewFileWriter(&buf, ipc.WithSchema(schema))
	if err != nil {
		return nil, err
	}
	empty := emptyBatch(schema)
	defer empty.Release()
	for range blocks {
		if err := fw.Write(empty); err != nil {
			return nil, fmt.Errorf("footer: %w", err)
		}
	}
	if err := fw.Close(); err != nil {
		return nil, fmt.Errorf("footer: %w", err)
	}
	file := buf.Bytes()
	tail := len(file) - len(ipc.Magic) - 4
	size := int(binary.LittleEndian.Uint32(file[tail:]))
	footer := file[tail-size : tail]

	// Footer table: version, schema, dictionaries, recordBatches (field 3).
	root := flatbuffers.GetUOffsetT(footer)
	t := flatbuffers.Table{Bytes: footer, Pos: root}
	o := flatbuffers.UOffsetT(t.Offset(4 + 2*3))
	if o == 0 || t.VectorLen(o) != len(blocks) {
		return nil, fmt.Errorf("footer: template has no vector of %d blocks", len(blocks))
	}
	vec := t.Vector(o)
	for i, b := range blocks {
		// struct Block { offset: long; metaDataLength: int; (pad 4) bodyLength: long }
		at := int(vec) + 24*i
		binary.LittleEndian.PutUint64(footer[at:], uint64(b.offset))
		binary.LittleEndian.PutUint32(footer[at+8:], uint32(b.meta))
		binary.LittleEndian.PutUint64(footer[at+16:], uint64(b.body))
	}
	return footer, nil
}

// emptyBatch is a record batch of no rows.
func emptyBatch(schema *arrow.Schema) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	return b.NewRecordBatch()
}

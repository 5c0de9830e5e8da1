package shard

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/augloader/augloader/internal/arrowx"
	"github.com/augloader/augloader/internal/crc32c"
)

// A page is one record batch of one shard file: the unit a cache-limited
// Reader reads, checks, decodes, holds and drops. Pages are numbered across
// the folder in graph order (shard 0's batches, then shard 1's, …), so page
// p holds the graphs of the manifest's p-th batch count.

// pageLoc is where a page lies in its shard file and its CRC-32C, from a
// scan of the file (scanShard).
type pageLoc struct {
	off  int64  // of its message
	meta int64  // the message's bytes: prefix, flatbuffer, padding
	size int64  // message and body
	crc  uint32 // of those bytes
}

// shardIndex is what a scan of one shard file found: each page's place and
// checksum, and the file's schema message, which precedes every page of
// the stream decodePage builds.
type shardIndex struct {
	pages     []pageLoc
	schemaMsg []byte
	// file stays open for the pages' reads (a lazy Reader's, until Close).
	file StoreFile
}

// close closes the index's file.
func (ix *shardIndex) close() {
	if ix != nil && ix.file != nil {
		ix.file.Close()
		ix.file = nil
	}
}

// maxSchemaMessage bounds a shard's schema message (a few KiB in practice).
const maxSchemaMessage = 16 << 20

// scanShard reads shard si once through: its size and CRC-32C against the
// manifest, its footer's block list (one block per batch the manifest
// lists, in order, within the file), each block's CRC-32C, and its schema
// against the manifest's. From then on a page is read by offset and
// checked against its own CRC (readPage): the file's checksum vouches for
// the page checksums computed in the same pass.
func scanShard(ctx context.Context, st Store, man *Manifest, si int) (ix *shardIndex, err error) {
	info := man.Shards[si]
	f, err := openShardFile(ctx, st, &info)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	err = checked(ctx, f, func(rd io.ReaderAt) (err error) {
		ix, err = scanFile(rd, man, &info)
		return err
	})
	if err != nil {
		return nil, err
	}
	ix.file = f
	return ix, nil
}

// scanFile is scanShard's pass over the file f holds.
func scanFile(f io.ReaderAt, man *Manifest, infop *ShardInfo) (*shardIndex, error) {
	info := *infop
	n := info.Bytes
	if n < 8+10 {
		return nil, corrupt(info.File, "arrow", "not an Arrow IPC file (%d bytes)", n)
	}
	var tail [10]byte
	if _, err := f.ReadAt(tail[:], n-10); err != nil {
		return nil, fmt.Errorf("shard: %s: %w", info.File, err)
	}
	flen, err := footerLength(tail[:], n)
	if err == nil && flen > MaxManifestBytes { // the footer is read into memory
		err = fmt.Errorf("footer length %d out of range", flen)
	}
	if err != nil {
		return nil, corrupt(info.File, "arrow", "%v", err)
	}
	footer := make([]byte, flen)
	if _, err := f.ReadAt(footer, n-10-flen); err != nil {
		return nil, fmt.Errorf("shard: %s: %w", info.File, err)
	}
	locs, err := footerBlocks(footer)
	if err != nil {
		return nil, corrupt(info.File, "arrow", "%v", err)
	}
	if len(locs) != len(info.Batches) {
		return nil, corrupt(info.File, "batches", "%d record batches, manifest says %d", len(locs), len(info.Batches))
	}
	// Blocks in order, after the schema, before the footer, not overlapping.
	end := int64(8)
	for i, b := range locs {
		if b.off < end || b.size <= 0 || b.off+b.size > n-10-flen {
			return nil, corrupt(info.File, "arrow", "batch %d at %d+%d lies outside the file's batches", i, b.off, b.size)
		}
		end = b.off + b.size
	}
	if len(locs) > 0 && locs[0].off > maxSchemaMessage {
		return nil, corrupt(info.File, "arrow", "schema message of %d bytes", locs[0].off-8)
	}
	// One pass over the file: its CRC, each page's, and the schema message.
	ix := &shardIndex{pages: locs}
	var whole uint32
	buf := make([]byte, 1<<20)
	var schema bytes.Buffer
	// The footer and tail as summed: compared below with those parsed.
	endAt := n - 10 - flen
	summedEnd := make([]byte, 0, flen+10)
	var pos int64
	next := 0 // the page being summed
	for pos < n {
		want := min(int64(len(buf)), n-pos)
		k, err := f.ReadAt(buf[:want], pos)
		if int64(k) < want {
			return nil, fmt.Errorf("shard: %s: read %d of %d bytes at %d (truncated while read?): %w", info.File, k, want, pos, err)
		}
		chunk := buf[:k]
		whole = crc32c.Update(whole, chunk)
		if pos+int64(k) > endAt {
			summedEnd = append(summedEnd, chunk[max(endAt-pos, 0):]...)
		}
		if len(locs) > 0 && pos < locs[0].off {
			schema.Write(chunk[:min(int64(k), locs[0].off-pos)])
		}
		// The page checksums: the parts of chunk that lie in pages.
		for next < len(locs) {
			p := &ix.pages[next]
			lo, hi := max(pos, p.off), min(pos+int64(k), p.off+p.size)
			if lo >= hi {
				break // the page starts past this chunk
			}
			p.crc = crc32c.Update(p.crc, chunk[lo-pos:hi-pos])
			if hi < p.off+p.size {
				break // it goes on in the next chunk
			}
			next++
		}
		pos += int64(k)
	}
	if got := fmt.Sprintf("%08x", whole); got != info.CRC32C {
		return nil, corrupt(info.File, "checksum", "crc32c %s, manifest says %s", got, info.CRC32C)
	}
	// The footer parsed above is the one summed (not a later write). The
	// bytes of the summing pass, not a read of the footer again: through
	// a disk cache that read was answered by the entry the first one just
	// wrote, the cache compared with itself.
	if !bytes.Equal(summedEnd, append(footer, tail[:]...)) {
		return nil, corrupt(info.File, "arrow", "the file changed while it was read")
	}
	if len(locs) > 0 {
		ix.schemaMsg = schema.Bytes()[8:]
		s, err := readSchemaMessage(ix.schemaMsg)
		if err != nil {
			return nil, corrupt(info.File, "arrow", "%v", err)
		}
		if err := checkSchema(s, man); err != nil {
			return nil, corrupt(info.File, "schema", "%v", err)
		}
	}
	if err := sameAsMap(ix, &info); err != nil {
		return nil, err
	}
	return ix, nil
}

// openShardFile opens a shard file and checks its size against the
// manifest (a truncated or replaced file fails here).
func openShardFile(ctx context.Context, st Store, info *ShardInfo) (StoreFile, error) {
	f, err := st.Open(ctx, info.File)
	if err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	if f.Size() != info.Bytes {
		f.Close()
		return nil, corrupt(info.File, "size", "%d bytes, manifest says %d (truncated or replaced)", f.Size(), info.Bytes)
	}
	return f, nil
}

// mapShard indexes shard si from the manifest's page map, reading only
// the file's size and its schema message (checked against the map's
// CRC-32C and the manifest's schema): no pass over the file. Each page is
// then checked on its own when read (readPage); the map is sealed in the
// manifest, so it vouches for the pages as a scan would.
func mapShard(ctx context.Context, st Store, man *Manifest, si int) (_ *shardIndex, err error) {
	info := man.Shards[si]
	pm := info.PageMap
	f, err := openShardFile(ctx, st, &info)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	msg := make([]byte, pm.Schema.Length)
	err = checked(ctx, f, func(rd io.ReaderAt) error {
		if _, err := rd.ReadAt(msg, pm.Schema.Offset); err != nil {
			return fmt.Errorf("shard: %s: schema message: %w", info.File, err)
		}
		return checkSchemaExtent(msg, man, &info)
	})
	if err != nil {
		return nil, err
	}
	ix := &shardIndex{schemaMsg: msg, pages: make([]pageLoc, len(pm.Pages)), file: f}
	for i, p := range pm.Pages {
		crc, _ := strconv.ParseUint(p.CRC32C, 16, 32) // validated: 8 hex digits
		ix.pages[i] = pageLoc{off: p.Offset, meta: p.Metadata, size: p.Length, crc: uint32(crc)}
	}
	return ix, nil
}

// checkSchemaExtent checks a shard's schema message read by its page map:
// the map's CRC-32C, then the schema against the manifest's.
func checkSchemaExtent(msg []byte, man *Manifest, info *ShardInfo) error {
	if got := crcHex(msg); got != info.PageMap.Schema.CRC32C {
		return corrupt(info.File, "checksum", "schema message: crc32c %s, the page map says %s", got, info.PageMap.Schema.CRC32C)
	}
	s, err := readSchemaMessage(msg)
	if err != nil {
		return corrupt(info.File, "arrow", "%v", err)
	}
	if err := checkSchema(s, man); err != nil {
		return corrupt(info.File, "schema", "%v", err)
	}
	return nil
}

// sameAsMap checks a scan's index against the manifest's page map, when
// there is one: a map that disagrees with the file it maps is damage.
func sameAsMap(ix *shardIndex, info *ShardInfo) error {
	pm := info.PageMap
	if pm == nil {
		return nil
	}
	got := ix.pageMap()
	if got.Schema != pm.Schema {
		return corrupt(info.File, "page_map", "the schema message is not where and what the page map says")
	}
	for i, p := range pm.Pages {
		if l := got.Pages[i]; l != p {
			return corrupt(info.File, "page_map", "page %d: the file has it at %d+%d (metadata %d, crc32c %s), the page map at %d+%d (metadata %d, crc32c %s)",
				i, l.Offset, l.Length, l.Metadata, l.CRC32C, p.Offset, p.Length, p.Metadata, p.CRC32C)
		}
	}
	return nil
}

// footerBlocks reads the record batch blocks of an Arrow file footer,
// bounding the vector before reading it.
func footerBlocks(footer []byte) (locs []pageLoc, err error) {
	defer func() {
		if p := recover(); p != nil {
			locs, err = nil, fmt.Errorf("footer: %v", p)
		}
	}()
	t := table(footer, flatbuffers.GetUOffsetT(footer))
	if err := checkVector(footer, t, 10, 24); err != nil {
		return nil, err
	}
	o := flatbuffers.UOffsetT(t.Offset(10))
	if o == 0 {
		return nil, nil
	}
	vec, l := t.Vector(o), t.VectorLen(o)
	locs = make([]pageLoc, l)
	for i := range locs {
		at := int(vec) + 24*i
		// struct Block { offset: long; metaDataLength: int; (pad 4) bodyLength: long }
		off := int64(binary.LittleEndian.Uint64(footer[at:]))
		meta := int64(int32(binary.LittleEndian.Uint32(footer[at+8:])))
		body := int64(binary.LittleEndian.Uint64(footer[at+16:]))
		if off < 0 || meta < 8 || body < 0 || body > MaxBatchBodyBytes {
			return nil, fmt.Errorf("footer block %d: offset %d, metadata %d, body %d bytes", i, off, meta, body)
		}
		locs[i] = pageLoc{off: off, meta: meta, size: meta + body}
	}
	return locs, nil
}

// readSchemaMessage decodes a schema message (as framed in the stream),
// its vectors bounded first (checkSchemaMessage).
func readSchemaMessage(msg []byte) (s *arrow.Schema, err error) {
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("schema: %v", p)
		}
	}()
	if err := checkSchemaMessage(msg); err != nil {
		return nil, err
	}
	rd, err := ipc.NewReader(io.MultiReader(bytes.NewReader(msg), bytes.NewReader(endOfStream[:])))
	if err != nil {
		return nil, err
	}
	defer rd.Release()
	return rd.Schema(), nil
}

// readPage reads page pi of shard si by offset into buf (grown as
// needed) under ctx and checks its CRC-32C.
func readPage(ctx context.Context, f StoreFile, info *ShardInfo, pi int, loc pageLoc, buf []byte) ([]byte, error) {
	if int64(cap(buf)) < loc.size {
		buf = make([]byte, loc.size)
	}
	buf = buf[:loc.size]
	return buf, checked(ctx, f, func(f io.ReaderAt) error {
		if _, err := f.ReadAt(buf, loc.off); err != nil {
			if errors.Is(err, io.EOF) {
				return corrupt(info.File, "size", "batch %d ends past the file's end (truncated or replaced)", pi)
			}
			return fmt.Errorf("shard: %s: %w", info.File, err)
		}
		if got := crc32c.Checksum(buf); got != loc.crc {
			return corrupt(info.File, "checksum", "batch %d: crc32c %08x where the manifest's page map or the first read of the file says %08x (damaged in transfer or on disk, or changed since)", pi, got, loc.crc)
		}
		if err := checkPageFrame(buf, loc); err != nil {
			return corrupt(info.File, "arrow", "batch %d: %v", pi, err)
		}
		return nil
	})
}

// checkPageFrame checks that a page's message frame agrees with its
// footer block: arrow-go's stream reader allocates the body length the
// message states before reading it.
func checkPageFrame(page []byte, loc pageLoc) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("message: %v", p)
		}
	}()
	buf, m, err := messageTable(page[:min(int64(len(page)), loc.meta)])
	if err != nil {
		return fmt.Errorf("message: %w", err)
	}
	if 8+int64(len(buf)) != loc.meta {
		return fmt.Errorf("message of %d bytes, the footer says %d", 8+len(buf), loc.meta)
	}
	// Message: version (4), header_type (6), header (8), bodyLength (10).
	var body int64
	if o := m.Offset(10); o != 0 {
		body = m.GetInt64(m.Pos + flatbuffers.UOffsetT(o))
	}
	if body != loc.size-loc.meta {
		return fmt.Errorf("body of %d bytes, the footer says %d", body, loc.size-loc.meta)
	}
	return nil
}

// decodePage decodes one page's message and body (checked by readPage)
// behind the shard's schema message, and checks its structure: want
// graphs from id first. The record's buffers are mem's; page is not kept.
func decodePage(ix *shardIndex, page []byte, man *Manifest, info *ShardInfo, pi int, first int64, mem memory.Allocator) (b batch, rec arrow.RecordBatch, err error) {
	mem = man.boundedFor(mem, info, info.Batches[pi])
	defer func() {
		if p := recover(); p != nil {
			if rec != nil {
				rec.Release()
			}
			b, rec, err = batch{}, nil, corrupt(info.File, "arrow", "batch %d: malformed: %v", pi, p)
		}
	}()
	rd, err := ipc.NewReader(io.MultiReader(bytes.NewReader(ix.schemaMsg), bytes.NewReader(page), bytes.NewReader(endOfStream[:])),
		ipc.WithAllocator(mem))
	if err != nil {
		return batch{}, nil, corrupt(info.File, "arrow", "batch %d: %v", pi, err)
	}
	defer rd.Release()
	if !rd.Next() {
		err := rd.Err()
		if err == nil {
			err = errors.New("no record batch")
		}
		return batch{}, nil, corrupt(info.File, "arrow", "batch %d: %v", pi, err)
	}
	rec = rd.RecordBatch()
	rec.Retain()
	b, err = viewAndCheck(rec, man, first, info.Batches[pi], false)
	if err != nil {
		rec.Release()
		return batch{}, nil, corrupt(info.File, "batch "+strconv.Itoa(pi), "%v", err)
	}
	return b, rec, nil
}

// pageTable numbers the folder's pages: starts[si] is shard si's first
// page, first[p] page p's first graph id.
type pageTable struct {
	starts []int
	first  []int64
	shard  []int32
}

func newPageTable(man *Manifest) pageTable {
	var t pageTable
	for si, s := range man.Shards {
		t.starts = append(t.starts, len(t.first))
		next := s.FirstGraph
		for _, n := range s.Batches {
			t.first = append(t.first, next)
			t.shard = append(t.shard, int32(si))
			next += n
		}
	}
	t.starts = append(t.starts, len(t.first))
	return t
}

// pageOf is the page holding graph id (in range).
func (t *pageTable) pageOf(id int64) int {
	return sort.Search(len(t.first), func(i int) bool { return t.first[i] > id }) - 1
}

// NumPages is the number of record batches of the folder (pages).
func (r *Reader) NumPages() int { return len(r.pages.first) }

// PageOf returns the page holding graph id (ids must be in range).
func (r *Reader) PageOf(id int64) int { return r.pages.pageOf(r.man.PositionOf(id)) }

// PageGraphs returns page p's first position and its graph count: it
// holds the graphs Manifest.IDAt(first) … IDAt(first+n-1) (ids first …
// first+n-1 in id order).
func (r *Reader) PageGraphs(p int) (first, n int64) {
	si := r.pages.shard[p]
	return r.pages.first[p], r.man.Shards[si].Batches[p-r.pages.starts[si]]
}

// PageBytes estimates what each page takes decoded, from the manifest and
// the graph-size index when the folder has one (no shard is read): the
// cache limit and the windows are sized with it. Computed once; callers
// must not modify the slice.
func (r *Reader) PageBytes() []int64 {
	r.pageBytesOnce.Do(func() { r.pageBytes = r.estimatePages() })
	return r.pageBytes
}

func (r *Reader) estimatePages() []int64 {
	perNode, perEdge, perGraph := r.man.decodedPer()
	out := make([]int64, r.NumPages())
	gs, err := r.sizes, r.sizesErr // by position
	for p := range out {
		first, n := r.PageGraphs(p)
		if err == nil {
			for pos := first; pos < first+n; pos++ {
				out[p] += int64(gs.Nodes[pos])*perNode + int64(gs.Edges[pos])*perEdge + perGraph
			}
			continue
		}
		// Without the index: the page's share of its shard's estimate.
		si := int(r.pages.shard[p])
		s := r.man.Shards[si]
		out[p] = r.man.DecodedBytes(si) * n / max(s.NumGraphs, 1)
	}
	return out
}

// decodeBound is the most that n graphs of shard info may take decoded:
// twice their estimate at the largest graph the manifest declares (at most
// the shard's own node and edge counts), and 1 MiB for Arrow's offsets and
// padding. A buffer's declared length (a compressed buffer's uncompressed
// length prefix) is taken as given by Arrow's decoder, which allocates it
// before it inflates a byte: 2^40 in a shard whose checksums were forged
// along with it killed the daemon with Go's fatal out-of-memory, which no
// recover catches.
func (m *Manifest) decodeBound(info *ShardInfo, n int64) int64 {
	perNode, perEdge, perGraph := m.decodedPer()
	nodes, edges := info.Nodes, info.Edges
	if m.Stats.MaxNodes > 0 && n <= info.Nodes/m.Stats.MaxNodes {
		nodes = n * m.Stats.MaxNodes
	}
	if m.Stats.MaxEdges > 0 && n <= info.Edges/m.Stats.MaxEdges {
		edges = n * m.Stats.MaxEdges
	}
	est := nodes*perNode + edges*perEdge + n*perGraph
	if est < 0 || est > 1<<50 {
		return 1 << 51
	}
	return 2*est + 1<<20
}

// overDecode is a page's decoding allocator's panic value (decodeBound,
// arrowx.Bounded): the decoder's recover names the page corrupt with it.
type overDecode struct{ asked, held, limit int64 }

func (e *overDecode) String() string {
	return fmt.Sprintf("a buffer asks for %d bytes decoded (with %d held), more than its graphs can take (%d): a forged length", e.asked, e.held, e.limit)
}

// boundedFor is mem bounded at what n graphs of shard info can take.
func (m *Manifest) boundedFor(mem memory.Allocator, info *ShardInfo, n int64) memory.Allocator {
	limit := m.decodeBound(info, n)
	return &arrowx.Bounded{Allocator: mem, Limit: limit, Over: func(asked, held int64) any { return &overDecode{asked, held, limit} }}
}

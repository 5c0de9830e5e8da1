package tu

import (
	"bytes"
	"io"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/internal/text"
)

// pairReader yields the entries of an A file in batches. While the lines
// keep the plain "a, b" form (scanPairs'), the file is cut into blocks of
// whole lines that are parsed on goroutines of their own, several at once,
// and handed over in file order. From the first line that does not (and
// at the end of the file, or at a read error), the rest of the stream goes
// through a lineReader: the rest of that block, the blocks after it, then
// the source's unread part. So every other form, every fault and every line
// number is answered exactly as a lineReader over the whole file answers
// it; on two cores the parse of a large file overlaps reading, hashing and
// canonicalising it.
type pairReader struct {
	file   string
	line   int64 // lines yielded before the sequential part
	blocks chan *pairBlock
	free   chan *pairBlock
	stop   chan struct{}
	done   chan struct{}
	cur    *pairBlock // handed over by batch, recycled by the next call
	seq    *text.Reader
	seqBlk pairBlock // batches of the sequential part

	blockSize int
	locate    *graphOf // nil: pairs only
}

// pairBlock is whole lines of the file and their parse.
type pairBlock struct {
	data  []byte
	pairs []uint64 // scanPairs' result: a<<32 | b per line
	used  int      // bytes of data that pairs covers
	rest  io.Reader
	final bool // the last block: rest is what follows data
	// With a graphOf: the first keyLines lines of pairs as entries (keys,
	// self-loops left out and counted) in runs of one graph each.
	keyLines  int
	keys      []ingest.Entry
	runs      []keyRun
	selfLoops int64
	parsed    chan struct{}
}

// keyRun is consecutive entries of one graph: keys[start:] up to the next
// run's start; line is the index in pairs of its first entry.
type keyRun struct {
	g, start, line int
}

// graphOf finds the graph an entry's two nodes lie in, remembering the last
// graph's nodes so that entries inside it need no lookup. It only reads the
// Dataset; copies are independent.
type graphOf struct {
	n         int64
	nodeGraph []int32
	start     []int64
	g         int    // the graph found last
	base      int64  // its first node, 1-based: a node's local id is id − base
	width     uint64 // its number of nodes
}

// find reports whether nodes a and c (1-based) exist and lie in one graph,
// which it leaves in f.g and f.base; err names the fault otherwise.
func (f *graphOf) find(a, c int64) bool {
	if max(uint64(a-f.base), uint64(c-f.base)) < f.width {
		return true
	}
	return f.lookUp(a, c)
}

// lookUp is find's slow path, kept out of line so that find inlines.
//
//go:noinline
func (f *graphOf) lookUp(a, c int64) bool {
	if a < 1 || a > f.n || c < 1 || c > f.n || f.nodeGraph[a-1] != f.nodeGraph[c-1] {
		return false
	}
	f.g = int(f.nodeGraph[a-1])
	f.base, f.width = f.start[f.g]+1, uint64(f.start[f.g+1]-f.start[f.g])
	return true
}

// err names why find refused a and c, on line line of file.
func (f *graphOf) err(file string, line, a, c int64) error {
	switch {
	case a < 1 || a > f.n:
		return formatErr(file, line, 1, "node %d out of range 1..%d", a, f.n)
	case c < 1 || c > f.n:
		return formatErr(file, line, 2, "node %d out of range 1..%d", c, f.n)
	}
	ga, gc := f.nodeGraph[a-1], f.nodeGraph[c-1]
	return formatErr(file, line, 0, "edge (%d, %d) joins graph %d and graph %d", a, c, ga+1, gc+1)
}

// key turns the block's parsed lines into entries on its parsing goroutine:
// what Graphs does per line, up to the first line find refuses (Graphs then
// takes that one line by line and names it).
func (b *pairBlock) key(at graphOf) {
	b.keys, b.runs, b.selfLoops = b.keys[:0], b.runs[:0], 0
	runG := -1
	for i, p := range b.pairs {
		a, c := int64(p>>32), int64(p&(1<<32-1))
		if !at.find(a, c) {
			b.keyLines = i
			return
		}
		if a == c {
			b.selfLoops++
			continue
		}
		if at.g != runG {
			b.runs = append(b.runs, keyRun{g: at.g, start: len(b.keys), line: i})
			runG = at.g
		}
		b.keys = append(b.keys, ingest.Pack(a-at.base, c-at.base))
	}
	b.keyLines = len(b.pairs)
}

const pairBlocks = 6 // in flight: the one being read, parsed and handed over

// pairBlockSize is the size of Graphs' blocks (a variable so that tests
// can make blocks of a few lines).
var pairBlockSize = 1 << 20

// newPairReader reads src in blocks of blockSize bytes (pairBlockSize
// unless a test asks for small ones), making each block's entries with
// locate when it is not nil.
func newPairReader(src io.Reader, file string, blockSize int, locate *graphOf) *pairReader {
	r := &pairReader{
		blockSize: blockSize, file: file, locate: locate, blocks: make(chan *pairBlock, pairBlocks), free: make(chan *pairBlock, pairBlocks),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	for range pairBlocks {
		r.free <- &pairBlock{}
	}
	go r.dispatch(src)
	return r
}

// dispatch reads src into blocks cut after their last '\n', starts each
// one's parse and queues it in file order. A block that reaches the end of
// src, a read error, or no '\n' at all is the final one: what follows its
// data (nothing, the error, or the rest of src) is left to the lineReader.
func (r *pairReader) dispatch(src io.Reader) {
	defer close(r.done)
	defer close(r.blocks)
	var carry []byte // a partial line, the start of the next block
	for {
		var b *pairBlock
		select {
		case b = <-r.free:
		case <-r.stop:
			return
		}
		if cap(b.data) < len(carry)+r.blockSize {
			b.data = make([]byte, 0, len(carry)+2*r.blockSize)
		}
		m := copy(b.data[:len(carry)], carry)
		n, err := io.ReadFull(src, b.data[m:m+r.blockSize])
		b.data = b.data[:m+n]
		b.final, b.rest = false, nil
		switch cut := bytes.LastIndexByte(b.data, '\n') + 1; {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			b.final, b.rest = true, bytes.NewReader(nil)
		case err != nil:
			b.final, b.rest = true, errReader{err}
		case cut == 0:
			b.final, b.rest = true, src
		default:
			carry = append(carry[:0], b.data[cut:]...)
			b.data = b.data[:cut]
		}
		b.parsed = make(chan struct{})
		go func() {
			b.pairs, b.used = text.ScanPairs(b.data, b.pairs[:0])
			b.keyLines = 0
			if r.locate != nil {
				b.key(*r.locate)
			}
			close(b.parsed)
		}()
		select {
		case r.blocks <- b:
		case <-r.stop:
			return
		}
		if b.final {
			return
		}
	}
}

// batch returns the next lines in the plain form (pairs; with a graphOf,
// their entries for a prefix of them), valid until the following call. No
// pairs means: take the next line from r.seq (next, pair, slowPair), which
// is then set.
func (r *pairReader) batch() *pairBlock {
	if r.seq != nil {
		r.seqBlk.pairs = r.seq.FastPairs(r.seqBlk.pairs[:0])
		return &r.seqBlk
	}
	if r.cur != nil {
		r.free <- r.cur
		r.cur = nil
	}
	b, ok := <-r.blocks
	if !ok { // only after close
		r.toSequential(bytes.NewReader(nil))
		return &r.seqBlk
	}
	<-b.parsed
	r.line += int64(len(b.pairs))
	switch {
	case b.final:
		r.toSequential(io.MultiReader(bytes.NewReader(b.data[b.used:]), b.rest))
	case b.used < len(b.data):
		r.toSequential(io.MultiReader(bytes.NewReader(b.data[b.used:]), &blockStream{r: r}))
	default:
		r.cur = b
	}
	return b
}

func (r *pairReader) toSequential(rest io.Reader) {
	r.seq = text.NewReader(rest, name, r.file)
	r.seq.Line = r.line
}

// lineNo is the number of the last line of the last batch (or of the line
// that r.seq returned last).
func (r *pairReader) lineNo() int64 {
	if r.seq != nil {
		return r.seq.Line
	}
	return r.line
}

// close stops reading ahead; call it before closing the source.
func (r *pairReader) close() {
	close(r.stop)
	<-r.done
}

// blockStream reads the data of the blocks still queued, then what follows
// the final one: the stream after a block that left the plain form. It
// hands each block back once read (the block that left the plain form stays
// with the lineReader).
type blockStream struct {
	r    *pairReader
	cur  *pairBlock
	data []byte
	rest io.Reader
}

func (s *blockStream) Read(p []byte) (int, error) {
	for len(s.data) == 0 {
		if s.rest != nil {
			return s.rest.Read(p)
		}
		if s.cur != nil {
			<-s.cur.parsed // its parse may still be reading data
			s.r.free <- s.cur
			s.cur = nil
		}
		b, ok := <-s.r.blocks
		if !ok {
			return 0, io.EOF
		}
		s.data = b.data
		if b.final {
			s.rest = b.rest // b stays: rest may be reading after it
		} else {
			s.cur = b
		}
	}
	n := copy(p, s.data)
	s.data = s.data[n:]
	return n, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

package ingest

// Read-ahead: a source read (and so hashed) one block ahead on its own
// goroutine.

import "io"

// ReadAhead reads src on a goroutine of its own, one block ahead of the
// caller: a reader of a compressed entry (OpenDirect under a decompressor)
// moves the inflating off the parser's goroutine, and several files read
// together inflate on as many cores.
func ReadAhead(src io.ReadCloser) io.ReadCloser { return newPrefetcher(src) }

// prefetcher reads (and so hashes) its source in a goroutine, one block
// ahead of the parser: on two cores, reading and SHA-256 overlap parsing.
// Its source's errors reach the parser unchanged: io.EOF only where the
// source said io.EOF (a decompressor's io.ErrUnexpectedEOF, a file cut
// short, stays an error).
type prefetcher struct {
	src    io.ReadCloser
	full   chan block
	free   chan []byte
	stop   chan struct{}
	done   chan struct{}
	cur    []byte
	curBuf []byte
	err    error
}

type block struct {
	buf []byte
	n   int
	err error
}

const prefetchBlock = 1 << 20

func newPrefetcher(src io.ReadCloser) *prefetcher {
	p := &prefetcher{
		src: src, full: make(chan block, 2), free: make(chan []byte, 3),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	for range 3 {
		p.free <- make([]byte, prefetchBlock)
	}
	go p.run()
	return p
}

// fill reads into buf until it is full or the source returns an error,
// which it returns as the source gave it (io.ReadFull would turn a short
// last block's io.EOF into io.ErrUnexpectedEOF, and the two must stay
// apart).
func fill(src io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		k, err := src.Read(buf[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (p *prefetcher) run() {
	defer close(p.done)
	for {
		var buf []byte
		select {
		case buf = <-p.free:
		case <-p.stop:
			return
		}
		n, err := fill(p.src, buf)
		select {
		case p.full <- block{buf: buf, n: n, err: err}:
		case <-p.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

func (p *prefetcher) Read(b []byte) (int, error) {
	for len(p.cur) == 0 {
		if p.err != nil {
			return 0, p.err
		}
		if p.curBuf != nil {
			p.free <- p.curBuf
			p.curBuf = nil
		}
		blk := <-p.full
		p.cur, p.curBuf, p.err = blk.buf[:blk.n], blk.buf, blk.err
	}
	n := copy(b, p.cur)
	p.cur = p.cur[n:]
	return n, nil
}

func (p *prefetcher) Close() error {
	close(p.stop)
	<-p.done
	return p.src.Close()
}

package pagecache

import "context"

// A Stream is a future registered with the cache: the stream's pins and
// releases drive reading ahead, the end of graphs' use and cooling.
type Stream struct {
	c     *Cache
	f     *Future
	ahead int
}

// Foresee registers f: until Close, eviction drops the unpinned page
// whose next use by any registered stream is farthest (pages none needs
// first), and a read ahead displaces only pages needed later than the one
// it reads. The first pin of batch b reads ahead the pages of batch
// b+ahead. The future's own bytes count in the cache's use: a stream's
// future takes room from pages, not from outside the limit.
func (c *Cache) Foresee(f *Future, ahead int) *Stream {
	n := f.Bytes()
	c.mu.Lock()
	c.futures = append(c.futures, f)
	c.used += n
	c.futureBytes += n
	c.notePeak()
	c.evictLocked()
	c.mu.Unlock()
	return &Stream{c: c, f: f, ahead: ahead}
}

// Pin pins page p's graph row for batch b (Cache.Pin); the first pin of
// b reads ahead the pages of b+ahead, reads that end with ctx.
func (s *Stream) Pin(ctx context.Context, b, p, row int) (Page, int, StreamHandle, error) {
	if b >= 0 && b < s.f.batches() && s.f.begin(b) && b+s.ahead < s.f.batches() {
		s.f.pagesOf(b+s.ahead, func(p int) { s.c.prefetch(ctx, p) })
	}
	pg, at, h, err := s.c.Pin(ctx, p, row)
	return pg, at, StreamHandle{h: h, s: s, b: int32(b)}, err
}

// A StreamHandle is a stream's pin.
type StreamHandle struct {
	h Handle
	s *Stream
	b int32
}

// Release ends the pin, charging ch (nil: nothing) to its page first.
// The release of batch b's last planned pin marks b built.
func (h StreamHandle) Release(ch Charge) {
	if ch != nil {
		h.s.c.Charge(int(h.h.p), ch)
	}
	h.h.Release()
	if f, b := h.s.f, int(h.b); b >= 0 && b < f.batches() && f.released(b) {
		f.built(b)
	}
}

// ReleaseBatch says batch b was sent: the stream's uses before b+1 are past, and
// the pages whose last batch was b are cooled (Cache.Cool).
func (s *Stream) ReleaseBatch(b int) {
	if b < 0 || b >= s.f.batches() {
		return
	}
	s.f.now.Store(int64(b) + 1)
	s.f.pagesOf(b, func(p int) {
		if s.f.lastBatch(p) == b {
			s.c.Cool(p)
		}
	})
}

// Close unregisters the stream's future.
func (s *Stream) Close() {
	c := s.c
	n := s.f.Bytes()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, g := range c.futures {
		if g == s.f {
			c.futures = append(c.futures[:i], c.futures[i+1:]...)
			c.used -= n
			c.futureBytes -= n
			return
		}
	}
}

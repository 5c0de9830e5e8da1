package shard

import "github.com/apache/arrow-go/v18/arrow"

// Pinning a page of the cache by the page (lazy.go holds the cache): the
// one path that loads a page, and the unpin that lets it go.

// acquire pins page p, loading it when absent (one loader at a time per
// page: the others wait for it). row >= 0 asks for that row too: a page
// compacted without it and pinned by none is read again whole.
//
// A panic anywhere in it (a bug: the page's bytes are checked, and their
// decoding recovers) leaves mu unlocked and the page's waiters released,
// so a worker that recovers it does not hang every later reader.
func (r *Reader) acquire(p, row int) (_ *pageSlot, err error) {
	l := r.lazy
	l.mu.Lock()
	locked := true
	defer func() {
		if locked {
			l.mu.Unlock()
		}
	}()
	unlock := func() { locked = false; l.mu.Unlock() }
	lock := func() { l.mu.Lock(); locked = true }
	for {
		s := &l.slots[p]
		if s.loaded && row >= 0 && s.pins == 0 && l.rowOf(s, row) < 0 {
			l.drop(p)
			continue
		}
		if s.loaded {
			l.unlink(p)
			s.pins++
			s.cold = false
			return s, nil
		}
		if s.ready != nil { // another goroutine is loading it
			ch := s.ready
			unlock()
			<-ch
			lock()
			continue
		}
		ch := make(chan struct{})
		s.ready = ch
		unlock()
		b, rec, bytes, est := r.loadGuarded(p, s, ch, &err)
		lock()
		close(ch)
		if err != nil {
			s.ready = nil
			return nil, err
		}
		s.batch, s.rec, s.loaded = b, rec, true
		s.bytes = bytes
		l.used += s.bytes
		l.decoded += s.bytes
		l.estimated += est
		l.loads.Add(1)
		l.resident++
		s.pins++
		l.notePeak()
		l.evictLocked()
		return s, nil
	}
}

// loadGuarded reads page p for acquire, outside mu. Should it panic, it
// clears the slot's loading mark and releases its waiters (under mu)
// before the panic goes on.
func (r *Reader) loadGuarded(p int, s *pageSlot, ch chan struct{}, err *error) (b batch, rec arrow.RecordBatch, bytes, est int64) {
	done := false
	defer func() {
		if !done {
			r.lazy.mu.Lock()
			s.ready = nil
			close(ch)
			r.lazy.mu.Unlock()
		}
	}()
	alloc := &countingAlloc{Allocator: r.lazy.mem}
	b, rec, *err = r.loadPage(p, alloc)
	est = r.PageBytes()[p] // outside mu: the first call reads the graph-size index
	done = true
	return b, rec, alloc.n.Load(), est
}

func (r *Reader) unpin(p int) {
	l := r.lazy
	l.mu.Lock()
	s := &l.slots[p]
	if s.pins--; s.pins == 0 {
		if s.cold {
			l.push(&l.cold, p)
		} else {
			l.push(&l.warm, p)
		}
	}
	l.evictLocked()
	l.mu.Unlock()
}

// pinPrivate serves row of page p, compacted away from the page while
// others pin it, by a private read of the page for this pin alone.
// Waiting for the other pins to go could wait on this worker's own; the
// read is counted in the cache's use while held instead, so cooler pages
// make room.
func (r *Reader) pinPrivate(p, row int) (Graph, func(), error) {
	alloc := &countingAlloc{Allocator: r.lazy.mem}
	b, rec, err := r.loadPage(p, alloc)
	if err != nil {
		return Graph{}, nil, err
	}
	l := r.lazy
	n := alloc.n.Load()
	l.mu.Lock()
	l.used += n
	l.private++
	l.notePeak()
	l.evictLocked()
	l.mu.Unlock()
	l.loads.Add(1)
	release := func() {
		rec.Release()
		l.mu.Lock()
		l.used -= n
		l.private--
		l.mu.Unlock()
	}
	return r.graphOf(&b, row), release, nil
}

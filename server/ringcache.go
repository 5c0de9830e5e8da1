package server

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/augloader/augloader/loader"
)

// ringCache keeps the mappings of shared-memory clients' rings between
// their streams. A training loop asks for one epoch after another over
// the same ring (the Python client makes one and reuses it), and mapping
// it populated costs about 2.5 ms per 32 MiB on every request (8,192
// page-table entries), unmapping it more at the stream's end: measured on
// COLLAB's headline epoch, that was a third of the time before the first
// batch reached the trainer, with both processes waiting on it.
//
// A ring is known again by its file (device and inode of the memfd the
// request passes): while a mapping is held, its file cannot be freed, so
// no other file can take that inode number. The client's descriptor is
// still checked on every request (checkRing) and closed as before; only
// the mapping stays. One stream uses a mapping at a time; a second stream
// over the same ring, at once, maps its own.
//
// A mapping holds its bytes of the memory budget from when it is made to
// when it is unmapped, idle or not, so the budget bounds rings as it did
// when each stream mapped its own. Idle ones give way: a take of the
// budget that cannot have its bytes at once unmaps them first
// (Memory.AddReclaim), and a ring given back while a take is under way is
// unmapped at once. Otherwise an idle mapping goes after ringIdleTTL, or
// when more than maxIdleRings are idle; until then it keeps its ring's
// memory alive even if its client has closed it.
type ringCache struct {
	budget  *loader.Memory // nil: none
	metrics *Metrics       // nil: none

	mu     sync.Mutex
	rings  []*cachedRing
	timer  *time.Timer
	closed bool
}

type cachedRing struct {
	dev, ino uint64
	mem      []byte
	held     int64 // bytes of the budget it holds
	busy     bool
	idle     time.Time // when it was last given back
}

func newRingCache(budget *loader.Memory, metrics *Metrics) *ringCache {
	c := &ringCache{budget: budget, metrics: metrics}
	if budget != nil {
		budget.AddReclaim(c.reclaim)
	}
	return c
}

const (
	maxIdleRings = 4
	ringIdleTTL  = 30 * time.Second
)

// get returns a mapping of at least n bytes of the ring fd, read and
// write, populated: a cached one of the same file when it is idle and
// holds n to 2n bytes (a stream's share of the ring moves a little with
// its largest batch, epoch to epoch), else a new one of n bytes with n
// bytes of the budget. Nil and no error: the budget has no room for a
// new one now.
func (c *ringCache) get(fd int, n int64) (*cachedRing, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	c.mu.Lock()
	for _, r := range c.rings {
		if m := int64(len(r.mem)); !r.busy && r.dev == st.Dev && r.ino == st.Ino && n <= m && m <= 2*n {
			r.busy = true
			c.mu.Unlock()
			return r, nil
		}
	}
	c.mu.Unlock()
	var held int64
	if c.budget != nil {
		if !c.budget.TryAcquire(n) {
			return nil, nil
		}
		held = n
	}
	mem, err := unix.Mmap(fd, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		c.release(held)
		return nil, err
	}
	r := &cachedRing{dev: st.Dev, ino: st.Ino, mem: mem, held: held, busy: true}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.metrics.ringMapped()
	if !c.closed { // else not kept: put unmaps it
		c.rings = append(c.rings, r)
	}
	return r, nil
}

// put gives r back once its stream has ended: it stays mapped for the
// next stream over the same ring, unless a take of the budget is under
// way, more than maxIdleRings are idle (the longest idle goes) or the
// cache is closed.
func (c *ringCache) put(r *cachedRing) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := c.index(r); i < 0 || c.closed || (c.budget != nil && c.budget.Wanted()) {
		if i >= 0 {
			c.rings = append(c.rings[:i], c.rings[i+1:]...)
		}
		c.unmap(r)
		return
	}
	r.busy, r.idle = false, time.Now()
	c.trim(maxIdleRings, time.Time{})
	if c.timer == nil {
		c.timer = time.AfterFunc(ringIdleTTL, c.expire)
	}
}

// expire unmaps the rings idle for ringIdleTTL, and comes back while any
// ring is left.
func (c *ringCache) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trim(maxIdleRings, time.Now().Add(-ringIdleTTL))
	c.timer = nil
	if len(c.rings) > 0 && !c.closed {
		c.timer = time.AfterFunc(ringIdleTTL, c.expire)
	}
}

// reclaim unmaps every idle ring, giving its bytes back to the budget
// (Memory.AddReclaim).
func (c *ringCache) reclaim() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trim(0, time.Time{})
}

// close unmaps every idle ring; a busy one is unmapped when its stream
// puts it back.
func (c *ringCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.trim(0, time.Time{})
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// trim unmaps idle rings given back before cutoff, then the longest idle
// ones beyond keep (keep 0: every idle ring). c.mu is held.
func (c *ringCache) trim(keep int, cutoff time.Time) {
	for {
		idle, oldest := 0, -1
		for i, r := range c.rings {
			if r.busy {
				continue
			}
			idle++
			if oldest < 0 || r.idle.Before(c.rings[oldest].idle) {
				oldest = i
			}
		}
		if oldest < 0 || (idle <= keep && !c.rings[oldest].idle.Before(cutoff)) {
			return
		}
		c.unmap(c.rings[oldest])
		c.rings = append(c.rings[:oldest], c.rings[oldest+1:]...)
	}
}

// unmap unmaps r and gives its bytes back to the budget.
func (c *ringCache) unmap(r *cachedRing) {
	unix.Munmap(r.mem)
	r.mem = nil
	c.release(r.held)
	r.held = 0
}

func (c *ringCache) release(n int64) {
	if c.budget != nil && n > 0 {
		c.budget.Release(n)
	}
}

// index is r's place in c.rings, -1 when it is not kept there. c.mu is
// held.
func (c *ringCache) index(r *cachedRing) int {
	for i, x := range c.rings {
		if x == r {
			return i
		}
	}
	return -1
}

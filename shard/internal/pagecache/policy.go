package pagecache

import "math"

// What goes when room is needed: by next use with futures registered
// (Belady's rule, after what no stream needs, charges and garbage), by
// recency without. Every function here runs under mu.

// never is the distance of a page no batch ahead needs.
const never = math.MaxInt64

// roomFor makes room for est bytes of page p, to be read ahead, and
// reports whether there is. Without registered futures the room comes
// from cold pages only (a warm one may be needed next); with them, from
// pages needed later than p, farthest first, and nothing is dropped
// unless that makes room (a page no stream needs is never read ahead).
func (c *Cache) roomFor(p int, est int64) bool {
	if len(c.futures) == 0 {
		if c.used-c.coldHeld+est > c.limit {
			return false
		}
		for c.used+est > c.limit && c.evictOne(true) {
		}
		return true
	}
	dp := c.nextUse(p)
	if dp == never {
		return false
	}
	if c.used+est > c.limit {
		var later int64
		for q := range c.slots {
			s := &c.slots[q]
			if !s.loaded {
				continue
			}
			later += s.charged // shed before any page
			if s.in != nil && c.nextUse(q) > dp {
				later += s.bytes
			} else if s.in != nil {
				later += c.garbage(q) // compacted before any page
			}
		}
		if c.used-later+est > c.limit {
			return false
		}
	}
	for c.used+est > c.limit {
		if v, d := c.farthest(); v >= 0 && d == never {
			c.drop(v)
			continue
		}
		if c.shedOne() || c.compactOne() {
			continue
		}
		v, d := c.farthest()
		if v < 0 || d <= dp {
			break
		}
		c.drop(v)
	}
	return true
}

// evictLocked drops unpinned pages while the cache is over its limit
// (everything resident pinned: over the limit until a release).
func (c *Cache) evictLocked() {
	for c.used > c.limit && c.evictOne(false) {
	}
}

// evictOne drops one unpinned page, sheds what was charged to one page or
// shrinks one, and reports whether there was one. With registered
// futures: a page no stream needs, else a charge (shed), else the graphs
// no stream needs again (compact.go), else the page needed farthest ahead
// (Belady), trimmed first when that frees enough; without: cold pages,
// least recently released first, then a charge, then warm pages likewise
// (only a cold one when coldOnly).
func (c *Cache) evictOne(coldOnly bool) bool {
	victim := -1
	if len(c.futures) > 0 {
		var d int64
		victim, d = c.farthest()
		if d != never && (c.shedOne() || c.compactOne() || victim >= 0 && c.trim(victim, c.used-c.limit)) {
			return true
		}
	} else {
		victim = int(c.cold.head)
		if victim < 0 && !coldOnly {
			if c.shedOne() {
				return true
			}
			victim = int(c.warm.head)
		}
	}
	if victim < 0 {
		return false
	}
	c.drop(victim)
	return true
}

// drop releases unpinned loaded page victim and forgets its charges.
func (c *Cache) drop(victim int) {
	c.unlink(victim)
	s := &c.slots[victim]
	if s.page != nil {
		s.page.Release()
	}
	c.used -= s.bytes + s.charged
	c.resident--
	for _, ch := range s.charges {
		ch.Forget()
	}
	*s = slot{}
	c.evictions.Add(1)
}

// shedOne forgets what was charged to one loaded page, pinned or not (the
// one needed farthest ahead with futures, else the first found), and
// reports whether any page had a charge.
func (c *Cache) shedOne() bool {
	victim, dist := -1, int64(-1)
	for p := range c.slots {
		s := &c.slots[p]
		if !s.loaded || s.charged == 0 {
			continue
		}
		d := int64(0)
		if len(c.futures) > 0 {
			d = c.nextUse(p)
		}
		if d > dist {
			victim, dist = p, d
		}
		if len(c.futures) == 0 || d == never {
			break
		}
	}
	if victim < 0 {
		return false
	}
	s := &c.slots[victim]
	c.used -= s.charged
	if s.in == &c.cold {
		c.coldHeld -= s.charged
	}
	for _, ch := range s.charges {
		ch.Forget()
	}
	clear(s.charges)
	s.charged, s.charges = 0, s.charges[:0]
	c.sheds.Add(1)
	return true
}

// nextUse is page p's distance to its next use by any registered stream
// (never without one).
func (c *Cache) nextUse(p int) int64 {
	d := int64(never)
	for _, f := range c.futures {
		d = min(d, f.distance(p))
	}
	return d
}

// farthest returns the unpinned loaded page whose next use is farthest,
// and that distance; cold pages before warm ones and each list oldest
// first break ties. -1 when none is unpinned. With futures.
func (c *Cache) farthest() (victim int, dist int64) {
	victim, dist = -1, -1
	for _, l := range []*list{&c.cold, &c.warm} {
		for p := l.head; p >= 0; p = c.slots[p].next {
			if d := c.nextUse(int(p)); d > dist {
				victim, dist = int(p), d
				if d == never {
					return victim, dist
				}
			}
		}
	}
	return victim, dist
}

// needed reports whether a registered stream needs the graph at position
// pos of page p again (true without futures).
func (c *Cache) needed(p int, pos int64) bool {
	if len(c.futures) == 0 {
		return true
	}
	for _, f := range c.futures {
		if f.needs(p, pos) {
			return true
		}
	}
	return false
}

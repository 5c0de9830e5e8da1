package pagecache

import (
	"cmp"
	"slices"
)

// Compaction: with futures registered, a page the cache must give room
// from can shrink to the graphs some stream still needs instead of being
// dropped. A windowed shuffle draws each batch from every page of its
// window, so a cache a little smaller than the window reloads a page at
// nearly every batch whichever page it drops; yet each batch also spends
// some graphs of every page for good, and a page without them fits.
// Copying the graphs kept costs a memory copy of what stays, less than
// one read and decode of the page it saves. Every function here runs
// under mu, with futures.

// compactOne shrinks the unpinned page with the most bytes no registered
// stream needs again and reports whether there was one to shrink.
func (c *Cache) compactOne() bool {
	victim, most := -1, int64(0)
	for _, l := range []*list{&c.cold, &c.warm} {
		for p := l.head; p >= 0; p = c.slots[p].next {
			if g := c.garbage(int(p)); g > most {
				victim, most = int(p), g
			}
		}
	}
	if victim < 0 {
		return false
	}
	c.compact(victim, func(pos int64) bool { return c.needed(victim, pos) })
	return true
}

// trim shrinks unpinned page p, needed again, by at least need bytes and
// an eighth of it, dropping the graphs whose last use is farthest (and
// those none needs), and reports whether it freed anything. Dropping the
// page whole costs a read when it is next needed; trimming costs one
// when its farthest graph is, and meanwhile it serves the batches
// nearer: at a window's start, when no graph is spent yet and the
// window's pages are just over the limit, dropping one reads a page at
// nearly every batch.
func (c *Cache) trim(p int, need int64) bool {
	s := &c.slots[p]
	first, n := c.src.Graphs(p)
	total := s.page.Total()
	if total == 0 || n == 0 {
		return false
	}
	type use struct {
		last int32
		row  int
	}
	uses := make([]use, 0, n)
	for row := range int(n) {
		if at := c.rowOf(s, row); at >= 0 {
			uses = append(uses, use{c.lastUse(p, first+int64(row)), row})
		}
	}
	slices.SortFunc(uses, func(a, b use) int { return cmp.Compare(b.last, a.last) })
	target := max(need, s.bytes/8)
	drop := make([]bool, n) // by row
	var freed int64
	dropped := 0
	for _, u := range uses {
		if freed >= target || dropped+1 >= len(uses) {
			break
		}
		freed += s.bytes * s.page.Weight(int(c.rowOf(s, u.row))) / total
		drop[u.row] = true
		dropped++
	}
	if dropped == 0 {
		return false
	}
	c.compact(p, func(pos int64) bool { return !drop[pos-first] && c.needed(p, pos) })
	c.trims.Add(1)
	return true
}

// lastUse is the latest batch, over the registered streams, that needs
// the graph at pos (-1: none).
func (c *Cache) lastUse(p int, pos int64) int32 {
	last := int32(-1)
	for _, f := range c.futures {
		if u := f.last(p, pos); int64(u) >= f.now.Load() {
			last = max(last, u)
		}
	}
	return last
}

// compact replaces loaded page p by its graphs at positions keep says,
// copied (rows maps the page's graphs to them).
func (c *Cache) compact(p int, keep func(pos int64) bool) {
	s := &c.slots[p]
	first, n := c.src.Graphs(p)
	kept := make([]int, 0, n)
	rows := make([]int32, n)
	for row := range int(n) {
		rows[row] = -1
		if at := c.rowOf(s, row); at >= 0 && keep(first+int64(row)) {
			rows[row] = int32(len(kept))
			kept = append(kept, int(at))
		}
	}
	pg, bytes := s.page.Subset(kept)
	c.used -= s.bytes - bytes
	if s.in == &c.cold {
		c.coldHeld -= s.bytes - bytes
	}
	s.page.Release()
	s.page, s.bytes, s.rows = pg, bytes, rows
	c.compactions.Add(1)
}

// rowOf is where page s holds its graph row (-1: compacted away).
func (c *Cache) rowOf(s *slot, row int) int32 {
	if s.rows == nil {
		return int32(row)
	}
	return s.rows[row]
}

// garbage estimates the bytes of loaded page p that no registered stream
// needs again: its bytes in the share of its weight (its edges, most of
// a page) that belongs to such graphs.
func (c *Cache) garbage(p int) int64 {
	s := &c.slots[p]
	first, n := c.src.Graphs(p)
	total := s.page.Total()
	if total == 0 {
		return 0
	}
	var gone int64
	for row := range int(n) {
		at := c.rowOf(s, row)
		if at >= 0 && !c.needed(p, first+int64(row)) {
			gone += s.page.Weight(int(at))
		}
	}
	if gone == 0 {
		return 0
	}
	return max(1, s.bytes*gone/total)
}

package shard

import (
	"cmp"
	"slices"
	"unsafe"
)

// Compaction: under a cache limit with graph futures (GraphFuture), a
// page the cache must give room from can shrink to the graphs some
// stream still needs instead of being dropped. A windowed shuffle draws
// each batch from every page of its window, so a cache a little smaller
// than the window reloads a page at nearly every batch whichever page it
// drops (the cliff docs/bench.md measures); yet each batch also spends
// some graphs of every page for good, and a page without them fits.
// Copying the graphs kept costs a memory copy of what stays, less than
// one read and decode of the page it saves.

// compactOne shrinks the unpinned page with the most bytes no registered
// stream needs again and reports whether there was one to shrink.
// Under mu, with futures.
func (l *lazy) compactOne() bool {
	victim, most := -1, int64(0)
	for _, list := range []*pageList{&l.cold, &l.warm} {
		for p := list.head; p >= 0; p = l.slots[p].next {
			if g := l.garbage(int(p)); g > most {
				victim, most = int(p), g
			}
		}
	}
	if victim < 0 {
		return false
	}
	l.compact(victim, l.needed)
	return true
}

// trim shrinks unpinned page p, needed again, by at least need bytes and
// an eighth of it, dropping the graphs whose last use is farthest (and
// those none needs), and reports whether it freed anything. Dropping the
// page whole costs a read when it is next needed; trimming costs one
// when its farthest graph is, and meanwhile it serves the batches
// nearer: at a window's start, when no graph is spent yet and the
// window's pages are just over the limit, dropping one reads a page at
// nearly every batch. Under mu, with graph futures.
func (l *lazy) trim(p int, need int64) bool {
	s := &l.slots[p]
	first, n := l.pageGraphs(p)
	total := int64(len(s.batch.edges))
	if total == 0 || n == 0 {
		return false
	}
	type use struct {
		last int32
		row  int
	}
	uses := make([]use, 0, n)
	for row := range int(n) {
		if c := l.rowOf(s, row); c >= 0 {
			last, known := l.lastUse(first + int64(row))
			if !known {
				return false // a future by page: every graph of a page is needed
			}
			uses = append(uses, use{last, row})
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
		c := l.rowOf(s, u.row)
		freed += s.bytes * int64(s.batch.edgeOff[c+1]-s.batch.edgeOff[c]) / total
		drop[u.row] = true
		dropped++
	}
	if dropped == 0 {
		return false
	}
	l.compact(p, func(pos int64) bool { return !drop[pos-first] && l.needed(pos) })
	l.trims.Add(1)
	return true
}

// lastUse is the latest batch, over the registered streams, that needs
// the graph at pos (-1: none), and false when a stream's future is by
// page.
func (l *lazy) lastUse(pos int64) (int32, bool) {
	last := int32(-1)
	for _, f := range l.futures {
		if f.lastUse == nil {
			return 0, false
		}
		if u := f.lastUse[pos].Load(); int64(u) >= f.now.Load() {
			last = max(last, u)
		}
	}
	return last, true
}

// compact replaces loaded page p's batch by its rows at positions keep
// says, copied (rows maps the page's rows to them).
func (l *lazy) compact(p int, keep func(pos int64) bool) {
	s := &l.slots[p]
	first, n := l.pageGraphs(p)
	kept := make([]int, 0, n)
	rows := make([]int32, n)
	for row := range int(n) {
		rows[row] = -1
		if c := l.rowOf(s, row); c >= 0 && keep(first+int64(row)) {
			rows[row] = int32(len(kept))
			kept = append(kept, int(c))
		}
	}
	b, bytes := s.batch.subset(kept)
	l.used -= s.bytes - bytes
	if s.list == &l.cold {
		l.coldHeld -= s.bytes - bytes
	}
	if s.rec != nil {
		s.rec.Release()
		s.rec = nil
	}
	s.batch, s.bytes, s.rows = b, bytes, rows
	l.compactions.Add(1)
}

// rowOf is where page s holds its row (-1: compacted away).
func (l *lazy) rowOf(s *pageSlot, row int) int32 {
	if s.rows == nil {
		return int32(row)
	}
	return s.rows[row]
}

// garbage estimates the bytes of loaded page p that no registered stream
// needs again: its bytes in the share of its edges (most of a page) that
// belong to such graphs.
func (l *lazy) garbage(p int) int64 {
	s := &l.slots[p]
	first, n := l.pageGraphs(p)
	total := len(s.batch.edges)
	if total == 0 {
		return 0
	}
	var gone int
	for row := range int(n) {
		c := l.rowOf(s, row)
		if c >= 0 && !l.needed(first+int64(row)) {
			gone += int(s.batch.edgeOff[c+1] - s.batch.edgeOff[c])
		}
	}
	if gone == 0 {
		return 0
	}
	return max(1, s.bytes*int64(gone)/int64(total))
}

// subset copies rows of b (in order) into a batch of their own, in Go
// memory, and returns it with its bytes.
func (b *batch) subset(rows []int) (batch, int64) {
	var n batch
	var bytes int64
	pick := func(vals []int32) []int32 {
		if vals == nil {
			return nil
		}
		out := make([]int32, len(rows))
		for i, r := range rows {
			out[i] = vals[r]
		}
		bytes += 4 * int64(len(out))
		return out
	}
	n.ids = make([]int64, len(rows))
	for i, r := range rows {
		n.ids[i] = b.ids[r]
	}
	bytes += 8 * int64(len(rows))
	n.labels, n.numNodes = pick(b.labels), pick(b.numNodes)
	n.edgeOff, n.edges = gather(b.edgeOff, b.edges, rows, &bytes)
	// featOff delimits codes (format 2's one-hot) or x, never both.
	if b.codes != nil {
		n.featOff, n.codes = gather(b.featOff, b.codes, rows, &bytes)
	} else {
		n.featOff, n.x = gather(b.featOff, b.x, rows, &bytes)
	}
	n.elOff, n.edgeLabels = gather(b.elOff, b.edgeLabels, rows, &bytes)
	n.tgtOff, n.targets = gather(b.tgtOff, b.targets, rows, &bytes)
	n.exOff, n.edgeX = gather(b.exOff, b.edgeX, rows, &bytes)
	n.ncOff, n.nodeCat = gatherCodes(b.ncOff, b.nodeCat, rows, &bytes)
	n.ecOff, n.edgeCat = gatherCodes(b.ecOff, b.edgeCat, rows, &bytes)
	return n, bytes
}

// gather copies the value ranges off[r]:off[r+1] of rows into new values
// with new offsets from 0 (nil, nil for a column without offsets).
func gather[T int32 | float32 | uint8 | uint16](off []int32, vals []T, rows []int, bytes *int64) ([]int32, []T) {
	if off == nil {
		return nil, nil
	}
	out := make([]int32, len(rows)+1)
	for i, r := range rows {
		out[i+1] = out[i] + off[r+1] - off[r]
	}
	nv := make([]T, out[len(rows)])
	for i, r := range rows {
		copy(nv[out[i]:out[i+1]], vals[off[r]:off[r+1]])
	}
	var z T
	*bytes += 4*int64(len(out)) + int64(len(nv))*int64(unsafe.Sizeof(z))
	return out, nv
}

// gatherCodes is gather for a column of codes of any width.
func gatherCodes(off []int32, c Codes, rows []int, bytes *int64) ([]int32, Codes) {
	switch {
	case off == nil:
		return nil, Codes{}
	case c.U8 != nil:
		o, v := gather(off, c.U8, rows, bytes)
		return o, Codes{U8: v}
	case c.U16 != nil:
		o, v := gather(off, c.U16, rows, bytes)
		return o, Codes{U16: v}
	}
	o, v := gather(off, c.I32, rows, bytes)
	return o, Codes{I32: v}
}

// shedOne forgets what was charged to one loaded page, pinned or not (the
// one needed farthest ahead with futures, else the first found), tells
// onEvict, and reports whether any page had a charge.
func (l *lazy) shedOne() bool {
	victim, dist := -1, int64(-1)
	for p := range l.slots {
		s := &l.slots[p]
		if !s.loaded || s.charged == 0 {
			continue
		}
		d := int64(0)
		if len(l.futures) > 0 {
			d = l.nextUse(p)
		}
		if d > dist {
			victim, dist = p, d
		}
		if len(l.futures) == 0 || d == never {
			break
		}
	}
	if victim < 0 {
		return false
	}
	s := &l.slots[victim]
	l.used -= s.charged
	if s.list == &l.cold {
		l.coldHeld -= s.charged
	}
	s.charged = 0
	l.sheds.Add(1)
	if l.onEvict != nil {
		l.onEvict(victim)
	}
	return true
}

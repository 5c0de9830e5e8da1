package aug

// NodeSam's output edges written straight into a batch's coalesced edge
// columns from the input's Index (the loader's path): the touched edges
// as bit rows and masks, every other node's run copied from the index.

import (
	"fmt"
	"math/bits"
	"slices"
)

// emitCoalesced appends out's edges to c, both directions, coalesced,
// offset by base — what emit then c.Append would — straight from the
// input's Index. Every output edge the split and the merge change has an
// end in one of at most five special output nodes, the images of v_i,
// v_k, v_o, v_p and last (spec, ascending); the touched input edges (the
// index lists of v_i, v_o, v_p and last: no pass over all edges) are
// mapped once and recorded as bits: a bit set per special over the
// output nodes (its run, sorted by a scan of the words) and, for every
// other node y, a mask of its special neighbours. Duplicates (a
// neighbour of both v_o and v_p) are one bit; nothing is sorted. Every
// other node keeps its input list less the touched nodes, merged with
// its specials (≤ 5, ascending), usually a copy less one mark at most
// (dropOnly, dropRun).
func (s *Scratch) emitCoalesced(in, out *Graph, sp *splitState, o, p, last int32, c *Coalesced, base int32) {
	ix, n, nOut := in.Index, in.N, out.N
	marks := [4]int32{sp.i, o, p, last}
	touched := s.markTouched(n, marks, 1)
	mm := mergeMap{o: o, p: p, last: last}
	// The specials: images of the marks and of v_k, each once, ascending.
	var spec [5]int32
	ns := 0
	for _, x := range [5]int32{sp.i, sp.k, o, p, last} {
		if sp.i < 0 && x == sp.k {
			continue // no split: no v_k
		}
		if x < 0 {
			continue
		}
		if y := mm.of(x); y < nOut && !slices.Contains(spec[:ns], y) {
			spec[ns] = y
			ns++
		}
	}
	slices.Sort(spec[:ns])
	words := (int(nOut) + 63) / 64
	s.kmask = grow(s.kmask, int(nOut))
	if len(s.specOf) < int(nOut) {
		s.specOf = make([]uint8, int(nOut)+int(nOut)/4+8) // all 0 between calls
	}
	specOf := s.specOf[:nOut] // 1 + a special's index; 0: not special
	for q, y := range spec[:ns] {
		specOf[y] = uint8(q + 1)
	}
	s.specBits = grow(s.specBits, ns*words) // all 0 between calls: bitsRun clears each row it emits
	l := linker{kmask: s.kmask[:nOut], specOf: specOf, bits: s.specBits, words: words}

	// The touched input edges, each once (an edge between two marks from
	// the larger's list), mapped: v_i's end to its neighbour's side, then
	// the merge.
	touchedEdges := 0
	for q, x := range marks {
		if x < 0 || x >= n || slices.Contains(marks[:q], x) {
			continue
		}
		list := ix.Adj[ix.Off[x]:ix.Off[x+1]]
		if x == sp.i {
			sides := [2]uint8{specOf[mm.of(sp.i)] - 1, specOf[mm.of(sp.k)] - 1}
			for _, w := range list {
				if touched[w] != 0 {
					if w < x {
						continue
					}
					touchedEdges++
					l.link(mm.of(sp.node(s.side[w])), mm.of(w))
					continue
				}
				touchedEdges++
				l.clean(w, sides[s.side[w]])
			}
			continue
		}
		mx := mm.of(x)
		sx := specOf[mx] - 1
		for _, w := range list {
			if touched[w] != 0 {
				if w < x {
					continue
				}
				touchedEdges++
				if w == sp.i {
					l.link(mx, mm.of(sp.node(s.side[x])))
				} else {
					l.link(mx, mm.of(w))
				}
				continue
			}
			touchedEdges++
			l.clean(w, sx)
		}
	}
	if sp.i >= 0 { // the split's new edges: (v_j, v_k) and the adjustment
		l.link(mm.of(sp.i), mm.of(sp.k))
		for _, u := range s.added {
			l.link(mm.of(u), mm.of(sp.node(1-s.side[u])))
		}
	}
	// Directed touched output edges: every special's bits, and once more
	// each of those bits that is not a special (the other direction,
	// from that node's mask).
	touchedOut := 0
	for q := range ns {
		row := l.bits[q*words : (q+1)*words]
		for _, wd := range row {
			touchedOut += 2 * bits.OnesCount64(wd)
		}
		for _, y := range spec[:ns] {
			touchedOut -= int(row[y>>6] >> (y & 63) & 1)
		}
	}

	start, total := len(c.Dst), 2*(len(in.Edges)/2-touchedEdges)+touchedOut
	if !c.DeferSrc {
		c.Src = slices.Grow(c.Src, total)[:start+total]
	}
	dst := slices.Grow(c.Dst, total+1)[:start+total+1] // mergeRun's slack
	present := s.markPresent(ix, n, marks)
	// specMark[q]: the bit of the first mark whose id is spec[q] (present's
	// bit for it), 0 when spec[q] is no input mark's id.
	var specMark [5]uint8
	for q, y := range spec[:ns] {
		if m := slices.Index(marks[:], y); m >= 0 && y < n {
			specMark[q] = 1 << m
		}
	}
	kmask := l.kmask
	w := start
	var ks [5]int32
	for y := int32(0); y < nOut; y++ {
		from := w
		if q := specOf[y]; q != 0 {
			row := l.bits[int(q-1)*words : int(q)*words]
			w += bitsRun(dst[w:], row, base)
		} else {
			// dropOnly on masks: the run keeps the marks its specials
			// are, and loses the others it has (≤ 1 for dropRun).
			km, pm := kmask[y], present[y]
			kmask[y] = 0
			list := ix.Adj[ix.Off[y]:ix.Off[y+1]]
			kept, insert := uint8(0), false
			for m := km; m != 0; m &= m - 1 {
				q := specMark[bits.TrailingZeros8(m)]
				insert = insert || q&pm == 0
				kept |= q
			}
			if drop := pm &^ kept; !insert && drop&(drop-1) == 0 {
				d := int32(-1)
				if drop != 0 {
					d = marks[bits.TrailingZeros8(drop)]
				}
				w += dropRun(dst[w:], list, d, base)
			} else {
				nk := 0
				for ; km != 0; km &= km - 1 {
					ks[nk] = spec[bits.TrailingZeros8(km)]
					nk++
				}
				w += mergeRun(dst[w:], list, ks[:nk], touched, base)
			}
		}
		if c.DeferSrc {
			c.run(base+y, w-from)
		} else {
			fill(c.Src[from:w], base+y)
		}
	}
	clear(present) // n bytes: what the marks' lists set
	for _, y := range spec[:ns] {
		specOf[y] = 0
	}
	s.markTouched(n, marks, 0)
	if w != start+total {
		panic(fmt.Sprintf("aug: nodesam coalesced %d directed edges, want %d", w-start, total))
	}
	c.Dst = dst[:start+total]
	out.Edges = out.Edges[:0]
}

// mergeMap is the merge's renaming of G″'s nodes: v_o and v_p become v_o,
// node last takes v_p's id (o < 0: no merge, every node keeps its id).
type mergeMap struct{ o, p, last int32 }

func (m mergeMap) of(x int32) int32 {
	if m.o >= 0 {
		switch x {
		case m.o, m.p:
			return m.o
		case m.last:
			return m.p
		}
	}
	return x
}

// linker records emitCoalesced's touched output edges: bits, one row of
// words per special, its neighbours; kmask, per other node, its special
// neighbours (bit q: spec[q]).
type linker struct {
	kmask  []uint8
	specOf []uint8
	bits   []uint64
	words  int
}

// clean records the edge between y, not a special, and special q.
func (l *linker) clean(y int32, q uint8) {
	l.kmask[y] |= 1 << q
	l.bits[int(q)*l.words+int(y>>6)] |= 1 << (y & 63)
}

// link records the output edge (a, b) (mapped ids; a == b, the merged
// edge, is dropped); at least one end is a special.
func (l *linker) link(a, b int32) {
	if a == b {
		return
	}
	qa, qb := l.specOf[a], l.specOf[b]
	switch {
	case qa != 0 && qb != 0:
		l.bits[int(qa-1)*l.words+int(b>>6)] |= 1 << (b & 63)
		l.bits[int(qb-1)*l.words+int(a>>6)] |= 1 << (a & 63)
	case qa != 0:
		l.clean(b, qa-1)
	case qb != 0:
		l.clean(a, qb-1)
	default:
		panic(fmt.Sprintf("aug: nodesam touched edge (%d, %d) has no special end", a, b))
	}
}

// bitsRun writes to dst, offset by base, the set bits' positions of row
// in ascending order, clears row, and returns how many it wrote.
func bitsRun(dst []int32, row []uint64, base int32) int {
	w := 0
	for k, wd := range row {
		for ; wd != 0; wd &= wd - 1 {
			dst[w] = base + int32(k<<6+bits.TrailingZeros64(wd))
			w++
		}
	}
	clear(row)
	return w
}

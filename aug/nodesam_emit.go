package aug

// NodeSam's output edges: emitted plain or coalesced (sorted, merged
// runs) around the nodes the split and the merge touched.

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// emit writes out.Edges: G″'s edges mapped by the merge (v_o, v_p → v_o;
// node last → v_p's id), the merged edge and duplicates dropped, sorted.
// Edges that touch none of v_i, v_o, v_p, last keep their ids and their
// order, so only the touched ones are rewritten (as packed uint64 keys),
// sorted and merged in: O(|E| + t log t) with t ≤
// deg(v_i)+deg(v_o)+deg(v_p)+deg(last)+|S|+1.
func (s *Scratch) emit(in, out *Graph, sp *splitState, o, p, last, n2 int32) {
	if ix := in.Index; ix.valid(in) {
		s.emitIndexed(in, out, sp, o, p, last, n2)
		return
	}
	s.emitScan(in, out, sp, o, p, last, n2)
}

// emitIndexed is emit on an indexed graph: the touched input edges come
// from the index's lists of the four nodes (O(t), no pass over the
// edges), then one forward pass writes every output edge once, node by
// node. The input's pairs (u, v > u) of a node u are its run; a clean
// node's run usually comes out as it went in, less one mark at most
// (dropOnly, as in emitCoalesced), and is copied with one compare a pair;
// otherwise each pair is copied after the touched keys that sort before
// it, its cursor stepping back over it without a branch when it is
// touched. (A single pass of the latter over every edge was 1.16× the
// graphs/s of emitScan's two passes on COLLAB; without the index the
// read-only pass this would need in their place measured 10% slower
// than emitScan.)
func (s *Scratch) emitIndexed(in, out *Graph, sp *splitState, o, p, last, n2 int32) {
	marks := [4]int32{sp.i, o, p, last}
	n := in.N
	touched := s.markTouched(n, marks, 1)
	e := in.Edges
	raw := s.touchedFromIndex(in.Index, touched, marks)
	clean := len(e)/2 - len(raw)
	keys := s.touchedKeys(raw, sp, o, p, last, n2)
	total := 2 * (clean + len(keys))
	dst := grow(out.Edges, total+2) // two slots of slack: a dropped pair is written, then overwritten
	present := s.markPresent(in.Index, n, marks)
	w, k, kk := 0, 0, 0
	var ks [4]int32
	for u := int32(0); u < n2 && (k < len(e) || kk < len(keys)); u++ {
		ke := kk // u's keys: keys[kk:ke]
		for ke < len(keys) && int32(keys[ke]>>32) == u {
			ke++
		}
		if u < n && touched[u] == 0 && ke-kk <= len(ks) {
			var above uint8 // the marks u's run can hold: those after u
			for q, x := range marks {
				if x > u {
					above |= 1 << q
				}
			}
			nk := 0
			for _, key := range keys[kk:ke] {
				ks[nk] = int32(uint32(key))
				nk++
			}
			if d, ok := dropOnly(marks, present[u]&above, ks[:nk]); ok {
				for ; k+1 < len(e) && e[k] == u; k += 2 {
					b := e[k+1]
					dst[w], dst[w+1] = u, b
					w += 2 - 2*b2i(b == d)
				}
				kk = ke // each is a pair of the run, kept in place
				continue
			}
		}
		next := uint64(math.MaxUint64)
		if kk < ke {
			next = keys[kk]
		}
		for ; k+1 < len(e) && e[k] == u; k += 2 {
			b := e[k+1]
			// Node ids are non-negative: the packed key orders as (u, b).
			for key := uint64(u)<<32 | uint64(uint32(b)); next < key; {
				dst[w], dst[w+1] = u, int32(uint32(next))
				w += 2
				kk++
				next = math.MaxUint64
				if kk < ke {
					next = keys[kk]
				}
			}
			dst[w], dst[w+1] = u, b
			w += 2 - 2*int(touched[u]|touched[b])
		}
		for _, key := range keys[kk:ke] {
			dst[w], dst[w+1] = u, int32(uint32(key))
			w += 2
		}
		kk = ke
	}
	clear(present)
	s.markTouched(n, marks, 0)
	if w != total || k < len(e) || kk < len(keys) {
		panic(fmt.Sprintf("aug: nodesam emitted %d edge ids, want %d", w, total))
	}
	out.Edges = dst[:total]
}

// emitScan is emit without an index: one pass over the edges writes the
// clean ones to out.Edges and collects the touched ones, which are then
// merged in from the back.
func (s *Scratch) emitScan(in, out *Graph, sp *splitState, o, p, last, n2 int32) {
	// Pass 1: clean edges go straight to out.Edges, in input order (already
	// sorted); touched ones are collected raw. Branch-free: every edge is
	// written both to out.Edges and to raw, and a table of the touched
	// nodes advances one cursor or the other (the touched edges are too
	// many, and too scattered, to predict).
	dst := grow(out.Edges, len(in.Edges)+2*len(s.added)+2)
	raw := grow(s.keys, len(in.Edges)/2+1)
	marks := [4]int32{sp.i, o, p, last}
	touched := s.markTouched(in.N, marks, 1)
	c, r := 0, 0
	e := in.Edges
	for k := 0; k+1 < len(e); k += 2 {
		a, b := e[k], e[k+1]
		t := int(touched[a] | touched[b])
		dst[c], dst[c+1] = a, b
		raw[r] = uint64(a)<<32 | uint64(uint32(b))
		c += 2 - 2*t
		r += t
	}
	s.markTouched(in.N, marks, 0)
	dst = dst[:c]
	keys := s.touchedKeys(raw[:r], sp, o, p, last, n2)
	// Merge the sorted touched keys into the clean run from the back.
	dst = dst[:c+2*len(keys)]
	w := len(dst)
	for k := len(keys) - 1; k >= 0; k-- {
		u, v := int32(keys[k]>>32), int32(keys[k])
		for c > 0 && (dst[c-2] > u || (dst[c-2] == u && dst[c-1] > v)) {
			w, c = w-2, c-2
			dst[w], dst[w+1] = dst[c], dst[c+1]
		}
		w -= 2
		dst[w], dst[w+1] = u, v
	}
	out.Edges = dst
}

// touchedFromIndex returns the input edges that touch a marked node (the
// touched table set for them), as packed canonical keys in s.keys's
// buffer, from the index's lists of the marked nodes: each such edge once.
func (s *Scratch) touchedFromIndex(ix *Index, touched []uint8, marks [4]int32) []uint64 {
	n := int32(len(touched))
	raw := s.keys[:0]
	for q, x := range marks {
		if x < 0 || x >= n || slices.Contains(marks[:q], x) {
			continue
		}
		for _, w := range ix.Adj[ix.Off[x]:ix.Off[x+1]] {
			if touched[w] != 0 && w < x {
				continue // an edge between touched nodes: taken from w's list
			}
			raw = append(raw, uint64(min(x, w))<<32|uint64(uint32(max(x, w))))
		}
	}
	return raw
}

// markTouched sets s.touched (all 0 between calls) to v for the marked
// nodes that are input nodes (< n), and returns the table.
func (s *Scratch) markTouched(n int32, marks [4]int32, v uint8) []uint8 {
	if len(s.touched) < int(n) {
		s.touched = make([]uint8, int(n)+int(n)/4+8)
	}
	touched := s.touched[:n]
	for _, x := range marks {
		if x >= 0 && x < n {
			touched[x] = v
		}
	}
	return touched
}

// touchedKeys turns the touched input edges (raw: packed keys, any order;
// its buffer is reused) into the output's touched edges, sorted, in
// s.keys: v_i replaced by its side's node, (v_j, v_k) and the adjustment
// edges added, then the merge applied (v_o, v_p → v_o; node last → v_p's
// id; the merged edge dropped; one edge per neighbour shared by v_o and
// v_p). None of them equals a clean edge: each keeps an end in v_i, v_k,
// v_o or v_p's new id, which no clean edge has.
func (s *Scratch) touchedKeys(raw []uint64, sp *splitState, o, p, last, n2 int32) []uint64 {
	i, side := sp.i, s.side
	for k, key := range raw { // v_i replaced by its side's node
		a, b := int32(key>>32), int32(uint32(key))
		switch i {
		case a:
			raw[k] = uint64(sp.node(side[b]))<<32 | uint64(uint32(b))
		case b:
			raw[k] = uint64(a)<<32 | uint64(uint32(sp.node(side[a])))
		}
	}
	if i >= 0 {
		raw = append(raw, uint64(i)<<32|uint64(uint32(sp.k)))
		for _, u := range s.added {
			raw = append(raw, uint64(u)<<32|uint64(uint32(sp.node(1-side[u]))))
		}
	}
	// Pass 2 over the touched pairs only: keys are rewritten in place.
	gen := s.nextGen(int(n2))
	stamp := s.stamp
	keys := raw[:0]
	for _, r := range raw {
		a, b := int32(r>>32), int32(uint32(r))
		if o >= 0 {
			switch a {
			case o, p:
				a = o
			case last:
				a = p
			}
			switch b {
			case o, p:
				b = o
			case last:
				b = p
			}
			if a == b {
				continue // the merged edge
			}
			if a == o || b == o {
				other := a + b - o
				if stamp[other] == gen {
					continue // neighbour of both v_o and v_p: one edge
				}
				stamp[other] = gen
			}
		}
		keys = append(keys, uint64(min(a, b))<<32|uint64(max(a, b)))
	}
	s.keys = keys
	s.sortKeys(n2)
	return s.keys
}

// markPresent sets, in s.present (all 0 between calls: the caller clears
// the n entries it returns), bit q for every input neighbour of
// marks[q] (the first of equal marks), and returns the table.
func (s *Scratch) markPresent(ix *Index, n int32, marks [4]int32) []uint8 {
	if len(s.present) < int(n) {
		s.present = make([]uint8, int(n)+int(n)/4+8)
	}
	present := s.present[:n]
	for q, x := range marks {
		if x < 0 || x >= n || slices.Contains(marks[:q], x) {
			continue
		}
		for _, w := range ix.Adj[ix.Off[x]:ix.Off[x+1]] {
			present[w] |= 1 << q
		}
	}
	return present
}

// dropOnly reports whether a clean node's output run is its input list
// less at most one value, d (-1: none), given mask, the marks in that
// list (markPresent), and ks, the run's touched keys. mergeRun takes the
// marks out and merges ks in; a mark in both comes back where it was, so
// when every key is such a mark the run only loses the marks ks lacks.
// On a dense graph that is most runs: the split's adjustment joins most
// of v_i's neighbours to both halves, and v_o stays, so on 74-node graphs
// of density 0.9, 67% of runs keep every mark and 16% lose one.
func dropOnly(marks [4]int32, mask uint8, ks []int32) (d int32, ok bool) {
	var kept uint8
	for _, k := range ks {
		q := 0
		for q < 4 && (mask>>q&1 == 0 || marks[q] != k) {
			q++
		}
		if q == 4 {
			return -1, false // a key not in the list: an insertion
		}
		kept |= 1 << q
	}
	d = -1
	for q, x := range marks {
		if mask>>q&1 != 0 && kept>>q&1 == 0 {
			if d >= 0 {
				return -1, false // two to drop: mergeRun's
			}
			d = x
		}
	}
	return d, true
}

// dropRun writes to dst, offset by base, list (sorted) less the value d
// (if it has it; d < 0: none), and returns its length: addBase's copy of
// the entries before d and of those after it, d found by binary search.
// Over twice mergeRun's speed where it applies (no table read, no keys to
// merge, two ids a step).
func dropRun(dst, list []int32, d, base int32) int {
	if d < 0 {
		return addBase(dst, list, base)
	}
	at, found := slices.BinarySearch(list, d)
	if !found {
		return addBase(dst, list, base)
	}
	w := addBase(dst, list[:at], base)
	return w + addBase(dst[w:], list[at+1:], base)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// mergeRun writes to dst, offset by base, the sorted union of list minus
// its touched nodes (touched[v] == 1) and ks (sorted, disjoint from list's
// other values), and returns its length. dst has one slot of slack: a
// touched entry is written, then overwritten, because skipping it without
// a branch (the cursor steps by 1 − touched[v]) beats mispredicting the
// ≤ 4 per list; entries of ks are as rare, but fewer and cheaper to test.
func mergeRun(dst, list, ks []int32, touched []uint8, base int32) int {
	w, kk := 0, 0
	next := int32(math.MaxInt32)
	if len(ks) > 0 {
		next = ks[0]
	}
	for _, v := range list {
		for next < v {
			dst[w] = base + next
			w++
			kk++
			next = math.MaxInt32
			if kk < len(ks) {
				next = ks[kk]
			}
		}
		dst[w] = base + v
		w += 1 - int(touched[v])
	}
	for _, v := range ks[kk:] {
		dst[w] = base + v
		w++
	}
	return w
}

// sortKeys sorts the touched keys (u<<32 | v, u < v < n): by comparison
// when they are few next to n, else by two counting passes over n buckets
// (O(keys + n)), which wins on small dense graphs where hundreds of edges
// touch the split and merged nodes.
func (s *Scratch) sortKeys(n int32) {
	k := len(s.keys)
	if k < 2 {
		return
	}
	if k*bits.Len(uint(k)) < 2*(k+int(n)) {
		slices.Sort(s.keys)
		return
	}
	s.tmpKeys = slices.Grow(s.tmpKeys[:0], k)[:k]
	s.cnt = grow(s.cnt, int(n)+1)
	pass := func(src, dst []uint64, shift uint) {
		clear(s.cnt)
		for _, key := range src {
			s.cnt[int32(key>>shift)+1]++
		}
		for i := int32(0); i < n; i++ {
			s.cnt[i+1] += s.cnt[i]
		}
		for _, key := range src {
			b := int32(key >> shift)
			dst[s.cnt[b]] = key
			s.cnt[b]++
		}
	}
	pass(s.keys, s.tmpKeys, 0)  // by v (low 32 bits; v < n)
	pass(s.tmpKeys, s.keys, 32) // by u, stable
}

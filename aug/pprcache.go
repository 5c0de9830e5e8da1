package aug

import (
	"math"
	"sync/atomic"
)

// PPRCache keeps, per graph and root, the ranking SubMix computes with
// personalized PageRank — the root, then its component's nodes by score —
// up to the length SubMix can use, so a later draw from the same root
// skips the PageRank solve and the sort. The ranking is the same one the
// solve gives, so outputs are byte-identical with or without the cache.
// The bytes the rankings hold are bounded by the cache's limit (2 bytes a
// node for graphs of up to 65,535 nodes, 4 above, and 64 a ranking): past it rankings are
// computed every draw, as without a cache. Safe for concurrent use; the
// loader keeps one per dataset and hands it to every graph's Index.
type PPRCache struct {
	limit int64
	used  atomic.Int64
	hits  atomic.Int64
	draws atomic.Int64
}

// NewPPRCache returns a cache holding at most limit bytes of rankings.
func NewPPRCache(limit int64) *PPRCache { return &PPRCache{limit: limit} }

// Used is the bytes the rankings hold.
func (c *PPRCache) Used() int64 { return c.used.Load() }

// Limit is the bound on Used.
func (c *PPRCache) Limit() int64 { return c.limit }

// Hits and Draws count SubMix rankings taken from the cache and asked of it.
func (c *PPRCache) Hits() int64  { return c.hits.Load() }
func (c *PPRCache) Draws() int64 { return c.draws.Load() }

// take reserves n bytes, if the limit allows.
func (c *PPRCache) take(n int64) bool {
	for {
		u := c.used.Load()
		if u+n > c.limit {
			return false
		}
		if c.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// ranking is one root's cached prefix of the PageRank order.
type ranking struct {
	small []uint16 // node ids, when the graph has at most 65,535 nodes
	large []int32
}

func (r *ranking) len() int { return max(len(r.small), len(r.large)) }

func (r *ranking) appendTo(dst []int32, k int) []int32 {
	if r.large != nil {
		return append(dst, r.large[:k]...)
	}
	for _, v := range r.small[:k] {
		dst = append(dst, int32(v))
	}
	return dst
}

// pprTable is a graph's per-root rankings and its components.
type pprTable struct {
	cache    *PPRCache
	compOf   []int32 // component of each node
	compSize []int32
	roots    []atomic.Pointer[ranking] // the paper's PageRank
	// loops: with self-loops (SubMix.SelfLoops), made on first use.
	loops atomic.Pointer[[]atomic.Pointer[ranking]]
}

// slots returns the rankings of one PageRank variant, by root.
func (t *pprTable) slots(selfLoops bool) []atomic.Pointer[ranking] {
	if !selfLoops {
		return t.roots
	}
	if p := t.loops.Load(); p != nil {
		return *p
	}
	s := make([]atomic.Pointer[ranking], len(t.roots))
	t.loops.CompareAndSwap(nil, &s)
	return *t.loops.Load()
}

// rankingOverhead is what a stored ranking costs besides its node ids
// (its struct, pointer and allocation rounding), counted in the limit.
const rankingOverhead = 64

// cost is the bytes a ranking of l nodes is counted for.
func (t *pprTable) cost(l int) int64 {
	if len(t.compOf) > math.MaxUint16 {
		return int64(4*l + rankingOverhead)
	}
	return int64(2*l + rankingOverhead)
}

// EnablePPR lets SubMix cache this graph's rankings in c. Call before the
// Index is shared (the loader does it when it builds the Index).
func (ix *Index) EnablePPR(c *PPRCache) {
	if c == nil || c.limit <= 0 {
		return
	}
	t := &pprTable{cache: c, compOf: make([]int32, ix.N), roots: make([]atomic.Pointer[ranking], ix.N)}
	for v := range t.compOf {
		t.compOf[v] = -1
	}
	queue := make([]int32, 0, ix.N)
	for r := int32(0); r < ix.N; r++ {
		if t.compOf[r] >= 0 {
			continue
		}
		id := int32(len(t.compSize))
		t.compOf[r] = id
		queue = append(queue[:0], r)
		for h := 0; h < len(queue); h++ {
			for _, w := range ix.Adj[ix.Off[queue[h]]:ix.Off[queue[h]+1]] {
				if t.compOf[w] < 0 {
					t.compOf[w] = id
					queue = append(queue, w)
				}
			}
		}
		t.compSize = append(t.compSize, int32(len(queue)))
	}
	ix.ppr = t
}

// rankLimit is how much of a ranking SubMix with ratio p can use:
// k ≤ ⌈p·|comp(root)|⌉.
func rankLimit(p float64, comp int) int { return min(comp, int(math.Ceil(p*float64(comp)))) }

// store keeps order[:l] as root's ranking in slots if the cache has room
// and no longer one is stored.
func (t *pprTable) store(slots []atomic.Pointer[ranking], root int32, order []int32, l int) {
	if cur := slots[root].Load(); cur != nil && cur.len() >= l {
		return
	}
	if !t.cache.take(t.cost(l)) {
		return
	}
	r := &ranking{}
	if len(t.compOf) > math.MaxUint16 {
		r.large = append([]int32(nil), order[:l]...)
	} else {
		r.small = make([]uint16, l)
		for i, v := range order[:l] {
			r.small[i] = uint16(v)
		}
	}
	if old := slots[root].Swap(r); old != nil {
		t.cache.used.Add(-t.cost(old.len()))
	}
}

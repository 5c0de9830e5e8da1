package shard

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
)

// A folder's graphs are stored in id order (the default), or, with the
// manifest's "order": "random:SEED", in a seeded random order: storage
// position p holds graph IDAt(p), a pure function of (SEED, graph count).
// Ids stay what the input numbered them (splits, labels and graph_id keep
// meaning the same graphs); only where each graph lies changes, so a set
// stored in class order still mixes classes within a few pages (a window
// of the windowed shuffle). Every Reader method takes and returns ids; a
// shard's first_graph, num_graphs and batches count positions.

// orderRandom spells the random order, with its seed after it.
const orderRandom = "random:"

// ParseOrder reads a storage order: "" or "id" (the ids' own), or
// "random:SEED" (SEED a uint64). It returns the canonical spelling.
func ParseOrder(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "id" {
		return "", nil
	}
	if v, ok := strings.CutPrefix(s, orderRandom); ok {
		if seed, err := strconv.ParseUint(v, 10, 64); err == nil {
			return orderRandom + strconv.FormatUint(seed, 10), nil
		}
	}
	return "", fmt.Errorf("shard: order %q: want id or random:SEED (SEED a non-negative integer)", s)
}

// orderFits checks that n graphs can be stored in a random order (the
// map holds int32 positions).
func orderFits(n int64) error {
	if n > math.MaxInt32 {
		return fmt.Errorf("%d graphs, at most %d in a random order", n, math.MaxInt32)
	}
	return nil
}

// graphOrder maps storage positions to ids and back.
type graphOrder struct {
	ids []int32 // ids[p] is the graph at position p
	pos []int32 // pos[id] is graph id's position
}

// newGraphOrder draws the random order of n graphs (canonical order
// spelling, from ParseOrder); nil for the id order.
func newGraphOrder(order string, n int64) (*graphOrder, error) {
	v, ok := strings.CutPrefix(order, orderRandom)
	if !ok {
		return nil, nil
	}
	seed, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("order %q: %v", order, err)
	}
	if err := orderFits(n); err != nil {
		return nil, fmt.Errorf("order %q: %w", order, err)
	}
	o := &graphOrder{ids: make([]int32, n), pos: make([]int32, n)}
	for i := range o.ids {
		o.ids[i] = int32(i)
	}
	// Fisher–Yates from a PCG keyed by the seed alone: the same order on
	// every machine and in every version that reads this format.
	r := rand.New(rand.NewPCG(seed, 0x6f72646572)) // "order"
	for i := len(o.ids) - 1; i > 0; i-- {
		j := r.IntN(i + 1)
		o.ids[i], o.ids[j] = o.ids[j], o.ids[i]
	}
	for p, id := range o.ids {
		o.pos[id] = int32(p)
	}
	return o, nil
}

// lazyOrder is a manifest's random order, drawn on first use.
type lazyOrder struct {
	order string
	n     int64
	once  sync.Once
	o     *graphOrder
}

func (l *lazyOrder) get() *graphOrder {
	l.once.Do(func() {
		l.o, _ = newGraphOrder(l.order, l.n) // validate checked both
	})
	return l.o
}

// graphOrder returns the manifest's order (nil: id order).
func (m *Manifest) graphOrder() *graphOrder {
	if m.order == nil {
		return nil
	}
	return m.order.get()
}

// IDAt is the id of the graph stored at position pos (pos itself in id
// order).
func (m *Manifest) IDAt(pos int64) int64 {
	if m.order == nil {
		return pos
	}
	return int64(m.order.get().ids[pos])
}

// PositionOf is where graph id is stored (id itself in id order).
func (m *Manifest) PositionOf(id int64) int64 {
	if m.order == nil {
		return id
	}
	return int64(m.order.get().pos[id])
}

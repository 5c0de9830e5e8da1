package epoch

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/augloader/augloader/aug"
)

// Shuffle says how an epoch's order of the served graphs is drawn.
//
// Global (Window 0) is one uniform permutation of the whole set
// (Permutation). Window N > 0 reads the shards a few at a time: the order
// of the shard blocks (a block is the served graphs of one shard) is a
// permutation drawn from (seed, epoch), and the graphs are permuted within
// each window of N consecutive blocks of that order, so an epoch needs
// only N blocks' data at once. Both are pure functions of (seed, epoch,
// served set, block of each graph).
type Shuffle struct {
	Window int
}

// ErrShuffle: a shuffle that cannot be parsed.
var ErrShuffle = errors.New("epoch: bad shuffle")

// ParseShuffle reads "global" or "window:N" (N ≥ 1 blocks).
func ParseShuffle(s string) (Shuffle, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "global" {
		return Shuffle{}, nil
	}
	if n, ok := strings.CutPrefix(s, "window:"); ok {
		w, err := strconv.Atoi(n)
		if err == nil && w >= 1 {
			return Shuffle{Window: w}, nil
		}
	}
	return Shuffle{}, fmt.Errorf("%w %q: want global or window:N (N ≥ 1 shard blocks)", ErrShuffle, s)
}

// String is the shuffle as ParseShuffle reads it.
func (s Shuffle) String() string {
	if s.Window == 0 {
		return "global"
	}
	return "window:" + strconv.Itoa(s.Window)
}

// Windowed is the order of one epoch under a windowed shuffle: Perm is
// the permutation of the served ids, and window w is Perm[Starts[w]:Starts[w+1]].
type Windowed struct {
	Perm   []int64
	Starts []int
}

// WindowOf returns the window holding position pos of Perm.
func (w *Windowed) WindowOf(pos int) int {
	lo, hi := 0, len(w.Starts)-1 // Starts[lo] <= pos < Starts[hi]
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if w.Starts[mid] <= pos {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// WindowPermutation orders served for epoch e under window: block(id) is
// the shard block of graph id, in 0..blocks-1. The served ids of each
// block keep their served order before the window's shuffle, so the
// result depends on the served set, not on how it was listed beyond
// that.
func WindowPermutation(seed, e uint64, served []int64, blocks, window int, block func(id int64) int) (*Windowed, error) {
	if window < 1 {
		return nil, fmt.Errorf("%w: window of %d blocks", ErrShuffle, window)
	}
	// Counting sort of the served ids by block.
	start := make([]int, blocks+1)
	for _, id := range served {
		b := block(id)
		if b < 0 || b >= blocks {
			return nil, fmt.Errorf("epoch: graph %d in block %d of %d", id, b, blocks)
		}
		start[b+1]++
	}
	for b := 0; b < blocks; b++ {
		start[b+1] += start[b]
	}
	byBlock := make([]int64, len(served))
	next := append([]int(nil), start[:blocks]...)
	for _, id := range served {
		b := block(id)
		byBlock[next[b]] = id
		next[b]++
	}
	// The blocks' order.
	a, bb := aug.Stream(seed, e, -1, aug.StreamBlocks)
	r := rand.New(rand.NewPCG(a, bb))
	order := make([]int, blocks)
	for i := range order {
		order[i] = i
	}
	for i := len(order) - 1; i > 0; i-- {
		j := r.IntN(i + 1)
		order[i], order[j] = order[j], order[i]
	}
	out := &Windowed{Perm: make([]int64, 0, len(served))}
	var pcg rand.PCG
	wr := rand.New(&pcg)
	for w, first := 0, 0; first < blocks; w, first = w+1, first+window {
		lo := len(out.Perm)
		for _, b := range order[first:min(first+window, blocks)] {
			out.Perm = append(out.Perm, byBlock[start[b]:start[b+1]]...)
		}
		if len(out.Perm) == lo {
			continue // every block of the window is empty in this served set
		}
		out.Starts = append(out.Starts, lo)
		pcg.Seed(aug.Stream(seed, e, int64(w), aug.StreamWindow))
		p := out.Perm[lo:]
		for i := len(p) - 1; i > 0; i-- {
			j := wr.IntN(i + 1)
			p[i], p[j] = p[j], p[i]
		}
	}
	out.Starts = append(out.Starts, len(out.Perm))
	return out, nil
}

package epoch

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/internal/bytesize"
)

// Shuffle says how an epoch's order of the served graphs is drawn.
//
// Global (Window 0) is one uniform permutation of the whole set
// (Permutation). Window N > 0 reads the set a few pages (a shard file's
// record batches, shard.Reader.PageOf) at a time: the order of the page
// blocks (a block is the served graphs of one page) is a permutation
// drawn from (seed, epoch), and the graphs are permuted within each window
// of N consecutive blocks of that order, so an epoch needs only N pages'
// data at once. Both are pure functions of (seed, epoch, served set, block
// of each graph). Bytes > 0 is a window given by size ("window:64MiB"),
// not yet turned into a page count (the daemon does that from the
// manifest, Window = Bytes / the largest page's decoded size).
type Shuffle struct {
	Window int
	Bytes  int64
}

// ErrShuffle: a shuffle that cannot be parsed.
var ErrShuffle = errors.New("epoch: bad shuffle")

// Until version 0.1.0 a window's blocks were whole shard files, spelled
// "window:N" in the identity. Blocks are pages now; the identity spells
// the shuffle pageWindow + N, so a client never mixes the two orders.
const pageWindow = "page-window:"

// ParseShuffle reads "global", "window:N" (N ≥ 1 pages), "window:SIZE"
// (pages filling SIZE decoded, e.g. 64MiB) or "page-window:N" (as String
// spells window:N).
func ParseShuffle(s string) (Shuffle, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "global" {
		return Shuffle{}, nil
	}
	n, ok := strings.CutPrefix(s, "window:")
	if !ok {
		n, ok = strings.CutPrefix(s, pageWindow)
	}
	if ok {
		if bytesize.HasUnit(n) && strings.HasPrefix(s, "window:") {
			if b, err := bytesize.Parse(n); err == nil && b > 0 {
				return Shuffle{Bytes: b}, nil
			}
		} else if w, err := strconv.Atoi(n); err == nil && w >= 1 {
			return Shuffle{Window: w}, nil
		}
	}
	return Shuffle{}, fmt.Errorf("%w %q: want global, window:N (N ≥ 1 pages, a shard file's record batches) or window:SIZE (e.g. 64MiB of pages)", ErrShuffle, s)
}

// String is the shuffle as ParseShuffle reads it, and as the identity
// carries it: "global", "page-window:N", or "window:SIZE" while a size is
// not resolved.
func (s Shuffle) String() string {
	switch {
	case s.Window > 0:
		return pageWindow + strconv.Itoa(s.Window)
	case s.Bytes > 0:
		return "window:" + bytesize.Format(s.Bytes)
	}
	return "global"
}

// Windowed reports whether the shuffle reads the set in windows.
func (s Shuffle) Windowed() bool { return s.Window > 0 || s.Bytes > 0 }

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
// the block (page) of graph id, in 0..blocks-1. The served ids of each
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

package epoch

import (
	"errors"
	"slices"
	"testing"
)

func TestParseShuffle(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Shuffle
		err  bool
	}{
		{"", Shuffle{}, false},
		{"global", Shuffle{}, false},
		{"window:1", Shuffle{Window: 1}, false},
		{" window:16 ", Shuffle{Window: 16}, false},
		{"window:0", Shuffle{}, true},
		{"window:-2", Shuffle{}, true},
		{"window:", Shuffle{}, true},
		{"windows:4", Shuffle{}, true},
		{"page-window:3", Shuffle{Window: 3}, false},
		{"window:64MiB", Shuffle{Bytes: 64 << 20}, false},
		{"window:1.5GB", Shuffle{Bytes: 1_500_000_000}, false},
		{"window:0MiB", Shuffle{}, true},
		{"window:64parsecs", Shuffle{}, true},
		{"page-window:64MiB", Shuffle{}, true},
		{"local", Shuffle{}, true},
	} {
		got, err := ParseShuffle(tc.in)
		if got.Windowed() != (tc.want != Shuffle{}) {
			t.Errorf("%v.Windowed() = %v", got, got.Windowed())
		}
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseShuffle(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
		if err != nil && !errors.Is(err, ErrShuffle) {
			t.Errorf("ParseShuffle(%q): %v does not wrap ErrShuffle", tc.in, err)
		}
		if err == nil {
			if back, _ := ParseShuffle(got.String()); back != got {
				t.Errorf("%v does not round-trip through %q", got, got.String())
			}
		}
	}
}

// A window's blocks were shard files until they became pages: the
// identity spells the page window apart from the old "window:N", so a
// client never mixes daemons of the two orders.
func TestShuffleIdentitySpelling(t *testing.T) {
	if got := (Shuffle{Window: 4}).String(); got != "page-window:4" {
		t.Errorf("window of 4 pages spelled %q", got)
	}
	if got := (Shuffle{}).String(); got != "global" {
		t.Errorf("global spelled %q", got)
	}
}

// Each window is exactly the served graphs of its blocks, every served
// graph appears once, the draw is a pure function of (seed, epoch), and
// epochs differ.
func TestWindowPermutation(t *testing.T) {
	const blocks, per = 10, 7
	block := func(id int64) int { return int(id) / per }
	var served []int64
	for id := int64(0); id < blocks*per; id++ {
		if id%5 != 3 { // a subset: blocks lose some graphs
			served = append(served, id)
		}
	}
	for _, window := range []int{1, 3, 4, 10, 25} {
		w, err := WindowPermutation(7, 2, served, blocks, window, block)
		if err != nil {
			t.Fatal(err)
		}
		sorted := slices.Clone(w.Perm)
		slices.Sort(sorted)
		if !slices.Equal(sorted, served) {
			t.Fatalf("window %d: not a permutation of the served set", window)
		}
		wantWindows := (blocks + window - 1) / window
		if len(w.Starts) != wantWindows+1 || w.Starts[0] != 0 || w.Starts[wantWindows] != len(served) {
			t.Fatalf("window %d: starts %v", window, w.Starts)
		}
		seenBlocks := map[int]int{}
		for k := 0; k < wantWindows; k++ {
			part := w.Perm[w.Starts[k]:w.Starts[k+1]]
			mine := map[int]bool{}
			for _, id := range part {
				b := block(id)
				if prev, ok := seenBlocks[b]; ok && prev != k {
					t.Fatalf("window %d: block %d in windows %d and %d", window, b, prev, k)
				}
				seenBlocks[b], mine[b] = k, true
				if got := w.WindowOf(w.Starts[k]); got != k {
					t.Fatalf("WindowOf(%d) = %d, want %d", w.Starts[k], got, k)
				}
			}
			if len(mine) > window {
				t.Fatalf("window %d holds %d blocks", window, len(mine))
			}
		}
		again, _ := WindowPermutation(7, 2, served, blocks, window, block)
		if !slices.Equal(again.Perm, w.Perm) {
			t.Fatalf("window %d: two draws differ", window)
		}
		next, _ := WindowPermutation(7, 3, served, blocks, window, block)
		if slices.Equal(next.Perm, w.Perm) {
			t.Fatalf("window %d: epochs 2 and 3 are the same order", window)
		}
	}
	if _, err := WindowPermutation(7, 2, served, blocks, 0, block); !errors.Is(err, ErrShuffle) {
		t.Errorf("window 0: %v", err)
	}
	if _, err := WindowPermutation(7, 2, []int64{99}, blocks, 2, block); err == nil {
		t.Error("a graph outside the blocks was taken")
	}
}

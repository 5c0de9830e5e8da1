package tu_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/shard/tu"
)

// chain writes a TU folder of n path graphs of 4 nodes each, listing the
// graphs in the given order (nil: in id order).
func chain(t *testing.T, n int, order ...int) *tu.Dataset {
	t.Helper()
	dir := t.TempDir()
	var a, ind, lab strings.Builder
	if order == nil {
		for g := range n {
			order = append(order, g)
		}
	}
	for _, g := range order {
		base := 4*g + 1
		for v := range 3 {
			fmt.Fprintf(&a, "%d, %d\n%d, %d\n", base+v, base+v+1, base+v+1, base+v)
		}
	}
	for g := range n {
		for range 4 {
			fmt.Fprintf(&ind, "%d\n", g+1)
		}
		fmt.Fprintf(&lab, "%d\n", g%2)
	}
	for name, s := range map[string]string{"A": a.String(), "graph_indicator": ind.String(), "graph_labels": lab.String()} {
		if err := os.WriteFile(filepath.Join(dir, "C_"+name+".txt"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, err := tu.OpenSource(dir, "C")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	ds, err := tu.Load(src, tu.FeaturesAuto)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// Graphs calls fn once per graph in id order (its canonicalisation runs
// beside the parse); an error of fn stops it, is returned as it is, and no
// graph follows it; a cancelled context stops it too.
func TestGraphsOrderAndStop(t *testing.T) {
	ds := chain(t, 3000) // several runs of the pipe
	var ids []int64
	if _, err := ds.Graphs(context.Background(), false, func(g *shard.Graph) error {
		ids = append(ids, g.ID)
		if len(g.Edges) != 6 {
			return fmt.Errorf("graph %d: %d edges", g.ID, len(g.Edges)/2)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if id != int64(i) {
			t.Fatalf("graph %d came at position %d", id, i)
		}
	}
	if len(ids) != 3000 {
		t.Fatalf("%d graphs, want 3000", len(ids))
	}
	stop := errors.New("stop")
	for _, at := range []int64{0, 700, 2999} {
		calls := int64(0)
		_, err := ds.Graphs(context.Background(), false, func(g *shard.Graph) error {
			calls++
			if g.ID == at {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || calls != at+1 {
			t.Fatalf("stop at %d: error %v after %d calls", at, err, calls)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ds.Graphs(ctx, false, func(*shard.Graph) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// A file that goes back to an earlier graph stops the streaming read with
// ErrUnordered naming the line; the buffered read accepts it and gives
// every graph in id order.
func TestGraphsUnordered(t *testing.T) {
	ds := chain(t, 500, append([]int{0, 1, 2, 4, 3}, func() (o []int) {
		for g := 5; g < 500; g++ {
			o = append(o, g)
		}
		return o
	}()...)...)
	_, err := ds.Graphs(context.Background(), false, func(*shard.Graph) error { return nil })
	if !errors.Is(err, tu.ErrUnordered) || !strings.Contains(err.Error(), "C_A.txt:25 lists graph 4 after graph 5") {
		t.Fatalf("streaming: %v", err)
	}
	var ids []int64
	if _, err := ds.Graphs(context.Background(), true, func(g *shard.Graph) error {
		ids = append(ids, g.ID)
		if len(g.Edges) != 6 {
			return fmt.Errorf("graph %d: %d edges", g.ID, len(g.Edges)/2)
		}
		return nil
	}); err != nil || len(ids) != 500 || ids[3] != 3 || ids[499] != 499 {
		t.Fatalf("buffered: %d graphs, %v", len(ids), err)
	}
}

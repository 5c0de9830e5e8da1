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

// chain writes a TU folder of n path graphs of 4 nodes each.
func chain(t *testing.T, n int) *tu.Dataset {
	t.Helper()
	dir := t.TempDir()
	var a, ind, lab strings.Builder
	for g := range n {
		base := 4*g + 1
		for v := range 3 {
			fmt.Fprintf(&a, "%d, %d\n%d, %d\n", base+v, base+v+1, base+v+1, base+v)
		}
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

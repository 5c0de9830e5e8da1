package tu_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/ingest/tu"
	"github.com/augloader/augloader/shard"
)

// chain is a TU folder of n path graphs of 4 nodes each, the graphs listed
// in the given order (none: in id order).
func chain(t *testing.T, n int, order ...int) *tu.Dataset {
	return tu.ChainDataset(t, n, order, nil)
}

// pathIDs reads every graph and returns the ids in the order fn saw them,
// failing on a graph that is not a path of three edges.
func pathIDs(ds *tu.Dataset, buffered bool) ([]int64, error) {
	var ids []int64
	_, err := ds.Graphs(context.Background(), ingest.ReadOptions{Buffered: buffered}, func(g *shard.Graph) error {
		ids = append(ids, g.ID)
		if len(g.Edges) != 6 {
			return fmt.Errorf("graph %d: %d edges", g.ID, len(g.Edges)/2)
		}
		return nil
	})
	return ids, err
}

// Graphs calls fn once per graph in id order (its canonicalisation runs
// beside the parse); an error of fn stops it, is returned as it is, and no
// graph follows it; a cancelled context stops it too.
func TestGraphsOrderAndStop(t *testing.T) {
	ds := chain(t, 3000) // several runs of the pipe
	ids, err := pathIDs(ds, false)
	if err != nil {
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
		_, err := ds.Graphs(context.Background(), ingest.ReadOptions{}, func(g *shard.Graph) error {
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
	if _, err := ds.Graphs(ctx, ingest.ReadOptions{}, func(*shard.Graph) error { return nil }); !errors.Is(err, context.Canceled) {
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
	_, err := ds.Graphs(context.Background(), ingest.ReadOptions{}, func(*shard.Graph) error { return nil })
	if !errors.Is(err, ingest.ErrUnordered) || !strings.Contains(err.Error(), "C_A.txt:25 lists graph 4 after graph 5") {
		t.Fatalf("streaming: %v", err)
	}
	if ids, err := pathIDs(ds, true); err != nil || len(ids) != 500 || ids[3] != 3 || ids[499] != 499 {
		t.Fatalf("buffered: %d graphs, %v", len(ids), err)
	}
}

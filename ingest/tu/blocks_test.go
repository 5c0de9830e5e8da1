package tu

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augloader/augloader/ingest"
	"github.com/augloader/augloader/shard"
)

// chainDataset writes a TU folder of n path graphs of 4 nodes, each edge
// listed both ways, the graphs in the given order (nil: id order), the A
// file passed through edit (nil: as is), and loads it.
func chainDataset(t *testing.T, n int, order []int, edit func(string) string) *Dataset {
	t.Helper()
	if order == nil {
		for g := range n {
			order = append(order, g)
		}
	}
	var a, ind, lab strings.Builder
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
	as := a.String()
	if edit != nil {
		as = edit(as)
	}
	dir := t.TempDir()
	for name, s := range map[string]string{"A": as, "graph_indicator": ind.String(), "graph_labels": lab.String()} {
		if err := os.WriteFile(filepath.Join(dir, "C_"+name+".txt"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, err := OpenSource(dir, "C")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	ds, err := Load(src, FeaturesAuto)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// Graphs gives the same graphs, stats and errors whatever the size of the
// blocks the A file is parsed in (entries made per block beside the parse,
// then line by line from the first line that is not plain): graphs whose
// lines straddle blocks, a file that goes back to an earlier graph deep
// inside, a node out of range and a line in another form.
func TestGraphsAnyBlockSize(t *testing.T) {
	order := make([]int, 0, 800)
	for g := range 800 {
		order = append(order, g)
	}
	order[600], order[601] = order[601], order[600]
	cases := []struct {
		name string
		edit func(a string) string
	}{
		{"clean", func(a string) string { return a }},
		{"unordered", nil},
		{"out of range", func(a string) string { return strings.Replace(a, "2001, 2002\n", "2001, 9999\n", 1) }},
		{"another form", func(a string) string { return strings.Replace(a, "2001, 2002\n", " 2001 ,\t2002\r\n", 1) }},
		{"self-loop", func(a string) string { return strings.Replace(a, "2001, 2002\n", "2001, 2001\n", 1) }},
	}
	defer func(size int) { pairBlockSize = size }(pairBlockSize)
	for _, c := range cases {
		var want string
		for _, size := range []int{1 << 20, 23, 64, 1000, 4096} {
			pairBlockSize = size
			var ds *Dataset
			if c.edit == nil {
				ds = chainDataset(t, 800, order, nil)
			} else {
				ds = chainDataset(t, 800, nil, c.edit)
			}
			var sum strings.Builder
			for _, buffered := range []bool{false, true} {
				st, err := ds.Graphs(context.Background(), ingest.ReadOptions{Buffered: buffered}, func(g *shard.Graph) error {
					fmt.Fprintf(&sum, "%d:%v ", g.ID, g.Edges)
					return nil
				})
				if err != nil {
					fmt.Fprintf(&sum, "\n%v\n", err) // stats are only promised without one
				} else {
					fmt.Fprintf(&sum, "\n%+v\n", st)
				}
			}
			if size == 1<<20 {
				want = sum.String()
				continue
			}
			if got := sum.String(); got != want {
				t.Errorf("%s, blocks of %d bytes: differs from 1 MiB blocks:\n%.300s\nwant\n%.300s", c.name, size, got, want)
			}
		}
	}
}

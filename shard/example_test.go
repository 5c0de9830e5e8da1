package shard_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/augloader/augloader/shard"
)

// Write a shard folder of two graphs, open it (every checksum verified),
// and read a graph back.
func Example() {
	dir, _ := os.MkdirTemp("", "shard-example-")
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "triangles.shards")

	w, err := shard.NewWriter(out, shard.WriterOptions{Dataset: "TRIANGLES", FeatureKind: shard.FeatureLabels, FeatureDim: 2})
	if err != nil {
		panic(err)
	}
	graphs := []shard.Graph{
		{ID: 0, Label: 0, NumNodes: 3, Edges: []int32{0, 1, 0, 2, 1, 2}, Codes: []int32{0, 0, 1}},
		{ID: 1, Label: 1, NumNodes: 2, Edges: []int32{0, 1}, Codes: []int32{1, 1}},
	}
	for i := range graphs {
		if err := w.Append(&graphs[i]); err != nil {
			w.Abort()
			panic(err)
		}
	}
	// Finish fills in the counts, the shards and their CRCs, and renames
	// the folder into place; the caller gives what only it knows.
	man, err := w.Finish(shard.Manifest{Classes: 2, LabelMap: []string{"-1", "1"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(man.Dataset, man.Stats.Graphs, "graphs,", man.Stats.Edges, "edges")

	r, err := shard.Open(context.Background(), out)
	if err != nil {
		panic(err)
	}
	defer r.Close()
	g, _ := r.Graph(1)
	fmt.Println("graph 1:", g.NumNodes, "nodes, edges", g.Edges, "label", g.Label, "codes", g.Codes)
	// Output:
	// TRIANGLES 2 graphs, 4 edges
	// graph 1: 2 nodes, edges [0 1] label 1 codes [1 1]
}

package loader_test

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/wire"
)

// Stream one epoch of a shard folder, augmented with NodeSam, as PyG-ready
// Arrow record batches.
func Example() {
	r, err := shard.Open(context.Background(), "../testdata/golden/tiny.shards")
	if err != nil {
		panic(err)
	}
	defer r.Close()
	src, _ := loader.NewSource(r, nil) // serve every graph
	sched, _ := epoch.ParseSchedule("nodesam")
	l, err := loader.New(src, loader.Config{Seed: 1, Schedule: sched, Workers: 2, BatchSize: 2})
	if err != nil {
		panic(err)
	}
	p, err := l.Plan(wire.Request{Epoch: 0, Rank: 0, World: 1})
	if err != nil {
		panic(err)
	}
	st, err := l.Stream(context.Background(), p, func(rec arrow.RecordBatch) error {
		ids := rec.Column(0).(*array.Int64).Int64Values()
		edges := rec.Column(2).(*array.List).ListValues().Len()
		fmt.Printf("batch: graphs %v, %d directed edges\n", ids, edges)
		return nil // the record is reused once the sink returns
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Batches, "batches,", st.Graphs, "graphs")
	// Output:
	// batch: graphs [1 0], 10 directed edges
	// batch: graphs [2], 2 directed edges
	// 2 batches, 3 graphs
}

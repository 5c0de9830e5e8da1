package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/server"
	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/wire"
)

// Read rank 1 of 2 of epoch 3 from a daemon over its Unix socket, with
// the stream's digest.
func Example() {
	dir, _ := os.MkdirTemp("", "client-example-")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "aug.sock")

	// A daemon serving the repository's tiny fixture, NodeSam on every graph.
	r, _ := shard.Open(context.Background(), "../testdata/golden/tiny.shards")
	defer r.Close()
	src, _ := loader.NewSource(r, nil)
	sched, _ := epoch.ParseSchedule("nodesam")
	l, _ := loader.New(src, loader.Config{Seed: 1, Schedule: sched, BatchSize: 2})
	ctx, stop := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.DaemonOptions{Source: server.Live{L: l}, Socket: sock,
			Ready: func(server.Endpoints) { close(ready) }})
	}()
	<-ready

	res, err := client.Fetch(context.Background(), sock, wire.Request{Epoch: 3, Rank: 1, World: 2},
		client.Options{Digests: true}, func(rec arrow.RecordBatch) error {
			ids := rec.Column(rec.Schema().FieldIndices(wire.ColGraphID)[0]).(*array.Int64).Int64Values()
			padded := rec.Column(rec.Schema().FieldIndices(wire.ColPadded)[0]).(*array.Boolean)
			for i, id := range ids {
				fmt.Printf("graph %d padded %v\n", id, padded.Value(i))
			}
			return nil
		})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d batches, %d graphs, sha256 %x…\n", res.Batches, res.Graphs, res.Digest[:4])
	stop()
	<-done
	// Output:
	// graph 2 padded false
	// graph 1 padded true
	// 1 batches, 2 graphs, sha256 a72ccf9d…
}

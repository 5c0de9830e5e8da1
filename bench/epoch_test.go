// Package bench holds the end-to-end benchmarks and the tools that draw
// the figures of docs/bench.md.
package bench

// BenchmarkCOLLABEpoch, BenchmarkREDDITBINARYEpoch: one epoch of the real
// COLLAB or REDDIT-BINARY (../shared/datasets),
// per policy and worker count, in three stages measured in the same run:
//
//	stage=augment  the policy on every graph with W goroutines, output discarded
//	stage=loader   loader.Stream: augment + collate into Arrow batches, no-op sink
//	stage=socket   augloader's server on a Unix socket to a Go client that
//	               decodes every batch (arrow IPC) and discards it
//
// Recipe:
//
//	go test -run XXX -bench 'Epoch|Limit' -benchtime 3x -count 3 ./bench | tee epoch.txt
//	benchstat epoch.txt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/internal/convert"
	"github.com/augloader/augloader/internal/testutil"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/server"
	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/wire"
)

var (
	shardsMu  sync.Mutex
	shardsDir = map[string]string{}
	benchTmp  string
)

// realShards converts a real dataset from ../shared/datasets once per run:
// COLLAB from its .tar.xz, REDDIT-BINARY from its zip.
func realShards(b *testing.B, name string) string {
	shardsMu.Lock()
	defer shardsMu.Unlock()
	if d, ok := shardsDir[name]; ok {
		return d
	}
	var in string
	switch name {
	case "COLLAB":
		in = filepath.Join(testutil.UnpackTarXZ(b, testutil.Shared(b, "tu", "COLLAB", "COLLAB_tu.tar.xz")), "COLLAB")
	case "REDDIT-BINARY":
		in = testutil.Shared(b, "tu", "REDDIT-BINARY", "REDDIT-BINARY.zip")
	}
	var err error
	if benchTmp == "" {
		if benchTmp, err = os.MkdirTemp("", "bench-"); err != nil {
			b.Fatal(err)
		}
	}
	out := filepath.Join(benchTmp, name)
	if _, err := convert.Run(context.Background(), convert.Options{Input: in, Out: out}); err != nil {
		b.Fatal(err)
	}
	shardsDir[name] = out
	return out
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchTmp != "" {
		os.RemoveAll(benchTmp)
	}
	os.Exit(code)
}

func BenchmarkCOLLABEpoch(b *testing.B)       { benchEpoch(b, "COLLAB") }
func BenchmarkREDDITBINARYEpoch(b *testing.B) { benchEpoch(b, "REDDIT-BINARY") }

func benchEpoch(b *testing.B, dataset string) {
	dir := realShards(b, dataset)
	r, err := shard.Open(context.Background(), dir)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	src, err := loader.NewSource(r, nil)
	if err != nil {
		b.Fatal(err)
	}
	graphs := make([]aug.Graph, r.NumGraphs())
	for i := range graphs {
		src.Load(int64(i), &graphs[i])
		graphs[i].Index = aug.BuildIndex(&graphs[i]) // as the loader caches it for NodeSam
	}
	for _, pol := range []string{"none", "nodesam", "submix"} {
		for _, workers := range []int{1, 2} {
			sched, _ := epoch.ParseSchedule(pol)
			l, err := loader.New(src, loader.Config{Seed: 1, Schedule: sched, Workers: workers, BatchSize: 32})
			if err != nil {
				b.Fatal(err)
			}
			name := fmt.Sprintf("policy=%s/workers=%d", pol, workers)
			b.Run(name+"/stage=augment", func(b *testing.B) {
				p, _ := sched.Resolve(0, src)
				op := p.Ops[0]
				for i := 0; i < b.N; i++ {
					var wg sync.WaitGroup
					for w := range workers {
						wg.Add(1)
						go func() {
							defer wg.Done()
							var s aug.Scratch
							var out aug.Graph
							for g := w; g < len(graphs); g += workers {
								op.Apply(&graphs[g], &out, s.Rand(1, uint64(i), graphs[g].ID, aug.OpID(op)), &s)
							}
						}()
					}
					wg.Wait()
				}
				report(b, len(graphs), 0)
			})
			b.Run(name+"/stage=loader", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					p, _ := l.Plan(loader.Request{Epoch: uint64(i), World: 1})
					if _, err := l.Stream(context.Background(), p, func(arrow.RecordBatch) error { return nil }); err != nil {
						b.Fatal(err)
					}
				}
				report(b, len(graphs), 0)
			})
			b.Run(name+"/stage=socket", func(b *testing.B) {
				sock := filepath.Join(b.TempDir(), "s.sock")
				srv, _ := server.New(server.Options{Source: server.Live{L: l}})
				ln, err := server.Listen(sock, 0o600)
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { srv.Serve(ctx, ln); close(done) }()
				defer func() { cancel(); <-done }()
				var bytes int64
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					res, err := client.Fetch(context.Background(), sock, wire.Request{Epoch: uint64(i), World: 1}, client.Options{}, nil)
					if err != nil {
						b.Fatal(err)
					}
					bytes += res.Bytes
				}
				report(b, len(graphs), bytes)
			})
		}
	}
}

func report(b *testing.B, graphs int, bytes int64) {
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(graphs*b.N)/sec, "graphs/s")
	b.ReportMetric(sec/float64(b.N), "s/epoch")
	if bytes > 0 {
		b.ReportMetric(float64(bytes)/1e6/sec, "MB/s")
		b.ReportMetric(float64(bytes)/1e6/float64(b.N), "MB/epoch")
	}
}

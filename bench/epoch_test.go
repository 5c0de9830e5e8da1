// Package bench holds the end-to-end benchmarks and the tools that draw
// the figures of docs/bench.md.
package bench

// BenchmarkCOLLABEpoch, BenchmarkREDDITBINARYEpoch: one epoch of the real
// COLLAB or REDDIT-BINARY (../shared/datasets), stage by stage, in one run.
// Once per dataset:
//
//	stage=open     shard.Open (size, CRC-32C and structure of every shard) + loader.NewSource
//	stage=index    decode every graph and build its NodeSam index (the one-off
//	               cost a daemon pays during its first NodeSam epoch)
//
// Per policy and worker count W, each stage a prefix of the daemon's
// pipeline, so the difference between two consecutive stages is what the
// later one adds to an epoch's wall time:
//
//	stage=decode   Source.Load of every graph (Arrow shard columns → aug.Graph), W goroutines
//	stage=augment  + the policy on every graph, output discarded
//	stage=loader   + collation into PyG-ready Arrow batches (loader.Stream, no-op sink)
//	stage=encode   + Arrow IPC encoding (loader.WriteStream to a byte counter)
//	stage=socket   + augloader's server on a Unix socket to the Go client, which decodes every batch
//	stage=shm      the same socket with the shared-memory transport (a 32 MiB memfd ring)
//	stage=flight   the same over Arrow Flight (gRPC on loopback TCP)
//
// and per policy, without the daemon:
//
//	stage=client-decode  the Go client decoding a recorded epoch stream from memory
//
// NodeSam's index is built before the stages run, so they measure steady
// epochs. Recipe:
//
//	go test -run XXX -bench 'Epoch|Limit' -benchtime 3x -count 3 ./bench | tee epoch.txt
//	benchstat epoch.txt

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/internal/testkit/testutil"
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
	ctx := context.Background()
	b.Run("stage=open", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			r, err := shard.Open(ctx, dir)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := loader.NewSource(r, nil); err != nil {
				b.Fatal(err)
			}
			r.Close()
		}
		report(b, 0, 0)
	})
	r, err := shard.Open(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	n := r.NumGraphs()
	b.Run("stage=index", func(b *testing.B) {
		var g aug.Graph
		for i := 0; i < b.N; i++ {
			fresh, _ := loader.NewSource(r, nil)
			fresh.EnableIndex()
			for id := range n {
				if err := fresh.Load(context.Background(), int64(id), &g); err != nil {
					b.Fatal(err)
				}
			}
		}
		report(b, n, 0)
	})
	src, err := loader.NewSource(r, nil)
	if err != nil {
		b.Fatal(err)
	}
	src.EnableIndex()
	var g aug.Graph
	for id := range n { // build every index now: the stages measure steady epochs
		if err := src.Load(context.Background(), int64(id), &g); err != nil {
			b.Fatal(err)
		}
	}
	for _, pol := range []string{"none", "nodesam", "submix"} {
		sched, _ := epoch.ParseSchedule(pol)
		for _, workers := range []int{1, 2} {
			l, err := loader.New(src, loader.Config{Seed: 1, Schedule: sched, Workers: workers, BatchSize: 32})
			if err != nil {
				b.Fatal(err)
			}
			name := fmt.Sprintf("policy=%s/workers=%d", pol, workers)
			p0, _ := sched.Resolve(0, src)
			op := p0.Ops[0]
			perGraph := func(b *testing.B, apply bool) {
				for i := 0; i < b.N; i++ {
					var wg sync.WaitGroup
					for w := range workers {
						wg.Add(1)
						go func() {
							defer wg.Done()
							var s aug.Scratch
							var in, out aug.Graph
							var edges aug.Coalesced // what the loader does: NodeSam writes the batch's edge columns
							fused, _ := op.(aug.CoalescedApplier)
							for k, id := 0, int64(w); id < int64(n); k, id = k+1, id+int64(workers) {
								if err := src.Load(context.Background(), id, &in); err != nil {
									b.Error(err)
									return
								}
								if !apply {
									continue
								}
								r := s.Rand(1, uint64(i), id, aug.OpID(op))
								if fused != nil {
									if k%32 == 0 {
										edges.Reset()
									}
									fused.ApplyCoalesced(&in, &out, r, &s, &edges, 0)
								} else {
									op.Apply(&in, &out, r, &s)
								}
							}
						}()
					}
					wg.Wait()
				}
				report(b, n, 0)
			}
			b.Run(name+"/stage=decode", func(b *testing.B) { perGraph(b, false) })
			b.Run(name+"/stage=augment", func(b *testing.B) { perGraph(b, true) })
			b.Run(name+"/stage=loader", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					p, _ := l.Plan(wire.Request{Epoch: uint64(i), World: 1})
					if _, err := l.Stream(ctx, p, func(arrow.RecordBatch) error { return nil }); err != nil {
						b.Fatal(err)
					}
				}
				report(b, n, 0)
			})
			b.Run(name+"/stage=encode", func(b *testing.B) {
				var cw countingWriter
				for i := 0; i < b.N; i++ {
					p, _ := l.Plan(wire.Request{Epoch: uint64(i), World: 1})
					if _, err := l.WriteStream(ctx, p, &cw); err != nil {
						b.Fatal(err)
					}
				}
				report(b, n, cw.n)
			})
			// The socket, and the same socket with the shared-memory
			// transport (a 32 MiB ring, as the Python client's default).
			for _, tr := range []struct {
				stage string
				ring  int
			}{{"socket", 0}, {"shm", 32 << 20}} {
				b.Run(name+"/stage="+tr.stage, func(b *testing.B) {
					sock := filepath.Join(b.TempDir(), "s.sock")
					srv, _ := server.New(server.Options{Source: server.Live{L: l}})
					ln, err := server.Listen(sock, 0o600)
					if err != nil {
						b.Fatal(err)
					}
					sctx, cancel := context.WithCancel(ctx)
					done := make(chan struct{})
					go func() { srv.Serve(sctx, ln); close(done) }()
					defer func() { cancel(); <-done }()
					var bytes int64
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						res, err := client.Fetch(ctx, sock, wire.Request{Epoch: uint64(i), World: 1}, client.Options{ShmRing: tr.ring}, nil)
						if err != nil {
							b.Fatal(err)
						}
						bytes += res.Bytes
					}
					report(b, n, bytes)
				})
			}
			b.Run(name+"/stage=flight", func(b *testing.B) {
				ln, err := server.ListenFlight(server.FlightOptions{Address: "grpc://127.0.0.1:0"})
				if err != nil {
					b.Fatal(err)
				}
				gs := server.NewFlightServer(&server.Flight{Source: server.Live{L: l}}, server.FlightOptions{})
				sctx, cancel := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() { server.ServeFlight(sctx, gs, ln, time.Second); close(done) }()
				defer func() { cancel(); <-done }()
				addr := "grpc://" + ln.Addr().String()
				var bytes int64
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					res, err := client.FetchFlight(ctx, addr, "", wire.Request{Epoch: uint64(i), World: 1}, client.Options{}, nil)
					if err != nil {
						b.Fatal(err)
					}
					bytes += res.Bytes
				}
				report(b, n, bytes)
			})
			if workers != 1 {
				continue
			}
			b.Run(fmt.Sprintf("policy=%s/stage=client-decode", pol), func(b *testing.B) {
				var buf bytes.Buffer
				p, _ := l.Plan(wire.Request{Epoch: 0, World: 1})
				if _, err := l.WriteStream(ctx, p, &buf); err != nil {
					b.Fatal(err)
				}
				decode := func() {
					ir, err := ipc.NewReader(bytes.NewReader(buf.Bytes()))
					if err != nil {
						b.Fatal(err)
					}
					for ir.Next() {
					}
					if err := ir.Err(); err != nil {
						b.Fatal(err)
					}
					ir.Release()
				}
				// Untimed passes first: a long-running client's heap
				// already holds the pages its batches land in; a cold one
				// pays a page fault per 4 KiB (several times the decode here).
				decode()
				decode()
				runtime.GC()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					decode()
				}
				report(b, n, int64(buf.Len())*int64(b.N))
			})
		}
	}
}

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

func report(b *testing.B, graphs int, bytes int64) {
	sec := b.Elapsed().Seconds()
	if graphs > 0 {
		b.ReportMetric(float64(graphs*b.N)/sec, "graphs/s")
	}
	b.ReportMetric(sec/float64(b.N), "s/epoch")
	if bytes > 0 {
		b.ReportMetric(float64(bytes)/1e6/sec, "MB/s")
		b.ReportMetric(float64(bytes)/1e6/float64(b.N), "MB/epoch")
	}
}

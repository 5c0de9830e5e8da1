package server_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/materialize"
	"github.com/augloader/augloader/server"
	"github.com/augloader/augloader/wire"
)

// twinLoader serves the policy and twin sets ("A / B" each) with workers.
func twinLoader(t *testing.T, dir string, workers int, sets ...string) *loader.Loader {
	t.Helper()
	return fixture.Loader(t, dir, nil, policy, loader.Config{Seed: 11, Workers: workers, BatchSize: 8, Twins: fixture.Twins(t, sets...)})
}

// A twin stream is the same bytes whatever the workers (1 and 4) and the
// transport: the socket, shared memory and Flight (TCP and Unix) agree
// batch for batch, count graphs (not rows) alike, and the response says
// the twins and carries the identity with the sets and weights. A replay
// daemon refuses twins, saying why.
func TestTwinsEveryTransport(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	sets := []string{"dropnode:ratio=0.2 / subgraph:ratio=0.2", "attrmask:ratio=0.2 / dropedge:ratio=0.2", "nodesam / submix"}
	one := twinLoader(t, dir, 1, sets...)
	four := twinLoader(t, dir, 4, sets...)
	req := wire.Request{Epoch: 3, Rank: 1, World: 2, Twins: 2, TwinWeights: []float64{1, 1, 2}}
	want := fetch(t, serve(t, server.Live{L: one}), req, nil)
	if want.Info.Twins != 2 || want.Graphs != 30 || want.Info.Graphs != 30 || want.Info.Config.TwinWeights != "0.25,0.25,0.5" {
		t.Fatalf("response %+v, %d graphs: want twins 2, 30 graphs, the weights in the identity", want.Info, want.Graphs)
	}
	sock := serve(t, server.Live{L: four})
	if got := fetch(t, sock, req, nil); got.Digest != want.Digest {
		t.Fatal("4 workers: the twin stream differs from 1 worker's")
	}
	shm, err := client.Fetch(context.Background(), sock, req, client.Options{Digests: true, ShmRing: 32 << 20}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if shm.Digest != want.Digest || !slices.Equal(shm.BatchDigests, want.BatchDigests) || shm.Graphs != want.Graphs {
		t.Fatal("shared memory: the twin stream differs from the socket's")
	}
	for _, unix := range []bool{false, true} {
		addr := serveFlight(t, server.Live{L: four}, unix, "")
		got, err := client.FetchFlight(context.Background(), addr, "", req, client.Options{Digests: true}, nil)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		if got.Digest != want.Digest || got.Batches != want.Batches || got.Graphs != want.Graphs {
			t.Fatalf("%s: flight %d batches, %d graphs, %x; socket %d, %d, %x", addr, got.Batches, got.Graphs, got.Digest[:4],
				want.Batches, want.Graphs, want.Digest[:4])
		}
	}
	out := t.TempDir()
	if err := materialize.Run(context.Background(), materialize.Options{Loader: one, Out: out, From: 0, To: 1, World: 2}); err != nil {
		t.Fatal(err)
	}
	rp, err := server.OpenReplay(out)
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Fetch(context.Background(), serve(t, rp), wire.Request{Epoch: 0, Rank: 0, World: 2, Twins: 2}, client.Options{}, nil)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeOutOfRange {
		t.Fatalf("twins from a replay: %v", err)
	}
}

package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/augloader/augloader/app"
	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/materialize"
	"github.com/augloader/augloader/server"
	"github.com/augloader/augloader/wire"
)

// replayPool materializes every fold of three views (a constant mixture on
// the training sets, none on the test sets, and a schedule that changes
// with the epoch) for world 2, and serves them live, and from two replay
// daemons.
func replayPool(t *testing.T) (live string, replays []string) {
	t.Helper()
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	folds, _ := writeFolds(t, dir, 3)
	b, err := app.BuildViews(context.Background(), app.LoaderOptions{Shards: dir, Workers: 2, BatchSize: 8, Remainder: "pad", Seed: 5,
		Folds: folds, Views: []string{"train={fold}:training:nodesam:0.5,submix:p=0.4:0.5", "test={fold}:test", "sched=all:0..2|none;2..|dropedge"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	out := t.TempDir()
	if err := materialize.Run(context.Background(), materialize.Options{Views: b.Views, Out: out, From: 0, To: 6, World: 2}); err != nil {
		t.Fatal(err)
	}
	if checked, inc, errs := materialize.Verify(context.Background(), out); len(errs) > 0 || len(checked) != 6*(3+3+1) || len(inc) != 0 {
		t.Fatalf("verify: %d checked, incomplete %v, errors %v", len(checked), inc, errs)
	}
	for range 2 {
		rp, err := server.OpenReplay(out)
		if err != nil {
			t.Fatal(err)
		}
		replays = append(replays, serve(t, rp))
	}
	return serve(t, server.Live{Views: b.Views}), replays
}

// Replay serves, for every request field, what a live daemon of the same
// configuration serves: two replay daemons read as a pool (lanes by
// stride) give one live daemon's batches byte for byte, and one replay
// daemon gives the live stream itself (schema, batches, response) over
// the socket and shared memory. Before, replay ignored stride, count,
// batches_per_epoch, drop_last, view and fold: a pool of two sent every
// batch twice.
func TestReplayServesEveryField(t *testing.T) {
	live, replays := replayPool(t)
	train := func(fold int) wire.Request {
		return wire.Request{Epoch: 2, Rank: 1, World: 2, View: "train", Fold: fold}
	}
	with := func(r wire.Request, f func(*wire.Request)) wire.Request { f(&r); return r }
	cases := map[string]wire.Request{
		"epoch":                train(0),
		"rank and fold":        with(train(2), func(r *wire.Request) { r.Rank, r.Epoch = 0, 5 }),
		"batch size given":     with(train(1), func(r *wire.Request) { r.BatchSize = 8 }),
		"start batch":          with(train(1), func(r *wire.Request) { r.StartBatch = 1 }),
		"stride":               with(train(1), func(r *wire.Request) { r.Stride = 2 }),
		"start, stride, count": with(train(1), func(r *wire.Request) { r.StartBatch, r.Stride, r.Count = 1, 2, 1 }),
		"count":                with(train(0), func(r *wire.Request) { r.Count = 3 }),
		"drop last":            with(train(0), func(r *wire.Request) { r.DropLast = true }),
		"batches per epoch":    with(train(0), func(r *wire.Request) { r.BatchesPerEpoch = 5 }),
		"per epoch, drop last": with(train(2), func(r *wire.Request) { r.BatchesPerEpoch, r.DropLast, r.Epoch = 3, true, 3 }),
		"per epoch, resumed":   with(train(1), func(r *wire.Request) { r.BatchesPerEpoch, r.StartBatch, r.Count, r.Epoch = 4, 1, 2, 3 }),
		"test view":            {Epoch: 4, Rank: 0, World: 2, View: "test", Fold: 1},
		"epoch-dependent view": {Epoch: 1, Rank: 1, World: 2, View: "sched"},
		"digest":               with(train(0), func(r *wire.Request) { r.Digest = true }),
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			want := fetch(t, live, req, nil)
			one := fetch(t, replays[0], req, nil)
			if one.Digest != want.Digest || one.Bytes != want.Bytes {
				t.Fatalf("one replay daemon: stream %x (%d bytes), live %x (%d bytes)", one.Digest[:4], one.Bytes, want.Digest[:4], want.Bytes)
			}
			a, _ := json.Marshal(one.Info)
			b, _ := json.Marshal(want.Info)
			if string(a) != string(b) || one.Trailer != want.Trailer {
				t.Fatalf("one replay daemon: response %s trailer %+v; live %s %+v", a, one.Trailer, b, want.Trailer)
			}
			shm, err := client.Fetch(context.Background(), replays[1], req, client.Options{Digests: true, ShmRing: 1 << 20}, nil)
			if err != nil || shm.Digest != want.Digest {
				t.Fatalf("one replay daemon over shared memory: %v", err)
			}
			pool, err := client.FetchMany(context.Background(), replays, req, client.Options{Digests: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(pool.BatchDigests, want.BatchDigests) || pool.Graphs != want.Graphs {
				t.Fatalf("replay pool: %d batches, %d graphs; live %d, %d", len(pool.BatchDigests), pool.Graphs, len(want.BatchDigests), want.Graphs)
			}
		})
	}
	refused := map[string]struct {
		req  wire.Request
		want string
	}{
		"another world":      {wire.Request{Epoch: 1, Rank: 0, World: 1, View: "test"}, "materialized for 2"},
		"another batch size": {with(train(0), func(r *wire.Request) { r.BatchSize = 16 }), "materialized with 8"},
		"no such view":       {wire.Request{Epoch: 1, Rank: 0, World: 2, View: "valid"}, `no view "valid"`},
		"no view named":      {wire.Request{Epoch: 1, Rank: 0, World: 2}, "a view is required"},
		"no such fold":       {with(train(3), func(*wire.Request) {}), "fold 3 of view"},
		"a viewless fold":    {wire.Request{Epoch: 1, Rank: 0, World: 2, View: "sched", Fold: 1}, "has no folds"},
		"epoch not made":     {with(train(0), func(r *wire.Request) { r.Epoch = 6 }), "epoch 6 is not materialized"},
		"pass not made":      {with(train(0), func(r *wire.Request) { r.BatchesPerEpoch, r.Epoch = 5, 5 }), "epoch 5 needs pass 8"},
		"per epoch, varying": {wire.Request{Epoch: 1, Rank: 0, World: 2, View: "sched", BatchesPerEpoch: 2}, "changes with the epoch"},
		"start beyond":       {with(train(0), func(r *wire.Request) { r.StartBatch = 9 }), "start batch 9"},
		"resume phases": {with(train(0), func(r *wire.Request) {
			r.Resume = []wire.ResumePhase{{World: 1, Graphs: []int{3}}}
		}), "replay at that world size only"},
	}
	for name, c := range refused {
		t.Run("refused/"+name, func(t *testing.T) {
			_, err := client.Fetch(context.Background(), replays[0], c.req, client.Options{}, nil)
			var we *wire.Error
			if !errors.As(err, &we) || we.Code != wire.CodeOutOfRange || !strings.Contains(we.Message, c.want) {
				t.Fatalf("got %v, want out_of_range saying %q", err, c.want)
			}
		})
	}
}

// A replayed response lists the batches over the node budget as the live
// one does (stored per file by materialize), also for a strided request.
func TestReplayOverBudget(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	l := fixture.Loader(t, dir, nil, "nodesam", loader.Config{Seed: 3, Workers: 2, BatchSize: 8, NodeBudget: 60})
	out := t.TempDir()
	if err := materialize.Run(context.Background(), materialize.Options{Loader: l, Out: out, From: 0, To: 2, World: 1}); err != nil {
		t.Fatal(err)
	}
	rp, err := server.OpenReplay(out)
	if err != nil {
		t.Fatal(err)
	}
	live, replay := serve(t, server.Live{L: l}), serve(t, rp)
	for _, req := range []wire.Request{{Epoch: 1, World: 1}, {Epoch: 1, World: 1, StartBatch: 1, Stride: 3}} {
		want, got := fetch(t, live, req, nil), fetch(t, replay, req, nil)
		if len(want.Info.OverBudget) == 0 && req.Stride == 0 {
			t.Fatal("no batch over the budget: the test shows nothing")
		}
		if !slices.Equal(got.Info.OverBudget, want.Info.OverBudget) || got.Digest != want.Digest {
			t.Fatalf("%+v: replay over_budget %v, live %v", req, got.Info.OverBudget, want.Info.OverBudget)
		}
	}
}

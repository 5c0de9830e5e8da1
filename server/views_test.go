package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/augloader/augloader/app"
	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/internal/iox"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/server"
	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/wire"
)

// writeFolds writes k stratified split files for the shards at dir.
func writeFolds(t *testing.T, dir string, k int) (string, []epoch.Split) {
	t.Helper()
	r, err := shard.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	labels := make([]int32, r.NumGraphs())
	for i := range labels {
		g, _ := r.Graph(int64(i))
		labels[i] = g.Label
	}
	folds, err := epoch.StratifiedKFold(labels, k, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for i, f := range folds {
		b, _ := jsonMarshal(f)
		if err := iox.WriteFileAtomic(filepath.Join(out, fold(i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out, folds
}

// One daemon serves every fold of every view: a request's (view, fold)
// gets exactly that split set's graphs, with that view's schedule; a test
// view applies none unless told otherwise, and each view and fold has its
// own configuration identity.
func TestViews(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	folds, splits := writeFolds(t, dir, 3)
	b, err := app.BuildViews(context.Background(), app.LoaderOptions{Shards: dir, Workers: 2, BatchSize: 8, Remainder: "pad",
		Folds: folds, Views: []string{"train={fold}:training:nodesam", "plain={fold}:training:none", "test={fold}:test", "all=all:submix"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sock := serve(t, server.Live{Views: b.Views})
	ids := map[string]bool{}
	for f, sp := range splits {
		for view, want := range map[string][]int64{"train": sp.Training, "plain": sp.Training, "test": sp.Test} {
			var got []int64
			policies := map[string]bool{}
			res := fetch(t, sock, wire.Request{Epoch: 1, World: 1, View: view, Fold: f}, func(rec arrow.RecordBatch) error {
				got = append(got, rec.Column(0).(*array.Int64).Int64Values()...)
				pol := rec.Column(rec.Schema().FieldIndices(wire.ColPolicy)[0]).(*array.String)
				for i := range pol.Len() {
					policies[pol.Value(i)] = true
				}
				return nil
			})
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("view %s fold %d: graphs %v, want %v", view, f, got, want)
			}
			wantPol := map[string]string{"train": "nodesam", "plain": "none", "test": "none"}[view]
			if len(policies) != 1 || !policies[wantPol] {
				t.Fatalf("view %s: policies %v, want %s only", view, policies, wantPol)
			}
			if res.Info.Config == nil || ids[res.Info.Config.ID] {
				t.Fatalf("view %s fold %d: identity %+v not its own", view, f, res.Info.Config)
			}
			ids[res.Info.Config.ID] = true
		}
	}
	if res := fetch(t, sock, wire.Request{World: 1, View: "all"}, nil); res.Graphs != 60 {
		t.Fatalf("view all: %d graphs", res.Graphs)
	}
	for _, req := range []wire.Request{{World: 1}, {World: 1, View: "nope"}, {World: 1, View: "train", Fold: 3}, {World: 1, View: "all", Fold: 1}} {
		_, err := client.Fetch(context.Background(), sock, req, client.Options{}, nil)
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != wire.CodeOutOfRange {
			t.Errorf("%+v: %v, want out_of_range", req, err)
		}
	}
	// A test set with an augmenting schedule needs --augment-test.
	if _, err := app.BuildViews(context.Background(), app.LoaderOptions{Shards: dir, Folds: folds, Views: []string{"t={fold}:test:nodesam"}}); err == nil {
		t.Fatal("an augmented test view was accepted without AugmentTest")
	}
	if b2, err := app.BuildViews(context.Background(), app.LoaderOptions{Shards: dir, Folds: folds, AugmentTest: true, Views: []string{"t={fold}:test:nodesam"}}); err != nil {
		t.Fatalf("with AugmentTest: %v", err)
	} else {
		b2.Close()
	}
	// serve --split F --split-set test without a policy serves none.
	b3, err := app.BuildViews(context.Background(), app.LoaderOptions{Shards: dir, SplitFile: filepath.Join(folds, fold(0)), SplitSet: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer b3.Close()
	if s := b3.Loader.Identity().Schedule; s != "0..|none:1" {
		t.Fatalf("a test set without a policy: schedule %q, want none", s)
	}
}

func fold(i int) string { return "fold-0" + string(rune('0'+i)) + ".json" }

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// Declared twin sets reach every training or whole-set view, not a test
// view (unless AugmentTest); sets of different lengths, or a bad schedule
// in one, are refused naming the flag.
func TestViewTwins(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	folds, _ := writeFolds(t, dir, 3)
	o := app.LoaderOptions{Shards: dir, Workers: 2, BatchSize: 8, Remainder: "pad", Folds: folds,
		Views: []string{"pre=all:none", "train={fold}:training", "test={fold}:test"}, Twins: []string{"dropnode:ratio=0.2 / subgraph", "attrmask / attrmask"}}
	b, err := app.BuildViews(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for view, want := range map[string]int{"pre": 2, "train": 2, "test": 0} {
		if got := b.Views.View(view).Folds[0].Twins(); got != want {
			t.Errorf("view %s serves %d twins, want %d", view, got, want)
		}
	}
	for _, twins := range [][]string{{"none / none", "none / none / none"}, {"none / nope"}, {"none"}} {
		o.Twins = twins
		if b2, err := app.BuildViews(context.Background(), o); err == nil || !strings.Contains(err.Error(), "--twins") {
			if b2 != nil {
				b2.Close()
			}
			t.Errorf("twins %q: %v, want an error naming --twins", twins, err)
		}
	}
}

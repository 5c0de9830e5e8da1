package shard_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/shard"
)

func TestParseOrder(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""}, {"id", ""}, {" id ", ""}, {"random:0", "random:0"}, {"random:007", "random:7"},
		{"random:18446744073709551615", "random:18446744073709551615"},
	} {
		if got, err := shard.ParseOrder(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseOrder(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"random", "random:", "random:-1", "random:x", "shuffled", "random:1.5"} {
		if _, err := shard.ParseOrder(in); err == nil {
			t.Errorf("ParseOrder(%q) accepted", in)
		}
	}
}

// A folder stored in a random order serves every graph by id exactly as
// the folder stored in id order does, read eagerly or by pages, with the
// same graph-size index by id; its pages hold graphs from all over the
// id range, and verify checks it.
func TestRandomOrder(t *testing.T) {
	byID := fixture.SynthShardsSized(t, "COLLAB", 600, 4, 256<<10)
	random := fixture.SynthShardsOrdered(t, "COLLAB", 600, 4, 256<<10, "random:9")
	want, err := shard.Open(context.Background(), byID)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	man, err := shard.ReadManifest(random)
	if err != nil {
		t.Fatal(err)
	}
	if man.Order != "random:9" || man.Stats != want.Manifest().Stats {
		t.Fatalf("order %q, stats %+v; want random:9 and %+v", man.Order, man.Stats, want.Manifest().Stats)
	}
	if _, errs := shard.Verify(context.Background(), random); len(errs) > 0 {
		t.Fatalf("verify: %v", errs)
	}
	eager, err := shard.Open(context.Background(), random)
	if err != nil {
		t.Fatal(err)
	}
	defer eager.Close()
	lazy, err := shard.Open(context.Background(), random, shard.WithCacheLimit(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer lazy.Close()
	for id := range int64(want.NumGraphs()) {
		w, _ := want.Graph(id)
		g, err := eager.Graph(id)
		if err != nil || !reflect.DeepEqual(g, w) {
			t.Fatalf("graph %d differs stored in random order (%v)", id, err)
		}
		p, rel, err := lazy.Pin(context.Background(), id)
		if err != nil || !reflect.DeepEqual(p, w) {
			t.Fatalf("graph %d differs read by pages in random order (%v)", id, err)
		}
		rel()
		if man.IDAt(man.PositionOf(id)) != id {
			t.Fatalf("IDAt(PositionOf(%d)) = %d", id, man.IDAt(man.PositionOf(id)))
		}
	}
	ws, err := want.GraphSizes()
	if err != nil {
		t.Fatal(err)
	}
	gs, err := eager.GraphSizes()
	if err != nil || !reflect.DeepEqual(gs, ws) {
		t.Fatalf("graph sizes by id differ in random order (%v)", err)
	}
	// Page 0 holds graphs from across the set, not the first ids.
	first, n := eager.PageGraphs(0)
	var lo, hi int64 = 1 << 62, -1
	for pos := first; pos < first+n; pos++ {
		id := man.IDAt(pos)
		lo, hi = min(lo, id), max(hi, id)
		if eager.PageOf(id) != 0 {
			t.Fatalf("graph %d at position %d: PageOf says page %d", id, pos, eager.PageOf(id))
		}
	}
	if n > 4 && hi-lo < int64(want.NumGraphs())/2 {
		t.Errorf("page 0's %d graphs span ids %d..%d of %d: not spread", n, lo, hi, want.NumGraphs())
	}
}

// An order the format does not know is refused, naming the field.
func TestBadOrderRefused(t *testing.T) {
	src := fixture.SynthShardsOrdered(t, "COLLAB", 60, 4, 0, "random:9")
	dir := copyDir(t, src)
	path := filepath.Join(dir, shard.ManifestName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), `"random:9"`, `"random:x"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = shard.Open(context.Background(), dir)
	var ce *shard.CorruptionError
	if !errors.As(err, &ce) || ce.Field != "order" {
		t.Fatalf("a manifest with order random:x: %v", err)
	}
}

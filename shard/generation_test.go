package shard_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/shard"
)

// A folder with a generation (#47) names its files by it: it reads as the
// same graphs as the folder without one, its graph-size index included,
// and a manifest whose names and generation disagree is refused naming
// the field.
func TestGenerationNames(t *testing.T) {
	ctx := context.Background()
	const gen = "0123456789abcdef"
	plain := fixture.SynthShardsSized(t, "COLLAB", 80, 3, 64<<10)
	dir := fixture.SynthShardsWith(t, "COLLAB", 80, 3, convert.Options{ShardBytes: 64 << 10, Generation: gen})
	man, err := shard.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Shards) < 2 || man.Generation != gen || man.Shards[1].File != "shard-00001."+gen+".arrow" {
		t.Fatalf("generation %q, shards %d, second named %q", man.Generation, len(man.Shards), man.Shards[1].File)
	}
	if _, err := os.Stat(filepath.Join(dir, "graph-sizes."+gen+".bin")); err != nil {
		t.Fatal(err)
	}
	if _, errs := shard.Verify(ctx, dir); len(errs) > 0 {
		t.Fatal(errs)
	}
	want, err := shard.Open(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	got, err := shard.Open(ctx, dir, shard.WithCacheLimit(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	ws, err := want.GraphSizes()
	if err != nil {
		t.Fatal(err)
	}
	if gs, err := got.GraphSizes(); err != nil || !reflect.DeepEqual(gs, ws) {
		t.Fatalf("the graph-size index of a folder with a generation: %v", err)
	}
	for id := int64(0); id < 80; id++ {
		w, err1 := want.Graph(id)
		g, rel, err2 := got.Pin(context.Background(), id)
		if err1 != nil || err2 != nil || !reflect.DeepEqual(w, g) {
			t.Fatalf("graph %d differs from the folder without a generation (%v, %v)", id, err1, err2)
		}
		rel()
	}
	for _, tc := range []struct {
		name, field string
		edit        func(*shard.Manifest)
	}{
		{"names without the generation", "shards", func(m *shard.Manifest) { m.Generation = "" }},
		{"another generation", "shards", func(m *shard.Manifest) { m.Generation = "fedcba9876543210" }},
		{"not hex", "generation", func(m *shard.Manifest) { m.Generation = "0123456789ABCDEF" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := copyDir(t, dir)
			fixture.RewriteManifest(t, d, tc.edit)
			_, err := shard.Open(ctx, d)
			if !errors.Is(err, shard.ErrCorrupt) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("want a corruption naming %s, got %v", tc.field, err)
			}
		})
	}
}

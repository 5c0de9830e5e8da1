package materialize_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augloader/augloader/app"
	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/internal/jsonseal"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/materialize"
)

func TestMain(m *testing.M) { fixture.Main(m) }

type settings struct {
	policy     string
	seed       uint64
	batch      int
	nodeBudget int
	edgeBudget int
	remainder  epoch.Remainder
	served     []int64
}

func newLoader(t *testing.T, dir string, s settings) *loader.Loader {
	t.Helper()
	if s.policy == "" {
		s.policy = "nodesam:0.5,submix:p=0.4:0.5"
	}
	if s.batch == 0 {
		s.batch = 16
	}
	return fixture.Loader(t, dir, s.served, s.policy, loader.Config{Seed: s.seed, Workers: 2, BatchSize: s.batch,
		NodeBudget: s.nodeBudget, EdgeBudget: s.edgeBudget, Remainder: s.remainder})
}

func run(t *testing.T, l *loader.Loader, out string, from, to uint64, world int, force bool) error {
	t.Helper()
	return materialize.Run(context.Background(), materialize.Options{Loader: l, Out: out, From: from, To: to, World: world, Force: force})
}

func mustVerify(t *testing.T, out string, complete int) {
	t.Helper()
	checked, incomplete, errs := materialize.Verify(context.Background(), out)
	if len(errs) > 0 || len(checked) != complete || len(incomplete) != 0 {
		t.Fatalf("verify: checked %v, incomplete %v, errors %v; want %d complete", checked, incomplete, errs, complete)
	}
}

func fileBytes(t *testing.T, out string, e uint64, rank, world int) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, materialize.EpochDir(e), materialize.FileName(rank, world)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A rerun skips complete epochs byte for byte and adds the missing ones.
func TestRerunSkipsComplete(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 40, 3)
	out := t.TempDir()
	l := newLoader(t, dir, settings{})
	if err := run(t, l, out, 0, 2, 2, false); err != nil {
		t.Fatal(err)
	}
	before := fileBytes(t, out, 1, 1, 2)
	if err := run(t, l, out, 0, 3, 2, false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, fileBytes(t, out, 1, 1, 2)) {
		t.Fatal("a rerun rewrote a complete epoch")
	}
	mustVerify(t, out, 3)
}

// Every setting that changes bytes is part of the stored identity: a run
// with any other is refused, naming the difference; --force removes every
// old epoch and writes the new configuration's (never a mix).
func TestMixedConfigurationRefused(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 40, 3)
	base := settings{}
	for _, c := range []struct {
		name  string
		s     settings
		world int
		want  string
	}{
		{"node budget", settings{nodeBudget: 3}, 1, "node budget 0 vs 3"},
		{"edge budget", settings{edgeBudget: 500}, 1, "edge budget"},
		{"seed", settings{seed: 9}, 1, "seed 0 vs 9"},
		{"schedule", settings{policy: "nodesam"}, 1, "schedule"},
		{"batch size", settings{batch: 8}, 1, "batch size 16 vs 8"},
		{"remainder", settings{remainder: epoch.Drop}, 3, "remainder"},
		{"served set", settings{served: []int64{1, 2, 3, 5, 8, 13, 21}}, 1, "served set"},
		{"world", settings{}, 2, "world 1 vs 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			baseWorld := 1
			if c.name == "remainder" {
				baseWorld = 3 // 40 graphs: pad and drop differ only when the world does not divide them
			}
			if err := run(t, newLoader(t, dir, base), out, 0, 1, baseWorld, false); err != nil {
				t.Fatal(err)
			}
			old := fileBytes(t, out, 0, 0, baseWorld)
			l := newLoader(t, dir, c.s)
			err := run(t, l, out, 0, 2, c.world, false)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("mixed run: %v, want an error naming %q", err, c.want)
			}
			if !bytes.Equal(old, fileBytes(t, out, 0, 0, baseWorld)) {
				t.Fatal("a refused run changed the folder")
			}
			if err := run(t, l, out, 0, 2, c.world, true); err != nil {
				t.Fatalf("--force: %v", err)
			}
			mustVerify(t, out, 2)
			cfg, err := materialize.ReadConfig(out)
			if err != nil || cfg.Views[0].Folds[0].Config != l.Identity() {
				t.Fatalf("after --force the stored identity is %+v (%v), want the new loader's", cfg, err)
			}
		})
	}
}

// Verify catches what the audit found it missed: a flipped schema byte, an
// edited manifest count, an edited configuration; and it reports an
// incomplete epoch.
func TestVerifyCatches(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 40, 3)
	l := newLoader(t, dir, settings{})
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, out string)
		want   string
	}{
		{"schema byte", func(t *testing.T, out string) {
			p := filepath.Join(out, materialize.EpochDir(0), materialize.FileName(0, 1))
			b, _ := os.ReadFile(p)
			i := bytes.Index(b, []byte("edge_src"))
			b[i+7] ^= 1 // edge_src → edge_srb
			os.WriteFile(p, b, 0o644)
		}, "sha256"},
		{"manifest graphs", func(t *testing.T, out string) {
			p := filepath.Join(out, materialize.EpochDir(1), materialize.ManifestName)
			b, _ := os.ReadFile(p)
			if !bytes.Contains(b, []byte(`"graphs": 16`)) {
				t.Fatal("no batch of 16 graphs in the manifest")
			}
			b = bytes.Replace(b, []byte(`"graphs": 16`), []byte(`"graphs": 17`), 1)
			os.WriteFile(p, b, 0o644)
		}, "checksum mismatch"},
		{"configuration", func(t *testing.T, out string) {
			p := filepath.Join(out, materialize.ConfigName)
			b, _ := os.ReadFile(p)
			if !bytes.Contains(b, []byte(`"seed": 0`)) {
				t.Fatal("no seed in the configuration")
			}
			b = bytes.Replace(b, []byte(`"seed": 0`), []byte(`"seed": 1`), 1)
			os.WriteFile(p, b, 0o644)
		}, "checksum mismatch"},
		// A hand-forged configuration whose seal was recomputed: its
		// identity no longer matches its fields (it passed verify).
		{"forged configuration", func(t *testing.T, out string) {
			cfg, err := materialize.ReadConfig(out)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Views[0].Folds[0].Config.Seed = 7
			cfg.Views[0].Folds[0].Config.BatchSize = 4
			b, err := jsonseal.Seal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(out, materialize.ConfigName), b, 0o644)
		}, "does not match its fields"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			if err := run(t, l, out, 0, 2, 1, false); err != nil {
				t.Fatal(err)
			}
			mustVerify(t, out, 2)
			c.damage(t, out)
			_, _, errs := materialize.Verify(context.Background(), out)
			if len(errs) == 0 || !strings.Contains(errors.Join(errs...).Error(), c.want) {
				t.Fatalf("verify after damage: %v, want %q", errs, c.want)
			}
		})
	}
	out := t.TempDir()
	if err := run(t, l, out, 0, 2, 1, false); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(out, materialize.EpochDir(1), materialize.ManifestName))
	if checked, incomplete, errs := materialize.Verify(context.Background(), out); len(errs) > 0 || len(checked) != 1 || len(incomplete) != 1 {
		t.Fatalf("an incomplete epoch: checked %v, incomplete %v, errors %v", checked, incomplete, errs)
	}
}

// A format 2 folder (one configuration, epochs in OUT) is still verified,
// rerun and replayed as one unnamed view; its materialize.json becomes
// format 3 on a rerun, its epochs untouched.
func TestReadsFormat2(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 40, 3)
	l := newLoader(t, dir, settings{})
	out := t.TempDir()
	if err := run(t, l, out, 0, 2, 2, false); err != nil {
		t.Fatal(err)
	}
	cfg, err := materialize.ReadConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	id := cfg.Views[0].Folds[0].Config
	v2 := &materialize.Config{Format: cfg.Format, FormatVersion: 2, ToolVersion: cfg.ToolVersion, World: cfg.World, Stream: &id}
	b, err := jsonseal.Seal(v2)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(`"views"`)) {
		t.Fatalf("not a format 2 document:\n%s", b)
	}
	if err := os.WriteFile(filepath.Join(out, materialize.ConfigName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := materialize.ReadConfig(out)
	if err != nil || len(got.Views) != 1 || got.Views[0].Name != "" || got.Views[0].Folds[0].Config != id {
		t.Fatalf("format 2 read as %+v, %v", got, err)
	}
	mustVerify(t, out, 2)
	before := fileBytes(t, out, 1, 1, 2)
	if err := run(t, l, out, 0, 3, 2, false); err != nil {
		t.Fatalf("a rerun on a format 2 folder of the same configuration: %v", err)
	}
	if !bytes.Equal(before, fileBytes(t, out, 1, 1, 2)) {
		t.Fatal("the rerun rewrote a complete epoch")
	}
	mustVerify(t, out, 3)
}

// Views and folds: every fold of every view in a folder of its own with
// its own identity; a rerun with another policy on one view is refused,
// naming the view, the fold and the setting.
func TestViewsAndFolds(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 40, 3)
	folds := t.TempDir()
	splits := make([]epoch.Split, 3)
	for i := range int64(40) {
		f := i % 3
		splits[f].Test = append(splits[f].Test, i)
		for g := range splits {
			if int64(g) != f {
				splits[g].Training = append(splits[g].Training, i)
			}
		}
	}
	if err := epoch.WriteFolds(folds, splits, false, func(p string, b []byte) error { return os.WriteFile(p, b, 0o644) }); err != nil {
		t.Fatal(err)
	}
	build := func(train string) *app.Built {
		b, err := app.BuildViews(context.Background(), app.LoaderOptions{Shards: dir, Workers: 2, BatchSize: 8, Remainder: "pad",
			Folds: folds, Views: []string{"train={fold}:training:" + train, "test={fold}:test"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	out := t.TempDir()
	b := build("nodesam")
	if err := materialize.Run(context.Background(), materialize.Options{Views: b.Views, Out: out, From: 0, To: 2, World: 1}); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, out, 2*3*2)
	for _, rel := range []string{"view-train/fold-00", "view-train/fold-02", "view-test/fold-01"} {
		if _, err := os.Stat(filepath.Join(out, rel, materialize.EpochDir(1), materialize.ManifestName)); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
	}
	cfg, err := materialize.ReadConfig(out)
	if err != nil || len(cfg.Views) != 2 || len(cfg.Views[0].Folds) != 3 || cfg.Views[0].Folds[1].Config != b.Views.View("train").Folds[1].Identity() {
		t.Fatalf("config %+v, %v", cfg, err)
	}
	err = materialize.Run(context.Background(), materialize.Options{Views: build("dropedge").Views, Out: out, From: 0, To: 2, World: 1})
	if err == nil || !strings.Contains(err.Error(), "view train fold 0: schedule 0..|nodesam:1 vs 0..|dropedge:1") {
		t.Fatalf("a rerun with another policy: %v", err)
	}
}

// A run stopped between two ranks of an epoch (SIGTERM's context,
// cancelled right after rank 0's file is written: the losing order that
// TestMaterializeSIGTERM met under load) leaves no stream file in an
// epoch without a manifest; a rerun completes it.
func TestStoppedBetweenRanks(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 40, 3)
	out := t.TempDir()
	l := newLoader(t, dir, settings{})
	ctx, cancel := context.WithCancel(context.Background())
	defer materialize.SetAfterRank(func(rank int) {
		if rank == 0 {
			cancel()
		}
	})()
	err := materialize.Run(ctx, materialize.Options{Loader: l, Out: out, From: 0, To: 2, World: 2})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped run: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(out, materialize.EpochDir(0)))
	for _, e := range ents {
		t.Fatalf("the stopped epoch holds %s", e.Name())
	}
	materialize.SetAfterRank(func(int) {})
	if err := run(t, l, out, 0, 2, 2, false); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, out, 2)
}

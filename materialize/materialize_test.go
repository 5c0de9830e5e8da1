package materialize_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/internal/fixture"
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

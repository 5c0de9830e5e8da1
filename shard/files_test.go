package shard_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/shard"
)

// A split written beside the shards is listed in the sealed manifest with
// its SHA-256, stored under the folder's generation when it has one, and
// verify refuses a split that is not the folder's (another's bytes, a
// missing file) naming it; a manifest whose list is malformed is refused
// naming the field.
func TestFilesBesideShards(t *testing.T) {
	ctx := context.Background()
	for _, gen := range []string{"", "0123456789abcdef"} {
		t.Run(fmt.Sprintf("generation=%q", gen), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "s")
			if _, err := convert.Run(ctx, convert.Options{Input: testutil.Testdata(t, "ogb", "TINYMOL"), Out: out, Generation: gen}); err != nil {
				t.Fatal(err)
			}
			man, err := shard.ReadManifest(out)
			if err != nil {
				t.Fatal(err)
			}
			f := man.File("split-s.json")
			stored := man.StoredName("split-s.json")
			if f == nil || len(man.Files) != 1 || (gen == "") != (stored == "split-s.json") || !strings.Contains(stored, gen) {
				t.Fatalf("files %+v, stored as %q", man.Files, stored)
			}
			if _, errs := shard.Verify(ctx, out); len(errs) > 0 {
				t.Fatal(errs)
			}
			path := filepath.Join(out, stored)
			good, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			other := []byte(strings.Replace(string(good), "[", "[ ", 1))
			for _, c := range []struct {
				name  string
				write func()
				want  string
			}{
				{"another folder's", func() { os.WriteFile(path, other, 0o644) }, "sha256"},
				{"missing", func() { os.Remove(path) }, "missing"},
			} {
				c.write()
				_, errs := shard.Verify(ctx, out)
				if len(errs) != 1 || !errors.Is(errs[0], shard.ErrCorrupt) || !strings.Contains(errs[0].Error(), stored) || !strings.Contains(errs[0].Error(), c.want) {
					t.Errorf("%s split: verify says %v, want one error naming %s and %q", c.name, errs, stored, c.want)
				}
				if err := os.WriteFile(path, good, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range []struct {
				name string
				edit func(*shard.Manifest)
			}{
				{"a path", func(m *shard.Manifest) { m.Files[0].Name = "../split-s.json" }},
				{"a shard's name", func(m *shard.Manifest) { m.Files[0].Name = "shard-00009.arrow" }},
				{"twice", func(m *shard.Manifest) { m.Files = append(m.Files, m.Files[0]) }},
				{"a short digest", func(m *shard.Manifest) { m.Files[0].SHA256 = "abc" }},
			} {
				dir := t.TempDir()
				for _, name := range []string{shard.ManifestName, man.ShardFile(0), stored} {
					b, err := os.ReadFile(filepath.Join(out, name))
					if err != nil {
						t.Fatal(err)
					}
					os.WriteFile(filepath.Join(dir, name), b, 0o644)
				}
				fixture.RewriteManifest(t, dir, c.edit)
				if _, err := shard.ReadManifest(dir); !errors.Is(err, shard.ErrCorrupt) || !strings.Contains(err.Error(), "files") {
					t.Errorf("files entry %s: %v, want a corrupt manifest naming files", c.name, err)
				}
			}
		})
	}
}

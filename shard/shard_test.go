package shard_test

import (
	"context"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/shard"
)

// golden copies the byte-exact tiny shard folder into a temp folder.
func golden(t testing.TB) string {
	dir := filepath.Join(t.TempDir(), "tiny.shards")
	if err := os.CopyFS(dir, os.DirFS(testutil.Testdata(t, "golden", "tiny.shards"))); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestOpenGolden(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	r, err := shard.Open(context.Background(), golden(t), shard.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.NumGraphs() != 3 {
		t.Fatalf("%d graphs", r.NumGraphs())
	}
	g, err := r.Graph(0)
	if err != nil || g.NumEdges() != 3 || g.NumNodes != 3 {
		t.Fatalf("graph 0: %+v, %v", g, err)
	}
}

// Each corruption is caught by Open and by Verify, as ErrCorrupt (or
// ErrVersion) naming the shard or manifest and the field.
func TestCorruption(t *testing.T) {
	const shardFile = "shard-00000.arrow"
	cases := []struct {
		name    string
		mutate  func(t *testing.T, dir string)
		want    string
		version bool
	}{
		{"flipped byte", func(t *testing.T, dir string) {
			p := filepath.Join(dir, shardFile)
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0x10
			os.WriteFile(p, b, 0o644)
		}, "shard-00000.arrow: checksum", false},
		{"truncated", func(t *testing.T, dir string) {
			p := filepath.Join(dir, shardFile)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-100], 0o644)
		}, "shard-00000.arrow: size", false},
		{"missing shard", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, shardFile))
		}, "no such file", false},
		{"newer version", func(t *testing.T, dir string) {
			editManifest(t, dir, `"format_version": 2`, `"format_version": 5`)
		}, "manifest is version 5", true},
		{"newer version with new keys", func(t *testing.T, dir string) {
			editManifest(t, dir, `"format_version": 2,`, `"format_version": 9, "future_key": true,`)
		}, "manifest is version 9", true},
		// Edits that keep the manifest consistent with itself and with the
		// shards are caught by its seal (they passed verify before it).
		{"label map reversed", func(t *testing.T, dir string) {
			editManifest(t, dir, `"label_map": [
    "-1",
    "1"
  ]`, `"label_map": [
    "1",
    "-1"
  ]`)
		}, "checksum mismatch", false},
		{"dataset renamed", func(t *testing.T, dir string) {
			editManifest(t, dir, `"dataset": "TINY"`, `"dataset": "MUTAG"`)
		}, "checksum mismatch", false},
		{"edge label dim", func(t *testing.T, dir string) {
			editManifest(t, dir, `"edge_label_dim": 3`, `"edge_label_dim": 9`)
		}, "checksum mismatch", false},
		{"seal altered", func(t *testing.T, dir string) {
			editManifestRegexp(t, dir, `"checksum": "sha256:`, `"checksum": "sha256:`)
		}, "checksum mismatch", false},
		{"counts disagree", func(t *testing.T, dir string) {
			editManifest(t, dir, `"graphs": 3`, `"graphs": 4`)
		}, "manifest.json: stats", false},
		{"not json", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, shard.ManifestName), []byte("{"), 0o644)
		}, "manifest.json: invalid JSON", false},
		{"wrong checksum in manifest", func(t *testing.T, dir string) {
			editManifestRegexp(t, dir, `"crc32c": "`, `"crc32c": "0`)
		}, "checksum", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := golden(t)
			c.mutate(t, dir)
			_, err := shard.Open(context.Background(), dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: %v, want %q", err, c.want)
			}
			if c.version != errors.Is(err, shard.ErrVersion) {
				t.Errorf("errors.Is(ErrVersion) = %v for %v", !c.version, err)
			}
			if !c.version && !errors.Is(err, shard.ErrCorrupt) && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%v is not ErrCorrupt", err)
			}
			_, errs := shard.Verify(context.Background(), dir)
			if len(errs) == 0 || !strings.Contains(errs[0].Error(), c.want) {
				t.Errorf("Verify: %v, want %q", errs, c.want)
			}
		})
	}
}

func editManifest(t *testing.T, dir, old, new string) {
	t.Helper()
	p := filepath.Join(dir, shard.ManifestName)
	b, _ := os.ReadFile(p)
	if !strings.Contains(string(b), old) {
		t.Fatalf("manifest lacks %q", old)
	}
	os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644)
}

func editManifestRegexp(t *testing.T, dir, old, new string) {
	t.Helper()
	p := filepath.Join(dir, shard.ManifestName)
	b, _ := os.ReadFile(p)
	s := string(b)
	i := strings.Index(s, old)
	if i < 0 {
		t.Fatalf("manifest lacks %q", old)
	}
	// Replace the 8-digit checksum with another 8-digit value.
	j := i + len(old)
	s = s[:j] + "00000000" + s[j+8:]
	os.WriteFile(p, []byte(s), 0o644)
}

// FuzzParseManifest: never panics; what parses re-encodes and parses again.
func FuzzParseManifest(f *testing.F) {
	b, err := os.ReadFile(testutil.Testdata(f, "golden", "tiny.shards", shard.ManifestName))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"format":"augloader-shards","format_version":2}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := shard.ParseManifest(data)
		if err != nil {
			return
		}
		again, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := shard.ParseManifest(again); err != nil {
			t.Fatalf("re-encoded manifest does not parse: %v", err)
		}
	})
}

// FuzzShardReader mutates the shard bytes and fixes up the manifest's size
// and checksum, so the Arrow decoder and the structure checks see the
// mutation: Open must return an error or a reader whose every graph is in
// range, never panic. A cache-limited reader (pages read by the footer's
// offsets, behind the schema message that opens the file, which the eager
// reader never decodes) must do the same, and serve every graph the eager
// one serves, equal, or name a corruption.
func FuzzShardReader(f *testing.F) {
	base := testutil.Testdata(f, "golden", "tiny.shards")
	orig, err := os.ReadFile(filepath.Join(base, "shard-00000.arrow"))
	if err != nil {
		f.Fatal(err)
	}
	man, err := shard.ReadManifest(base)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint32(0), byte(0), uint16(0))
	f.Add(uint32(600), byte(0xff), uint16(0))
	f.Add(uint32(1200), byte(1), uint16(10))
	f.Fuzz(func(t *testing.T, at uint32, x byte, cut uint16) {
		data := append([]byte(nil), orig...)
		data[int(at)%len(data)] ^= x
		data = data[:len(data)-int(cut)%len(data)]
		dir := t.TempDir()
		m := *man
		m.Shards = append([]shard.ShardInfo(nil), man.Shards...)
		m.Shards[0].Bytes = int64(len(data))
		m.Shards[0].CRC32C = crc(data)
		enc, _ := m.Encode()
		os.WriteFile(filepath.Join(dir, shard.ManifestName), enc, 0o644)
		os.WriteFile(filepath.Join(dir, "shard-00000.arrow"), data, 0o644)
		lazy, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(1<<20))
		if err != nil {
			t.Fatal(err) // only the manifest is read
		}
		defer lazy.Close()
		var paged []shard.Graph
		var pageErr error
		for id := range int64(lazy.NumGraphs()) {
			g, rel, err := lazy.Pin(context.Background(), id)
			if err != nil {
				paged, pageErr = nil, err
				break
			}
			inRange(t, g)
			paged = append(paged, g) // the limit holds the tiny shard: g stays valid
			rel()
		}
		r, err := shard.Open(context.Background(), dir)
		if err != nil {
			return
		}
		defer r.Close()
		for id := range int64(r.NumGraphs()) {
			g, err := r.Graph(id)
			if err != nil {
				t.Fatal(err)
			}
			inRange(t, g)
			if paged == nil {
				if !errors.Is(pageErr, shard.ErrCorrupt) {
					t.Fatalf("graph %d: the eager reader serves it, pages refuse the shard: %v", id, pageErr)
				}
				continue
			}
			if !reflect.DeepEqual(g, paged[id]) {
				t.Fatalf("graph %d differs read by pages", id)
			}
		}
	})
}

func inRange(t *testing.T, g shard.Graph) {
	t.Helper()
	for _, v := range g.Edges {
		if v < 0 || v >= g.NumNodes {
			t.Fatalf("graph %d: node %d out of range", g.ID, v)
		}
	}
}

func crc(b []byte) string {
	const hex = "0123456789abcdef"
	v := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
	out := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		out[i] = hex[v&15]
		v >>= 4
	}
	return string(out)
}

// A path given as a shard folder that is not one says what it is and what
// to run: a typo (no such folder), a dataset never converted, a file.
func TestNotAShardFolder(t *testing.T) {
	tmp := t.TempDir()
	ds := filepath.Join(tmp, "collab-tu")
	os.MkdirAll(ds, 0o755)
	os.WriteFile(filepath.Join(ds, "COLLAB_A.txt"), []byte("1, 2\n"), 0o644)
	file := filepath.Join(tmp, "MUTAG.zip")
	os.WriteFile(file, []byte("PK"), 0o644)
	for _, c := range []struct{ dir, want string }{
		{filepath.Join(tmp, "colab.shards"), "colab.shards: no such folder (a shard folder is what shardconv convert -i DATASET -o"},
		{ds, "collab-tu holds a dataset, not shards (no manifest.json): convert it first: shardconv convert -i " + ds + " -o " + ds + ".shards"},
		{file, "MUTAG.zip is a file, not a shard folder: convert it first (shardconv convert -i " + file},
	} {
		_, err := shard.Open(context.Background(), c.dir)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.dir, err, c.want)
		}
	}
}

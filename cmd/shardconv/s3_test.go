package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/s3test"
	"github.com/augloader/augloader/objstore"
	"github.com/augloader/augloader/shard"
)

// shardconv verify and stats read s3://: verify passes on a sound folder
// and names the shard whose object was replaced; stats prints the local
// folder's figures; convert -o s3:// is refused, saying how to upload.
func TestVerifyStatsS3(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 200, 6, 256<<10)
	srv := s3test.Shared(t)
	loc := srv.Upload(t, "verify", "set", dir)
	out, errOut, code := run(t, "verify", loc)
	if code != 0 || !strings.Contains(out, "ok (") {
		t.Fatalf("verify %s: exit %d\n%s%s", loc, code, out, errOut)
	}
	want, _, _ := run(t, "stats", "--json", dir)
	if got, errOut, code := run(t, "stats", "--json", loc); code != 0 || got != want {
		t.Fatalf("stats %s: exit %d, %q, want %q\n%s", loc, code, got, want, errOut)
	}
	// A shard replaced by other bytes: verify names it.
	st, err := objstore.NewS3(t.Context(), "verify", "set", objstore.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	name := "shard-00000.arrow"
	srv.PutDamaged(t, st, dir, name, 0.5, 0x40)
	if _, errOut, code := run(t, "verify", loc); code == 0 || !strings.Contains(errOut, name) {
		t.Fatalf("verify of a damaged %s: exit %d\n%s", name, code, errOut)
	}
}

// shardconv convert -o s3:// uploads the folder it converts, the manifest
// last: the same manifest and shards as converted locally, verify passes
// on it; a second convert to the same place is refused without --force
// and replaces the folder with it.
func TestConvertToS3(t *testing.T) {
	srv := s3test.Shared(t)
	tu := filepath.Join(t.TempDir(), "tu")
	if out, errOut, code := run(t, "synth", "--like", "COLLAB", "--graphs", "150", "--seed", "2", "--out", tu); code != 0 {
		t.Fatalf("synth: %s%s", out, errOut)
	}
	local := filepath.Join(t.TempDir(), "local")
	if _, errOut, code := run(t, "convert", "-q", "-i", tu, "-o", local, "--shard-size", "512KiB"); code != 0 {
		t.Fatal(errOut)
	}
	srv.Upload(t, "convert", "seed", local) // makes the bucket
	loc := "s3://convert/collab"
	_, errOut, code := run(t, "convert", "-i", tu, "-o", loc, "--shard-size", "512KiB")
	if code != 0 || !strings.Contains(errOut, "uploaded manifest.json") {
		t.Fatalf("convert -o %s: exit %d\n%s", loc, code, errOut)
	}
	// What a person reads: the output is the store's location, not the
	// temporary folder it was converted in; sizes in the units flags take.
	if !strings.Contains(errOut, "shard(s) for "+loc+" (uploading)") || strings.Contains(errOut, "shardconv-upload-") ||
		!regexp.MustCompile(`uploaded shard-\S+ \(\d+\.\dKiB\) to `+regexp.QuoteMeta(loc)).MatchString(errOut) {
		t.Fatalf("convert -o %s names a temporary folder or prints raw byte counts:\n%s", loc, errOut)
	}
	st, err := objstore.NewS3(t.Context(), "convert", "collab", objstore.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(local)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		want, err := os.ReadFile(filepath.Join(local, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		f, err := st.Open(t.Context(), e.Name())
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, f.Size())
		if _, err := f.ReadAt(context.Background(), got, 0); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: uploaded bytes differ from the local conversion's (%v)", e.Name(), err)
		}
	}
	if out, errOut, code := run(t, "verify", loc); code != 0 {
		t.Fatalf("verify %s: %s%s", loc, out, errOut)
	}
	if _, errOut, code := run(t, "convert", "-q", "-i", tu, "-o", loc); code == 0 || !strings.Contains(errOut, "--force") {
		t.Fatalf("a second convert to %s: exit %d\n%s", loc, code, errOut)
	}
	// --force twice: each replacement has a generation of its own, and
	// the folder it replaced is gone once it is in place.
	var gens []string
	for range 2 {
		if _, errOut, code := run(t, "convert", "-q", "--force", "-i", tu, "-o", loc); code != 0 {
			t.Fatalf("convert --force to %s: exit %d\n%s", loc, code, errOut)
		}
		if out, errOut, code := run(t, "verify", loc); code != 0 {
			t.Fatalf("verify %s after --force: %s%s", loc, out, errOut)
		}
		m, err := shard.ReadManifestStore(t.Context(), st)
		if err != nil {
			t.Fatal(err)
		}
		gens = append(gens, m.Generation)
	}
	if gens[0] == "" || gens[0] == gens[1] {
		t.Fatalf("generations of two replacements: %q", gens)
	}
	for _, name := range []string{"shard-00000.arrow", "shard-00000." + gens[0] + ".arrow", "graph-sizes." + gens[0] + ".bin"} {
		if _, err := st.Open(t.Context(), name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after its folder was replaced: want it gone, got %v", name, err)
		}
	}
	if _, errOut, code := run(t, "convert", "-i", "s3://convert/collab", "-o", local+"2"); code == 0 || !strings.Contains(errOut, "a URL") {
		t.Fatalf("convert -i s3://: exit %d\n%s", code, errOut)
	}
}

// shardconv prune deletes the shards, graph-size indexes and splits a
// stopped replacement left (another generation than the manifest's), only those
// old enough unless --older-than says otherwise, nothing with --dry-run,
// and never the folder's own files, a split file or a stranger's; the
// folder still verifies.
func TestPrune(t *testing.T) {
	srv := s3test.Shared(t)
	const gen = "0123456789abcdef"
	dir := fixture.SynthShardsSized(t, "COLLAB", 150, 3, 256<<10)
	loc := srv.Upload(t, "prune", "set", dir)
	st, err := objstore.NewS3(t.Context(), "prune", "set", objstore.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	left := []string{"shard-00000." + gen + ".arrow", "graph-sizes." + gen + ".bin", "split-scaffold." + gen + ".json"}
	strangers := []string{"split-scaffold.json", "notes.txt", "shard-00000.NOTAGENERATION.arrow", "shard-00000." + gen + ".arrow.bak"}
	for _, name := range append(append([]string(nil), left...), strangers...) {
		srv.Put(t, st, name, filepath.Join(dir, "shard-00000.arrow"))
	}
	exists := func(name string) bool {
		_, err := st.Open(t.Context(), name)
		return err == nil
	}
	for _, tc := range []struct {
		args    []string
		want    string
		deletes bool
	}{
		{[]string{"--dry-run", "--older-than", "0s"}, "would delete shard-00000." + gen + ".arrow", false},
		{nil, "kept shard-00000." + gen + ".arrow", false},
		{[]string{"--older-than", "0s"}, "3 files of stopped replacements deleted", true},
	} {
		_, errOut, code := run(t, append([]string{"prune", loc}, tc.args...)...)
		if code != 0 || !strings.Contains(errOut, tc.want) {
			t.Fatalf("prune %s: exit %d, want %q\n%s", tc.args, code, tc.want, errOut)
		}
		for _, name := range left {
			if exists(name) == tc.deletes {
				t.Fatalf("prune %s: %s exists %v", tc.args, name, !tc.deletes)
			}
		}
	}
	for _, name := range strangers {
		if !exists(name) {
			t.Errorf("prune deleted %s, not a leftover", name)
		}
	}
	if out, errOut, code := run(t, "verify", loc); code != 0 {
		t.Fatalf("verify after prune: %s%s", out, errOut)
	}
	// A generation is judged by its newest file: an upload still running
	// (its last file young) keeps its first one, however old.
	const running = "fedcba9876543210"
	early, late := "shard-00000."+running+".arrow", "shard-00001."+running+".arrow"
	for _, name := range []string{early, late} {
		srv.Put(t, st, name, filepath.Join(dir, "shard-00000.arrow"))
	}
	srv.Age(t, "prune", "set/"+early, 3*time.Hour)
	if _, errOut, code := run(t, "prune", loc); code != 0 || !strings.Contains(errOut, "kept "+early) || !exists(early) || !exists(late) {
		t.Fatalf("prune while an upload runs: exit %d, its early file kept %v\n%s", code, exists(early), errOut)
	}
	srv.Age(t, "prune", "set/"+late, 2*time.Hour)
	if _, errOut, code := run(t, "prune", loc); code != 0 || exists(early) || exists(late) {
		t.Fatalf("prune of a generation whose newest file is old: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := run(t, "prune", dir); code == 0 || !strings.Contains(errOut, "local folder") {
		t.Fatalf("prune of a local folder: exit %d\n%s", code, errOut)
	}
}

// A first upload's files (named without a generation) that a replacement
// stopped after its swap left beside the new folder are leftovers: prune
// deletes them, and keeps those of a current folder without a generation.
func TestPrunePlainLeftovers(t *testing.T) {
	srv := s3test.Shared(t)
	first := fixture.SynthShardsSized(t, "COLLAB", 60, 3, 256<<10)
	next := fixture.SynthShardsWith(t, "COLLAB", 50, 4, convert.Options{ShardBytes: 256 << 10, Generation: "0123456789abcdef"})
	loc := srv.Upload(t, "prune", "plain", first)
	st, err := objstore.NewS3(t.Context(), "prune", "plain", objstore.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := run(t, "prune", loc, "--older-than", "0s"); code != 0 || !strings.Contains(errOut, "0 files of stopped replacements deleted") {
		t.Fatalf("prune of a first upload: exit %d, want nothing deleted\n%s", code, errOut)
	}
	// The replacement's swap, then a stop before its deletes: the first
	// upload's files stay (PutFolder deletes them after the swap; putting
	// the manifest alone is that stop).
	for _, name := range []string{"shard-00000.0123456789abcdef.arrow", "graph-sizes.0123456789abcdef.bin", "manifest.json"} {
		srv.Put(t, st, name, filepath.Join(next, name))
	}
	_, errOut, code := run(t, "prune", loc, "--older-than", "0s")
	if code != 0 || !strings.Contains(errOut, "deleted shard-00000.arrow (generation none") || !strings.Contains(errOut, "deleted graph-sizes.bin") {
		t.Fatalf("prune after a stopped replacement of a first upload: exit %d\n%s", code, errOut)
	}
	for _, name := range []string{"shard-00000.arrow", "graph-sizes.bin"} {
		if _, err := st.Open(t.Context(), name); err == nil {
			t.Errorf("%s is still there", name)
		}
	}
	if out, errOut, code := run(t, "verify", loc); code != 0 {
		t.Fatalf("verify after prune: %s%s", out, errOut)
	}
}

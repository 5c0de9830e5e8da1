package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/s3test"
	"github.com/augloader/augloader/objstore"
)

// shardconv verify and stats read s3://: verify passes on a sound folder
// and names the shard whose object was replaced; stats prints the local
// folder's figures; convert -o s3:// is refused, saying how to upload.
func TestVerifyStatsS3(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 200, 6, 256<<10)
	srv := s3test.Start(t)
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
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	bad := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	srv.Put(t, st, name, bad)
	if _, errOut, code := run(t, "verify", loc); code == 0 || !strings.Contains(errOut, name) {
		t.Fatalf("verify of a damaged %s: exit %d\n%s", name, code, errOut)
	}
	if _, errOut, code := run(t, "convert", "-i", dir, "-o", "s3://verify/other"); code == 0 || !strings.Contains(errOut, "aws s3 cp") {
		t.Fatalf("convert -o s3://: exit %d\n%s", code, errOut)
	}
}

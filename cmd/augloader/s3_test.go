package main

import (
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/s3test"
)

// What a user runs: `augloader serve --shards s3://BUCKET/PREFIX` (the
// AWS environment naming an S3-compatible endpoint) serves the batches
// the local folder does, digest for digest, in each shuffle, with and
// without --cache-limit, resumed midway; /metrics counts the GETs.
func TestServeFromS3(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 1000, 5, 1<<20)
	srv := s3test.Shared(t) // this process's AWS environment: the daemons inherit it
	loc := srv.Upload(t, "data", "collab", dir)
	for _, args := range [][]string{
		{"--shuffle", "global"},
		{"--shuffle", "window:4", "--cache-limit", "16MiB"},
		{"--shuffle", "global", "--cache-limit", "16MiB"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			common := append([]string{"--policy", "nodesam", "--seed", "7"}, args...)
			local := startDaemon(t, "", append([]string{"--shards", dir}, common...)...)
			remote := startDaemon(t, "", append([]string{"--shards", loc, "--metrics", "127.0.0.1:0"}, common...)...)
			for _, start := range []int{0, 3} {
				want, _, _, _ := served(t, local, 1, start)
				got, _, _, _ := served(t, remote, 1, start)
				if len(want) == 0 || !slices.Equal(got, want) {
					t.Fatalf("from batch %d: %d batches from %s differ from the local folder's %d", start, len(got), loc, len(want))
				}
			}
			if body := scrape(t, remote); !regexp.MustCompile(`(?m)^augloader_objstore_gets_total [1-9]`).MatchString(body) {
				t.Fatalf("/metrics counts no GET:\n%s", body)
			}
		})
	}
}

// scrape reads a daemon's /metrics.
func scrape(t *testing.T, d *daemon) string {
	t.Helper()
	m, ok := d.ready["metrics"].(string)
	if !ok {
		t.Fatalf("no metrics address in the readiness line %v", d.ready)
	}
	resp, err := http.Get(m)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return string(body)
}

// `serve --shards s3://… --disk-cache DIR`: the daemon after a restart
// serves the same digests without a GET, every page from DIR; a second
// daemon on DIR while the first runs is refused, naming it.
func TestServeDiskCache(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 600, 5, 1<<20)
	srv := s3test.Shared(t)
	loc := srv.Upload(t, "data", "collab", dir)
	cache := filepath.Join(t.TempDir(), "pages")
	args := []string{"--shards", loc, "--metrics", "127.0.0.1:0", "--policy", "nodesam", "--seed", "7",
		"--shuffle", "window:4", "--cache-limit", "16MiB", "--disk-cache", cache, "--disk-cache-limit", "1GiB"}
	want, _, _, _ := served(t, startDaemon(t, "", "--shards", dir, "--policy", "nodesam", "--seed", "7", "--shuffle", "window:4"), 1, 0)
	for run := range 2 {
		d := startDaemon(t, "", args...)
		if run == 0 {
			_, stderr, code := runBin(t, append([]string{"serve", "--socket", filepath.Join(t.TempDir(), "s")}, args...)...)
			if code == 0 || !strings.Contains(stderr, cache) || !strings.Contains(stderr, "in use by another process") {
				t.Fatalf("a second daemon on one --disk-cache: exit %d\n%s", code, stderr)
			}
		}
		got, _, _, _ := served(t, d, 1, 0)
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Fatalf("run %d: %d batches differ from the local folder's %d", run, len(got), len(want))
		}
		body := scrape(t, d)
		gets := regexp.MustCompile(`(?m)^augloader_objstore_gets_total (\d+)`).FindStringSubmatch(body)
		hits := regexp.MustCompile(`(?m)^augloader_disk_cache_hits_total (\d+)`).FindStringSubmatch(body)
		if gets == nil || hits == nil {
			t.Fatalf("/metrics lacks the GETs or the disk cache's hits:\n%s", body)
		}
		t.Logf("run %d: %s GETs, %s disk cache hits", run, gets[1], hits[1])
		if run == 1 && (gets[1] != "0" || hits[1] == "0") {
			t.Fatalf("after a restart: %s GETs and %s hits, want every page from --disk-cache", gets[1], hits[1])
		}
		d.stop(t)
	}
}

package main

import (
	"io"
	"net/http"
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
	srv := s3test.Start(t) // this process's AWS environment: the daemons inherit it
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
			m, ok := remote.ready["metrics"].(string)
			if !ok {
				t.Fatalf("no metrics address in the readiness line %v", remote.ready)
			}
			resp, err := http.Get(m)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !regexp.MustCompile(`(?m)^augloader_objstore_gets_total [1-9]`).Match(body) {
				t.Fatalf("/metrics counts no GET:\n%s", body)
			}
		})
	}
}

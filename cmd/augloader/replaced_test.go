package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/s3test"
	"github.com/augloader/augloader/objstore"
	"github.com/augloader/augloader/wire"
)

// A daemon whose folder in object storage is replaced (convert --force)
// serves the version it opened: one that holds it serves the same bytes
// after the swap, and one that must read a page the replacement deleted
// fails naming the object; each says in its log that the folder was
// replaced and that a restart serves the new one. (On 3520536 the first
// kept serving with no word, and docs/deploy.md said such daemons fail.)
func TestServeReplacedFolder(t *testing.T) {
	old := fixture.SynthShardsSized(t, "COLLAB", 600, 5, 1<<20)
	next := fixture.SynthShardsWith(t, "COLLAB", 400, 6, convert.Options{ShardBytes: 1 << 20, Generation: "0123456789abcdef"})
	srv := s3test.Shared(t)
	loc := srv.Upload(t, "replaced", "set", old)
	const watch = "AUGLOADER_S3_WATCH=200ms"
	holds := startDaemon(t, watch, "--shards", loc, "--policy", "nodesam", "--seed", "7")                           // every shard read at start
	reads := startDaemon(t, watch, "--shards", loc, "--policy", "nodesam", "--seed", "7", "--cache-limit", "16MiB") // pages read when served
	before, _, _, _ := served(t, holds, 1, 0)

	st, err := objstore.NewS3(context.Background(), "replaced", "set", objstore.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutFolder(context.Background(), next, true, nil); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*daemon{holds, reads} {
		for deadline := time.Now().Add(20 * time.Second); !strings.Contains(d.logs.String(), "the shard folder was replaced"); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no log line within 20 s of the replacement:\n%s", d.logs.String())
			}
		}
	}
	after, _, _, _ := served(t, holds, 1, 0)
	if len(before) == 0 || !slices.Equal(after, before) {
		t.Fatalf("the daemon that holds the folder it opened served %d batches after the swap, %d before, not the same", len(after), len(before))
	}
	_, err = client.Fetch(context.Background(), reads.sock, wire.Request{Epoch: 1, World: 1}, client.Options{Digests: true}, nil)
	if err == nil || !strings.Contains(err.Error(), "shard-0000") {
		t.Fatalf("the daemon that must read deleted objects: want an error naming one, got %v", err)
	}
	holds.stop(t)
	reads.stop(t)
}

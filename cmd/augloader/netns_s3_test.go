package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/s3test"
)

// Two daemons on two hosts read one bucket on a third (the client's host
// doubles as the store): the epoch fetched through both, under a cache
// limit and a windowed shuffle, equals batch for batch the one a daemon
// serves from the local folder.
func TestMultiHostS3(t *testing.T) {
	h := makeHosts(t, 2)
	// The store's address, 10.231.0.1, on the client host, reached from
	// each daemon host through its link.
	for _, args := range [][]string{{"-n", h.ns(0), "addr", "add", "10.231.0.1/32", "dev", "lo"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	for i := 1; i <= 2; i++ {
		args := []string{"-n", h.ns(i), "route", "add", "10.231.0.1/32", "via", fmt.Sprintf("10.231.%d.1", i)}
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	dir := fixture.SynthShardsSized(t, "COLLAB", 1000, 9, 1<<20)
	srv := s3test.InNamespace(t, h.ns(0), 18555, map[string]string{"bucket/collab": dir})
	srv.Env(t, "http://10.231.0.1:18555") // the daemons inherit it
	token := filepath.Join(t.TempDir(), "token")
	os.WriteFile(token, []byte("multi-host-s3-test-token-0123456789\n"), 0o600)
	common := []string{"--policy", "nodesam", "--seed", "4", "--workers", "1", "--batch-size", "16",
		"--shuffle", "window:4", "--cache-limit", "16MiB"}

	local := h.serve(t, 1, token, append([]string{"--shards", dir}, common...)...)
	want, e, err := h.fetch(t, token, []string{h.addr(1)})
	if err != nil {
		t.Fatalf("the local folder: %v\n%s", err, e)
	}
	local.cmd.Process.Kill()
	local.cmd.Wait()

	for i := 1; i <= 2; i++ {
		h.serve(t, i, token, append([]string{"--shards", "s3://bucket/collab"}, common...)...)
	}
	got, e, err := h.fetch(t, token, []string{h.addr(1), h.addr(2)})
	if err != nil {
		t.Fatalf("two daemons on s3://bucket/collab: %v\n%s", err, e)
	}
	sameDigests(t, "two hosts reading one bucket", got, want)
	t.Logf("%d batches through two hosts from one bucket: the local folder's digests", got.Batches)
}

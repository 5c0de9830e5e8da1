package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/wire"
)

// --procs sets the cores the daemon's Go code runs on once it serves
// (GOMAXPROCS), shown on /metrics and in the log; without it the
// runtime's choice stands, $GOMAXPROCS included. It changes speed, never
// bytes: an epoch over the socket and over shared memory is the same
// stream at 1 core as at the runtime's 3. Out of range is refused by
// name before anything loads.
func TestServeProcs(t *testing.T) {
	shards := fixture.SynthShards(t, "COLLAB", 300, 1)
	type served struct {
		name, shell string
		args        []string
		want        string
	}
	var digests [][32]byte
	for _, c := range []served{
		{"flag", "", []string{"--procs", "1"}, "augloader_server_procs 1\n"},
		{"env", "GOMAXPROCS=3", nil, "augloader_server_procs 3\n"},
		{"flag over env", "GOMAXPROCS=3", []string{"--procs", "2"}, "augloader_server_procs 2\n"},
	} {
		args := append([]string{"--shards", shards, "--metrics", "127.0.0.1:0", "--workers", "3", "--batch-size", "16"}, c.args...)
		d := startDaemon(t, c.shell, args...)
		if code, body := get(d.ready["metrics"].(string)); code != 200 || !strings.Contains(body, c.want) {
			t.Fatalf("%s: /metrics %d, want %q:\n%s", c.name, code, c.want, body)
		}
		if logged := strings.Contains(d.logs.String(), "procs="); logged != (len(c.args) > 0) {
			t.Errorf("%s: procs logged %v, want %v:\n%s", c.name, logged, len(c.args) > 0, d.logs.String())
		}
		for _, ring := range []int{0, 8 << 20} {
			res, err := client.Fetch(context.Background(), d.sock, wire.Request{Epoch: 2, World: 1},
				client.Options{Digests: true, ShmRing: ring}, nil)
			if err != nil {
				t.Fatalf("%s, ring %d: %v\n%s", c.name, ring, err, d.logs.String())
			}
			digests = append(digests, res.Digest)
		}
	}
	for i, dg := range digests {
		if dg != digests[0] {
			t.Errorf("stream %d differs from stream 0 (procs and transport must not change bytes)", i)
		}
	}
	for _, bad := range []string{"-1", "1025"} {
		out, err := exec.Command(bin, "serve", "--socket", t.TempDir()+"/aug.sock", "--shards", shards, "--procs", bad).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--procs "+bad+": want 0..1024") {
			t.Errorf("--procs %s: %v\n%s", bad, err, out)
		}
	}
}

package main

import (
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/augloader/augloader/internal/testkit/fixture"
)

// get answers an HTTP GET: the status and body, or 0 and the error.
func get(url string) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	r, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(b)
}

// The probes Kubernetes and launchers ask, on the --metrics listener
// (issue #56; 3520536 had only the readiness line on stdout): /livez 200
// while the process answers; /readyz 200 once it serves, and 503
// "draining" after SIGTERM while a running stream finishes, the listener
// still up until the drain is over.
func TestServeProbes(t *testing.T) {
	shards := fixture.SynthShards(t, "COLLAB", 600, 1)
	d := startDaemon(t, "", "--shards", shards, "--metrics", "127.0.0.1:0", "--drain", "20s", "--batch-size", "64")
	base := strings.TrimSuffix(d.ready["metrics"].(string), "/metrics")
	if code, body := get(base + "/livez"); code != 200 || body != "ok\n" {
		t.Fatalf("/livez: %d %q", code, body)
	}
	if code, body := get(base + "/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz while serving: %d %q", code, body)
	}
	// A stream the client does not read: the daemon blocks sending it, so
	// the drain waits for it.
	conn, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := []byte(`{"epoch": 0, "rank": 0, "world": 1}`)
	head := append([]byte("AUGQ\x01\x00\x00\x00"), binary.LittleEndian.AppendUint32(nil, uint32(len(body)))...)
	if _, err := conn.Write(append(head, body...)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the stream fills the socket's buffers
	d.cmd.Process.Signal(syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := get(base + "/readyz")
		if code == http.StatusServiceUnavailable && body == "not ready: draining\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after SIGTERM with a stream running: %d %q, want 503 draining", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _ := get(base + "/livez"); code != 200 {
		t.Fatalf("/livez while draining: %d", code)
	}
	conn.Close() // the stream ends; the daemon exits
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, d.logs)
	}
	if code, _ := get(base + "/readyz"); code != 0 {
		t.Fatalf("/readyz answered %d after the daemon exited", code)
	}
}

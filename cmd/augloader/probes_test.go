package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/testutil"
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

// While its shards load the daemon is alive and not ready: /livez 200,
// /readyz 503 "starting", its counters served. A store that accepts
// connections and never answers holds the load. On 3520536 (and until
// this test) the metrics listener opened only after the load, so a
// kubelet's liveness probe failed all the while a set came from object
// storage, and restarted the daemon. --metrics-allow-remote binds a
// non-loopback address (the pod's own, which a kubelet probes); without
// it such an address is refused.
func TestServeProbesWhileStarting(t *testing.T) {
	stalled, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		for {
			c, err := stalled.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	defer func() {
		stalled.Close()
		<-accepting // held is the accepting goroutine's until it ends
		for _, c := range held {
			c.Close()
		}
	}()
	free, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	port := free.Addr().(*net.TCPAddr).Port
	free.Close()
	env := append(os.Environ(), "AWS_ENDPOINT_URL=http://"+stalled.Addr().String(), "AWS_ACCESS_KEY_ID=k",
		"AWS_SECRET_ACCESS_KEY=s", "AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true")
	serve := func(extra ...string) *exec.Cmd {
		args := append([]string{"serve", "--socket", filepath.Join(t.TempDir(), "aug.sock"), "--shards", "s3://stalled/set"}, extra...)
		cmd := testutil.DieWithTest(exec.Command(bin, args...))
		cmd.Env = env
		return cmd
	}
	if out, err := serve("--metrics", fmt.Sprintf("0.0.0.0:%d", port)).CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "not a loopback address") {
		t.Fatalf("--metrics 0.0.0.0 without --metrics-allow-remote: %v\n%s", err, out)
	}
	cmd := serve("--metrics", fmt.Sprintf("0.0.0.0:%d", port), "--metrics-allow-remote")
	var logs testutil.SyncBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code, _ := get(base + "/livez"); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/livez did not answer within 30 s of the start:\n%s", logs.String())
		}
	}
	if code, body := get(base + "/readyz"); code != http.StatusServiceUnavailable || body != "not ready: starting\n" {
		t.Fatalf("/readyz while the shards load: %d %q, want 503 starting", code, body)
	}
	if code, body := get(base + "/metrics"); code != 200 || !strings.Contains(body, "augloader_") {
		t.Fatalf("/metrics while the shards load: %d %q", code, body)
	}
	if cmd.ProcessState != nil {
		t.Fatalf("the daemon exited while loading:\n%s", logs.String())
	}
}

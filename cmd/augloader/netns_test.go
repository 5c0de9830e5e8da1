package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
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

// hosts is a set of test hosts: network namespaces made by the test, each
// daemon host linked to the client host by a veth pair on its own /24
// (10.231.N.0/24, addresses that exist only inside these namespaces).
type hosts struct {
	prefix string
	n      int
}

// makeHosts creates a client namespace and n daemon namespaces. Where
// namespaces cannot be made (not root, no ip command) the test is skipped
// with a message, even under CI=true: the machine does not allow them.
func makeHosts(t *testing.T, n int) *hosts {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("network namespaces: no ip command (iproute2) on this machine")
	}
	h := &hosts{prefix: fmt.Sprintf("aug%d", os.Getpid()%100000), n: n}
	if out, err := exec.Command("ip", "netns", "add", h.ns(0)).CombinedOutput(); err != nil {
		t.Skipf("network namespaces cannot be made here (%v: %s): the multi-host test needs root and iproute2", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(h.remove)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("-n", h.ns(0), "link", "set", "lo", "up")
	for i := 1; i <= n; i++ {
		run("netns", "add", h.ns(i))
		run("-n", h.ns(i), "link", "set", "lo", "up")
		c, d := fmt.Sprintf("%sc%d", h.prefix, i), fmt.Sprintf("%sd%d", h.prefix, i)
		run("link", "add", c, "netns", h.ns(0), "type", "veth", "peer", "name", d, "netns", h.ns(i))
		run("-n", h.ns(0), "addr", "add", fmt.Sprintf("10.231.%d.1/24", i), "dev", c)
		run("-n", h.ns(i), "addr", "add", fmt.Sprintf("10.231.%d.2/24", i), "dev", d)
		run("-n", h.ns(0), "link", "set", c, "up")
		run("-n", h.ns(i), "link", "set", d, "up")
	}
	return h
}

func (h *hosts) ns(i int) string {
	if i == 0 {
		return h.prefix + "-client"
	}
	return fmt.Sprintf("%s-d%d", h.prefix, i)
}

func (h *hosts) addr(i int) string { return fmt.Sprintf("grpc://10.231.%d.2:8815", i) }

func (h *hosts) remove() {
	for i := 0; i <= h.n; i++ {
		exec.Command("ip", "netns", "del", h.ns(i)).Run()
	}
}

// netnsDaemon is `augloader serve` on a daemon host, serving Flight on the
// host's address.
type netnsDaemon struct {
	cmd  *exec.Cmd
	logs *strings.Builder
}

func (h *hosts) serve(t *testing.T, i int, token string, args ...string) *netnsDaemon {
	t.Helper()
	var peers []string
	for k := 1; k <= h.n; k++ {
		peers = append(peers, h.addr(k))
	}
	cmd := testutil.DieWithTest(exec.Command("ip", append([]string{"netns", "exec", h.ns(i), bin, "serve", "--flight", h.addr(i),
		"--flight-allow-remote", "--flight-token-file", token, "--peers", strings.Join(peers, ",")}, args...)...))
	d := &netnsDaemon{cmd: cmd, logs: &strings.Builder{}}
	cmd.Stderr = d.logs
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ready <- sc.Scan() && strings.Contains(sc.Text(), `"ready":true`)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("daemon %d did not start:\n%s", i, d.logs)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("daemon %d not ready in 30 s:\n%s", i, d.logs)
	}
	return d
}

type fetched struct {
	Batches int      `json:"batches"`
	Graphs  int      `json:"graphs"`
	Digests []string `json:"batch_sha256"`
}

// fetch runs `augloader fetch` on the client host.
func (h *hosts) fetch(t *testing.T, token string, addrs []string, extra ...string) (*fetched, string, error) {
	t.Helper()
	args := []string{"netns", "exec", h.ns(0), bin, "fetch", "--json", "--batch-hashes", "--token-file", token, "--epoch", "3", "--batch-timeout", "5s"}
	for _, a := range addrs {
		args = append(args, "--addr", a)
	}
	cmd := exec.Command("ip", append(args, extra...)...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if err != nil {
		return nil, e.String(), err
	}
	var f fetched
	if err := json.Unmarshal([]byte(o.String()), &f); err != nil {
		t.Fatalf("fetch output %q: %v", o.String(), err)
	}
	return &f, e.String(), nil
}

func sameDigests(t *testing.T, what string, got, want *fetched) {
	t.Helper()
	if got.Batches != want.Batches || got.Graphs != want.Graphs || len(got.Digests) != len(want.Digests) {
		t.Fatalf("%s: %d batches, %d graphs, %d batch digests; one daemon sends %d, %d, %d", what, got.Batches, got.Graphs,
			len(got.Digests), want.Batches, want.Graphs, len(want.Digests))
	}
	for i := range want.Digests {
		if got.Digests[i] != want.Digests[i] {
			t.Fatalf("%s: batch %d differs from one daemon's", what, i)
		}
	}
}

// Three daemons on three hosts and a client on a fourth: a whole SubMix
// epoch read through all three equals, batch digest for batch digest, the
// epoch from one; so does the one a plain pyarrow.flight client reads by
// following GetFlightInfo's endpoints (no augloader code); a daemon killed
// at a random batch mid-epoch leaves the epoch whole and identical; a
// daemon started with another seed is refused.
func TestMultiHost(t *testing.T) {
	h := makeHosts(t, 3)
	dir := fixture.SynthShards(t, "COLLAB", 600, 7)
	token := filepath.Join(t.TempDir(), "token")
	os.WriteFile(token, []byte("multi-host-test-token-0123456789\n"), 0o600)
	args := []string{"--shards", dir, "--policy", "submix:p=0.4", "--seed", "1", "--workers", "1", "--batch-size", "16"}
	daemons := make([]*netnsDaemon, 4)
	for i := 1; i <= 3; i++ {
		daemons[i] = h.serve(t, i, token, args...)
	}
	all := []string{h.addr(1), h.addr(2), h.addr(3)}
	one, e, err := h.fetch(t, token, all[:1])
	if err != nil {
		t.Fatalf("one daemon: %v\n%s", err, e)
	}
	start := time.Now()
	three, e, err := h.fetch(t, token, all)
	took := time.Since(start) // the kill below lands inside a fetch this long
	if err != nil {
		t.Fatalf("three daemons: %v\n%s", err, e)
	}
	sameDigests(t, "three daemons", three, one)
	t.Logf("SubMix epoch of %d batches through three hosts: byte-identical to one", one.Batches)

	// A plain Flight client follows the endpoints of GetFlightInfo.
	py := filepath.Join(testutil.Root(t), ".venv", "bin", "python")
	if _, err := os.Stat(py); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing (make venv): the pyarrow.flight part needs it", py)
		}
		t.Logf("skipping the pyarrow.flight part: %s is missing (make venv)", py)
	} else {
		script := `
import json, sys, pyarrow as pa, pyarrow.flight as fl
token = open(sys.argv[1]).read().strip()
opts = fl.FlightCallOptions(headers=[(b"authorization", ("Bearer " + token).encode())])
req = json.dumps({"epoch": 3, "rank": 0, "world": 1}).encode()
c = fl.FlightClient(sys.argv[2])
info = c.get_flight_info(fl.FlightDescriptor.for_command(req), opts)
parts = []
for ep in info.endpoints:
    where = ep.locations[0] if ep.locations else sys.argv[2]
    parts.append(fl.FlightClient(where).do_get(ep.ticket, opts).read_all())
whole = pa.concat_tables(parts)
single = c.do_get(fl.Ticket(req), opts).read_all()
assert len(info.endpoints) == 3, len(info.endpoints)
assert whole.equals(single), "the endpoints' batches differ from one daemon's"
print(len(info.endpoints), whole.num_rows)
`
		out, err := exec.Command("ip", "netns", "exec", h.ns(0), py, "-c", script, token, "grpc+tcp://10.231.1.2:8815").CombinedOutput()
		if err != nil {
			t.Fatalf("pyarrow.flight following GetFlightInfo: %v\n%s", err, out)
		}
		t.Logf("pyarrow.flight followed %s", strings.TrimSpace(string(out)))
	}

	// SIGKILL of daemon 2 at a random point of the epoch: within the time
	// a whole fetch took just above, halved whenever the fetch won the
	// race (an idle machine fetches the epoch in a few tens of
	// milliseconds; a fixed sleep lost the race there every time).
	window := took
	for try := 0; ; try++ {
		cmd := exec.Command("ip", "netns", "exec", h.ns(0), bin, "fetch", "--json", "--batch-hashes", "--token-file", token, "--epoch", "3",
			"--batch-timeout", "5s", "--addr", all[0], "--addr", all[1], "--addr", all[2])
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(window/10 + time.Duration(rand.Int64N(int64(window/2)+1)))
		daemons[2].cmd.Process.Signal(syscall.SIGKILL)
		daemons[2].cmd.Wait()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("fetch with a killed daemon: %v\n%s", err, e.String())
		}
		var f fetched
		json.Unmarshal([]byte(o.String()), &f)
		sameDigests(t, "a daemon killed mid-epoch", &f, one)
		if strings.Contains(e.String(), "daemon failed") {
			t.Logf("daemon 2 killed mid-epoch: the epoch arrived whole and identical (%s)", firstLine(e.String(), "daemon failed"))
			break
		}
		if try == 7 {
			t.Fatalf("the fetch finished before daemon 2 was killed, eight times (last window %s)", window)
		}
		window /= 2
		daemons[2] = h.serve(t, 2, token, args...) // it finished first: try again
	}

	// A daemon with another seed is refused on first contact.
	daemons[2] = h.serve(t, 2, token, append(args[:len(args):len(args)], "--seed", "2")...)
	_, e, err = h.fetch(t, token, all)
	if err == nil || !strings.Contains(e, "refusing to mix") || !(strings.Contains(e, "seed 1 vs 2") || strings.Contains(e, "seed 2 vs 1")) {
		t.Fatalf("a daemon with another seed: %v\n%s", err, e)
	}
}

func firstLine(s, with string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, with) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

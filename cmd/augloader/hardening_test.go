package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/internal/cliutil"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/wire"
)

// daemon is an `augloader serve` process started through sh (so a test
// can lower its limits with ulimit) and ready once it printed its
// readiness line.
type daemon struct {
	cmd   *exec.Cmd
	ready map[string]any
	logs  *testutil.SyncBuffer
	sock  string
}

func startDaemon(t *testing.T, shell string, args ...string) *daemon {
	t.Helper()
	return startDaemonOf(t, bin, shell, args...)
}

// startDaemonOf is startDaemon of another build of the daemon (-race).
func startDaemonOf(t *testing.T, binary, shell string, args ...string) *daemon {
	t.Helper()
	d := &daemon{logs: &testutil.SyncBuffer{}, sock: filepath.Join(t.TempDir(), "aug.sock")}
	quoted := []string{binary, "serve", "--socket", d.sock}
	for _, a := range args {
		quoted = append(quoted, "'"+a+"'")
	}
	d.cmd = testutil.DieWithTest(exec.Command("sh", "-c", shell+" exec "+strings.Join(quoted, " ")))
	d.cmd.Stderr = d.logs
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.cmd.Process.Kill()
			d.cmd.Wait()
		}
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
	}()
	select {
	case l, ok := <-line:
		if !ok || json.Unmarshal([]byte(l), &d.ready) != nil || d.ready["ready"] != true {
			d.cmd.Wait()
			t.Fatalf("no readiness line (got %q, %v):\n%s", l, d.cmd.ProcessState, d.logs)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("serve did not get ready:\n%s", d.logs)
	}
	return d
}

// stop sends SIGTERM and returns how long the process took to exit.
func (d *daemon) stop(t *testing.T) time.Duration {
	t.Helper()
	t0 := time.Now()
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, d.logs)
	}
	if _, err := os.Lstat(d.sock); err == nil {
		t.Fatal("socket file left after shutdown")
	}
	return time.Since(t0)
}

// rssKiB is a process's resident set now (VmRSS).
func rssKiB(t *testing.T, pid int) int { return procStatusKiB(t, pid, "VmRSS:") }

// peakRSSKiB is a process's high-water resident set (VmHWM).
func peakRSSKiB(t *testing.T, pid int) int { return procStatusKiB(t, pid, "VmHWM:") }

// procStatusKiB reads one kB field of /proc/PID/status.
func procStatusKiB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field {
			v, _ := strconv.Atoi(f[1])
			return v
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// 200 connections that never send a request, to a daemon with 64 file
// descriptors, do not take it down: the excess waiting connections are
// evicted (refused as unavailable), accept backs off when descriptors run
// out, and a client that sends its request is served. (The audit's probe
// ended the daemon with "accept4: too many open files".)
func TestIdleConnectionsUnderLowFDLimit(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	d := startDaemon(t, "ulimit -n 64 &&", "--shards", dir, "--policy", "nodesam", "--workers", "2")
	var idle []net.Conn
	for range 200 {
		c, err := net.Dial("unix", d.sock)
		if err != nil {
			t.Fatalf("dial %d: %v", len(idle), err)
		}
		idle = append(idle, c)
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t0 := time.Now()
	res, err := client.Fetch(ctx, d.sock, wire.Request{Epoch: 0, World: 1}, client.Options{}, nil)
	if err != nil || res.Graphs != 60 {
		t.Fatalf("fetch beside 200 idle connections: %v (%+v)\n%s", err, res, d.logs)
	}
	t.Logf("an epoch fetched in %.2f s beside 200 idle connections", time.Since(t0).Seconds())
	refused := 0
	for _, c := range idle {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if status, body, err := wire.ReadFrame(c, wire.MagicResponse); err == nil && status == wire.StatusError && strings.Contains(string(body), wire.CodeUnavailable) {
			refused++
		}
	}
	t.Logf("%d of 200 idle connections refused as unavailable; the daemon served an epoch beside them", refused)
	if refused < 100 {
		t.Fatalf("only %d idle connections were refused", refused)
	}
	if took := d.stop(t); took > 2*time.Second {
		t.Fatalf("shutdown took %s with idle connections (they hold no stream)\n%s", took, d.logs)
	}
}

// 300 concurrent Flight streams whose client never reads: the stream cap
// (shared with the socket) refuses the excess as unavailable, and the
// daemon's memory stays bounded. (The probe had 300 accepted, 2.2 GiB.)
func TestFlightStreamCap(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 300, 1)
	d := startDaemon(t, "", "--shards", dir, "--policy", "nodesam", "--workers", "2", "--batch-size", "1",
		"--flight", "grpc://127.0.0.1:0", "--max-streams", "100", "--max-streams-per-client", "100")
	addr := strings.TrimPrefix(d.ready["flight"].(string), "grpc://")
	base := rssKiB(t, d.cmd.Process.Pid)
	var (
		mu       sync.Mutex
		accepted int
		refused  int
		other    []error
		streams  []flight.FlightService_DoGetClient
	)
	var conns []*grpc.ClientConn
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range 300 {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, cc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tkt, _ := json.Marshal(wire.Request{Epoch: uint64(i % 7), World: 1})
			s, err := flight.NewFlightServiceClient(cc).DoGet(ctx, &flight.Ticket{Ticket: tkt})
			if err == nil {
				_, err = s.Recv() // the schema message, then never read again
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted++
				streams = append(streams, s)
			case status.Code(err) == codes.Unavailable:
				refused++
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond) // let every accepted stream fill its window
	peak := rssKiB(t, d.cmd.Process.Pid)
	t.Logf("300 stalled Flight streams: %d accepted, %d refused as unavailable; RSS %d MiB before, %d MiB with them",
		accepted, refused, base>>10, peak>>10)
	if accepted != 100 || refused != 200 || len(other) > 0 {
		t.Fatalf("accepted %d, refused %d, other errors %v", accepted, refused, other)
	}
	if peak-base > 512<<10 {
		t.Fatalf("RSS grew by %d MiB with 100 stalled streams", (peak-base)>>10)
	}
	cancel()
	for _, cc := range conns {
		cc.Close()
	}
	d.stop(t)
}

// SIGTERM while a client has stopped reading mid-stream: the daemon cuts
// the stream after --drain and exits within drain + 1 s. (The probe saw it
// hang 20 s and more, the socket already gone.)
func TestSIGTERMWithStalledReader(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 300, 1)
	const drain = 2 * time.Second
	d := startDaemon(t, "", "--shards", dir, "--policy", "none", "--workers", "2", "--batch-size", "300", "--drain", drain.String())
	c, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := wire.WriteFrame(c, wire.MagicRequest, wire.StatusOK, wire.Request{Epoch: 0, World: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := wire.ReadFrame(c, wire.MagicResponse); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the batch fills the socket buffers; the client reads no more
	took := d.stop(t)
	t.Logf("exited %.2f s after SIGTERM with a stalled reader (drain %s)", took.Seconds(), drain)
	if took > drain+time.Second {
		t.Fatalf("exited %s after SIGTERM, want within drain + 1 s", took)
	}
	if !strings.Contains(d.logs.String(), "stream cut") {
		t.Errorf("the cut stream is not logged:\n%s", d.logs)
	}
}

func runBin(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// Every flag value out of range is an error naming the flag and its range,
// on serve and materialize alike (they used to fall back to the defaults:
// --batch-size -1 served batches of 32).
func TestFlagRanges(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 20, 1)
	common := [][]string{
		{"--batch-size", "0", "--batch-size 0: want 1..65536"},
		{"--batch-size", "-1", "--batch-size -1: want 1..65536"},
		{"--batch-size", "70000", "--batch-size 70000: want 1..65536"},
		{"--workers", "0", "--workers 0: want 1..1024"},
		{"--workers", "-3", "--workers -3: want 1..1024"},
		{"--node-budget", "-1", "--node-budget -1: want an integer ≥ 0"},
		{"--edge-budget", "-5", "--edge-budget -5: want an integer ≥ 0"},
		{"--remainder", "keep", `--remainder "keep": want one of pad, drop`},
		{"--split-set", "validation", `--split-set "validation": want one of training, valid, test`},
		{"--edge-fill", "x=1", `--edge-fill: loader: edge fill "x=1": the edges of`},
	}
	perCmd := map[string][][]string{
		"serve": {{"--max-streams", "0", "--max-streams 0: want 1..65536"}, {"--max-pending", "-1", "--max-pending -1"},
			{"--drain", "0s", "--drain 0s: want a positive duration"}, {"--max-streams-per-client", "0", "--max-streams-per-client 0"}},
		"materialize": {{"--world", "0", "--world 0: want 1..65536"}},
	}
	for _, cmd := range []string{"serve", "materialize"} {
		base := []string{cmd, "--shards", dir}
		if cmd == "serve" {
			base = append(base, "--socket", filepath.Join(t.TempDir(), "s.sock"))
		} else {
			base = append(base, "--out", filepath.Join(t.TempDir(), "epochs"))
		}
		for _, c := range append(common, perCmd[cmd]...) {
			_, stderr, code := runBin(t, append(append([]string{}, base...), c[0], c[1])...)
			if code == 0 || !strings.Contains(stderr, c[2]) {
				t.Errorf("%s %s %s: exit %d, stderr %q; want an error containing %q", cmd, c[0], c[1], code, stderr, c[2])
			}
		}
	}
}

// Flags are accepted after positional arguments on every command that
// takes them, and on the others anywhere.
func TestFlagsAfterPositionals(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 20, 1)
	out := filepath.Join(t.TempDir(), "epochs")
	if _, e, code := runBin(t, "materialize", "--shards", dir, "--out", out, "--epochs", "0:1"); code != 0 {
		t.Fatal(e)
	}
	os.MkdirAll(filepath.Join(out, "epoch-000007"), 0o755) // an incomplete epoch
	if _, _, code := runBin(t, "verify", out); code == 0 {
		t.Fatal("verify exits 0 with an incomplete epoch")
	}
	if so, e, code := runBin(t, "verify", out, "--allow-incomplete"); code != 0 || !strings.Contains(so, "1 incomplete") {
		t.Fatalf("verify OUT --allow-incomplete: exit %d\n%s%s", code, so, e)
	}
	if _, e, code := runBin(t, "split", "--out", filepath.Join(t.TempDir(), "folds"), "--shards", dir, "--folds", "4"); code != 0 {
		t.Fatalf("split with flags in any order: %s", e)
	}
}

// A Flight token file readable by other users, or a short token, is
// served but warned about.
func TestFlightTokenWarnings(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 20, 1)
	tf := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tf, []byte("short\n"), 0o644)
	d := startDaemon(t, "", "--shards", dir, "--flight", "grpc://127.0.0.1:0", "--flight-token-file", tf)
	d.stop(t)
	for _, want := range []string{"readable by other users", "shorter than 16 bytes"} {
		if !strings.Contains(d.logs.String(), want) {
			t.Errorf("no warning %q:\n%s", want, d.logs)
		}
	}
}

// Every flag of every command is moved ahead of a positional argument
// that precedes it, with its value (what lets `verify OUT --allow-incomplete`
// and friends parse).
func TestEveryFlagAfterPositionals(t *testing.T) {
	checkPermuteAll(t, newApp())
}

func checkPermuteAll(t *testing.T, app *cli.App) {
	t.Helper()
	for _, cmd := range app.Commands {
		for _, f := range cmd.Flags {
			name := f.Names()[0]
			args := []string{app.Name, cmd.Name, "POS", "--" + name}
			_, isBool := f.(*cli.BoolFlag)
			if !isBool {
				args = append(args, "VALUE")
			}
			got := cliutil.Permute(app, args)
			want := []string{app.Name, cmd.Name, "--" + name}
			if !isBool {
				want = append(want, "VALUE")
			}
			want = append(want, "POS")
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("%s %s: %v, want %v", cmd.Name, name, got, want)
			}
		}
	}
}

// serve --remove-on-exit removes its launcher's folder and nothing else
// (issue #45): a path through a symlink and "..", or a user's own folder
// named augloader-*, is refused before the daemon serves, and everything
// stays; a launcher's marked folder is removed at exit. b497eeb checked
// the cleaned name and removed the path as given: everything under the
// symlink target's parent went.
func TestRemoveOnExitOnlyTheLaunchersFolder(t *testing.T) {
	shards := fixture.SynthShards(t, "COLLAB", 20, 1)
	s := t.TempDir()
	for _, d := range []string{"userdata/inner", "augloader-run", "augloader-results"} {
		if err := os.MkdirAll(filepath.Join(s, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	precious := filepath.Join(s, "userdata", "precious")
	os.WriteFile(precious, []byte("x"), 0o644)
	os.WriteFile(filepath.Join(s, "augloader-results", "results.csv"), []byte("1\n"), 0o644)
	os.WriteFile(filepath.Join(s, "augloader-run", ".augloader-launcher"), []byte("test\n"), 0o644)
	if err := os.Symlink(filepath.Join(s, "userdata", "inner"), filepath.Join(s, "augloader-run", "link")); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{s + "/augloader-run/link/..", filepath.Join(s, "augloader-results")} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, bin, "serve", "--socket", filepath.Join(t.TempDir(), "aug.sock"), "--shards", shards,
			"--remove-on-exit", dir, "--exit-when-stdin-closes")
		cmd.Stdin = strings.NewReader("") // a daemon that started anyway stops at once (and removes)
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), "--remove-on-exit") {
			t.Errorf("--remove-on-exit %s: %v, %s; want a refusal", dir, err, out)
		}
	}
	for _, p := range []string{precious, filepath.Join(s, "augloader-results", "results.csv"), filepath.Join(s, "augloader-run")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s lost: %v", p, err)
		}
	}
	d := startDaemon(t, "", "--shards", shards, "--remove-on-exit", filepath.Join(s, "augloader-run"))
	d.stop(t)
	if _, err := os.Lstat(filepath.Join(s, "augloader-run")); !os.IsNotExist(err) {
		t.Fatalf("the launcher's folder is still there: %v", err)
	}
	if _, err := os.Stat(precious); err != nil {
		t.Fatalf("removed through the folder's symlink: %v", err)
	}
}

// A usage error leads with the error and the nearest name, in two lines,
// exit status 2 (it printed about 20 lines of help with the error first
// and scrolled away; an unknown flag, twice).
func TestUsageErrorsLead(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--shard", "x"}, "augloader serve: unknown flag --shard (did you mean --shards?)"},
		{[]string{"fetch", "--sokcet", "/tmp/x.sock"}, "augloader fetch: unknown flag --sokcet (did you mean --socket?)"},
		{[]string{"serv", "--shards", "x"}, `augloader: no command "serv" (did you mean "serve"?)`},
		{[]string{"serve", "--workers", "many"}, `augloader serve: invalid value "many" for flag --workers`},
	} {
		stdout, stderr, code := runBin(t, tc.args...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 2 || !strings.HasPrefix(lines[0], tc.want) || len(lines) != 2 || !strings.Contains(lines[1], "--help") || stdout != "" {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q\nwant exit 2, %q then where the help is", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

// A fetch with no daemon at its address says so and what to start (it
// printed the raw dial error).
func TestFetchNoDaemonSaysWhatToStart(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	for _, tc := range []struct{ addr, want string }{
		{filepath.Join(dir, "none.sock"), "no such socket (start one: augloader serve --shards DIR --socket " + filepath.Join(dir, "none.sock")},
		{stale, "nothing listens there"},
		{"grpc://127.0.0.1:1", "no daemon answers at grpc://127.0.0.1:1 (start one: augloader serve --shards DIR --flight grpc://127.0.0.1:1)"},
	} {
		_, stderr, code := runBin(t, "fetch", "--addr", tc.addr)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, %q; want it to say %q", tc.addr, code, stderr, tc.want)
		}
	}
}

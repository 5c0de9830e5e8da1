package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/wire"
)

// startWithPid starts process argv whose pid is pid, the kernel's next id
// set through /proc/sys/kernel/ns_last_pid (root only). ok is false when
// that cannot be done here, or another process took the id first.
func startWithPid(t *testing.T, pid int, argv ...string) (*exec.Cmd, bool) {
	t.Helper()
	if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
		return nil, false
	}
	cmd := testutil.DieWithTest(exec.Command(argv[0], argv[1:]...))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, cmd.Process.Pid == pid
}

// TestExitWithPidReused: --exit-with-pid is tied to the process, not to
// its id. The process ends and the kernel gives its id to another one
// (forced through ns_last_pid): the daemon stops all the same (on
// fa5e656 kill(pid, 0) answered for the stranger, and the daemon served
// on for as long as it lived).
func TestExitWithPidReused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: a process id is given again through /proc/sys/kernel/ns_last_pid")
	}
	shards := fixture.SynthShards(t, "COLLAB", 20, 1)
	for try := 0; ; try++ {
		owner := testutil.DieWithTest(exec.Command("sleep", "600"))
		if err := owner.Start(); err != nil {
			t.Fatal(err)
		}
		pid := owner.Process.Pid
		d := startDaemon(t, "", "--shards", shards, "--exit-with-pid", strconv.Itoa(pid))
		owner.Process.Kill()
		owner.Wait()
		if _, ok := startWithPid(t, pid, "sleep", "600"); !ok {
			d.cmd.Process.Kill()
			d.cmd.Wait()
			if try < 5 {
				continue
			}
			t.Skip("could not have a process id given again (ns_last_pid not writable, or other processes took it)")
		}
		exited := make(chan error, 1)
		go func() { exited <- d.cmd.Wait() }()
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("the daemon exited with %v:\n%s", err, d.logs)
			}
			if !strings.Contains(d.logs.String(), "the process it was tied to ended") {
				t.Fatalf("no word of why it stopped:\n%s", d.logs)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("the daemon serves on after its process %d ended and the id went to another:\n%s", pid, d.logs)
		}
		return
	}
}

// SIGTERM while Flight, socket and shared-memory clients stream under a
// cache limit, past the drain: the daemon stops its Flight server, which
// now waits for its handlers, before it closes the reader and the page
// cache (grpc-go's Stop does not wait by default: a pin in flight landed
// in the closed cache, and a shard file was read as it was closed, a race
// then a nil panic turned into a graph error). Every stream ends whole or
// with the daemon's stop, none with a graph error; the daemon exits 0.
// Before the first stop, whole epochs read over the socket and through
// shared memory give the same bytes.
//
// The daemon is built with -race and GORACE=halt_on_error=1: a race it
// meets ends it with status 66 and the report in its log. It is the one
// race-built daemon of the suite run end to end (make test runs this
// package without -race: only its harness would be instrumented).
func TestSIGTERMUnderFlightWithCacheLimit(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 1500, 1, 2<<20)
	raced := raceBinary(t)
	t.Setenv("GORACE", "halt_on_error=1")
	for round := range 3 {
		d := startDaemonOf(t, raced, "", "--shards", dir, "--policy", "nodesam", "--workers", "2", "--batch-size", "4",
			"--cache-limit", "16MiB", "--flight", "grpc://127.0.0.1:0", "--drain", "200ms")
		addr := strings.TrimPrefix(d.ready["flight"].(string), "grpc://")
		if round == 0 {
			sameOverSocketAndShm(t, d.sock)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 10)
		for i := range 2 { // the socket, and shared memory
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := wire.Request{Epoch: uint64(10 + i), World: 1}
				_, err := client.Fetch(context.Background(), d.sock, req, client.Options{ShmRing: i << 23}, func(arrow.RecordBatch) error {
					time.Sleep(2 * time.Millisecond)
					return nil
				})
				if err != nil && strings.Contains(err.Error(), "graph") {
					errs <- err
				}
			}()
		}
		for i := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					errs <- err
					return
				}
				defer cc.Close()
				tkt, _ := json.Marshal(wire.Request{Epoch: uint64(i), World: 1})
				s, err := flight.NewFlightServiceClient(cc).DoGet(context.Background(), &flight.Ticket{Ticket: tkt})
				for err == nil {
					_, err = s.Recv()
					time.Sleep(time.Duration(5*i) * time.Millisecond) // some read slowly, some at once
				}
				if err != io.EOF && strings.Contains(err.Error(), "graph") {
					errs <- err
				}
			}()
		}
		time.Sleep(time.Duration(300+200*round) * time.Millisecond)
		d.stop(t)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: a stream ended with %v", round, err)
		}
		for _, bad := range []string{"panic", "nil pointer", "graph error"} {
			if strings.Contains(d.logs.String(), bad) {
				t.Fatalf("round %d: the log says %q:\n%s", round, bad, d.logs)
			}
		}
	}
}

// raceBinary builds the daemon with -race once per test binary.
func raceBinary(t *testing.T) string {
	t.Helper()
	raceOnce.Do(func() {
		dir, err := os.MkdirTemp("", "augloader-race-")
		if err != nil {
			raceErr = err
			return
		}
		testutil.AtCleanup(func() { os.RemoveAll(dir) })
		raceBin = filepath.Join(dir, "augloader")
		out, err := exec.Command("go", "build", "-race", "-o", raceBin, ".").CombinedOutput()
		if err != nil {
			raceErr = fmt.Errorf("go build -race: %v\n%s", err, out)
		}
	})
	if raceErr != nil {
		t.Fatal(raceErr)
	}
	return raceBin
}

// sameOverSocketAndShm reads an epoch whole over the socket and through
// shared memory and compares their bytes.
func sameOverSocketAndShm(t *testing.T, sock string) {
	t.Helper()
	var digests [2][32]byte
	for i := range 2 {
		res, err := client.Fetch(context.Background(), sock, wire.Request{Epoch: 7, World: 1},
			client.Options{ShmRing: i << 23, Digests: true}, func(arrow.RecordBatch) error { return nil })
		if err != nil {
			t.Fatalf("epoch 7 (shared memory %v): %v", i == 1, err)
		}
		digests[i] = res.Digest
	}
	if digests[0] != digests[1] {
		t.Fatal("epoch 7: shared memory gave other bytes than the socket")
	}
}

var (
	raceOnce sync.Once
	raceBin  string
	raceErr  error
)

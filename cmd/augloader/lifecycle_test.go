package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/testutil"
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

package s3test_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/augloader/augloader/internal/testkit/s3test"
)

// The server a test starts dies with the test process however that ends:
// a test binary killed outright (go test's timeout panics and exits, with
// no cleanup run) took its s3proxy with it. Before, the JVM stayed up,
// orphaned, for hours.
func TestServerDiesWithTest(t *testing.T) {
	if pidFile := os.Getenv("S3TEST_PID_FILE"); pidFile != "" {
		srv := s3test.Start(t)
		if err := os.WriteFile(pidFile, []byte(strconv.Itoa(srv.Pid())), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute) // killed before this ends
		return
	}
	s3test.Jar(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	child := exec.Command(os.Args[0], "-test.run", "^TestServerDiesWithTest$", "-test.timeout", "2m")
	// The child is killed outright, so its own t.TempDir stays: give it
	// a $TMPDIR inside this test's, which this test removes.
	child.Env = append(os.Environ(), "S3TEST_PID_FILE="+pidFile, "TMPDIR="+t.TempDir())
	var logs strings.Builder
	child.Stdout, child.Stderr = &logs, &logs
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	var pid int
	for deadline := time.Now().Add(90 * time.Second); pid == 0; time.Sleep(100 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil && len(b) > 0 {
			pid, _ = strconv.Atoi(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child test started no server:\n%s", logs.String())
		}
	}
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	for deadline := time.Now().Add(20 * time.Second); alive(pid); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("s3proxy (pid %d) outlived the test process that started it", pid)
		}
	}
}

// alive reports whether process pid runs (a zombie, reaped by init
// soon, does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// Package testutil locates the repository's fixtures and the shared real
// datasets for tests, and compares golden bytes.
package testutil

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/augloader/augloader/aug"
)

// Rewrite regenerates golden files: go test ./... -args -rewrite
var Rewrite = flag.Bool("rewrite", false, "rewrite golden files under testdata/")

// Root is the repository root (the folder holding go.mod).
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testutil: go.mod not found above the test's folder")
		}
		dir = parent
	}
}

// Testdata returns <root>/testdata/<elem...>.
func Testdata(t testing.TB, elem ...string) string {
	return filepath.Join(append([]string{Root(t), "testdata"}, elem...)...)
}

// Shared returns ../shared/datasets/<elem...> beside the repository. When
// it is absent the test fails under CI=true and is skipped elsewhere.
func Shared(t testing.TB, elem ...string) string {
	t.Helper()
	base := filepath.Join(Root(t), "..", "shared", "datasets")
	p := filepath.Join(append([]string{base}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("real dataset %s is missing (CI=true requires ../shared/datasets beside the repository)", p)
		}
		t.Skipf("real dataset %s is absent: skipping (put ../shared/datasets beside the repository to run this)", p)
	}
	return p
}

// UnpackTarXZ unpacks archive into a temporary folder with the system xz and
// tar and returns the folder.
func UnpackTarXZ(t testing.TB, archive string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", `xz -dc "$1" | tar -x -C "$2"`, "sh", archive, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("unpack %s: %v\n%s", archive, err, out)
	}
	return dir
}

// Golden compares got with the golden file path (rewriting it with
// -rewrite) and reports the first differing offset.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *Rewrite {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden %s: %v (run with -args -rewrite to create it)", path, err)
	}
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	t.Fatalf("golden %s: first difference at byte offset %d (got %d bytes, want %d)", path, i, len(got), len(want))
}

// Components counts the connected components of a graph with n nodes and
// edges given as (u, v) pairs (union–find), for the property tests.
func Components(n int32, edges []int32) int {
	parent := make([]int32, n)
	for i := range parent {
		parent[i] = int32(i)
	}
	find := func(x int32) int32 {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	c := int(n)
	for k := 0; k+1 < len(edges); k += 2 {
		if a, b := find(edges[k]), find(edges[k+1]); a != b {
			parent[a] = b
			c--
		}
	}
	return c
}

// DenseGraph returns a graph of n nodes with each canonical pair (u < v)
// present with probability p, sorted by (u, v) as ops emit them, and one
// of dim codes per node (COLLAB-like shapes for collation tests and
// benchmarks).
func DenseGraph(r *rand.Rand, id int64, n int, p float64, dim int32) aug.Graph {
	g := aug.Graph{ID: id, N: int32(n), Q: 1}
	for u := 0; u < n; u++ {
		for v := u + 1; v < n; v++ {
			if r.Float64() < p {
				g.Edges = append(g.Edges, int32(u), int32(v))
			}
		}
	}
	codes := make([]int32, n)
	for i := range codes {
		codes[i] = int32(r.IntN(int(dim)))
	}
	g.SetCodes(codes, dim)
	return g
}

// NoRace skips a test under the race detector: one that make test runs
// again without it (its second go test line: the real datasets and the
// heavy property tests), where -race would only make it slower, since it
// runs on one goroutine or its concurrency is covered elsewhere.
func NoRace(t testing.TB) {
	t.Helper()
	if RaceEnabled {
		t.Skip("runs without -race in make test's second go test line")
	}
}

// CheckTail fails t unless tail, a stream resumed at batch k, is exactly
// full[k:], the uninterrupted stream's rest, batch for batch.
func CheckTail[T comparable](t testing.TB, full, tail []T, k int) {
	t.Helper()
	if len(tail) != len(full)-k {
		t.Fatalf("resumed at batch %d: %d batches, want %d", k, len(tail), len(full)-k)
	}
	for i := range tail {
		if tail[i] != full[k+i] {
			t.Fatalf("resumed at batch %d: batch %d differs from the uninterrupted stream's", k, k+i)
		}
	}
}

// DieWithTest makes cmd, a server a test starts (s3proxy, augloader
// serve), die with the test process however that ends: go test's
// timeout kills the test binary with no cleanup run, and such servers
// were left running for hours. SIGKILL is sent to it when the thread
// that started it ends (Go keeps its threads for the process's life).
func DieWithTest(cmd *exec.Cmd) *exec.Cmd {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	return cmd
}

// SyncBuffer is output a process (exec's copying goroutine) writes while
// a test reads it: a strings.Builder shared so is a data race.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ServeHTTP serves h on a loopback port until the test ends and returns
// its URL (http://127.0.0.1:PORT): a fault proxy before a test's server.
func ServeHTTP(t testing.TB, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(l)
	t.Cleanup(func() { hs.Close() })
	return "http://" + l.Addr().String()
}

// AtCleanup registers f to run at the test binary's end, when its TestMain
// calls RunCleanups (fixture.Cleanup does): what outlives one test, a
// server the package's tests share.
func AtCleanup(f func()) {
	cleanups.Lock()
	defer cleanups.Unlock()
	cleanups.fs = append(cleanups.fs, f)
}

// RunCleanups runs what AtCleanup registered, the latest first, once.
func RunCleanups() {
	cleanups.Lock()
	fs := cleanups.fs
	cleanups.fs = nil
	cleanups.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

var cleanups struct {
	sync.Mutex
	fs []func()
}

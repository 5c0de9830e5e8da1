package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The summary counts what ran and names every skip with its reason, a
// package whose tests all skipped included; a failure (a test's or a
// build's) makes the exit status 1.
func TestSummary(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p/a","Test":"TestOne"}`,
		`{"Action":"output","Package":"p/a","Test":"TestOne","Output":"=== RUN   TestOne\n"}`,
		`{"Action":"pass","Package":"p/a","Test":"TestOne","Elapsed":12.5}`,
		`{"Action":"output","Package":"p/a","Output":"ok  \tp/a\t0.1s\n"}`,
		`{"Action":"run","Package":"p/b","Test":"TestReal"}`,
		`{"Action":"output","Package":"p/b","Test":"TestReal","Output":"    real_test.go:9: ../shared/datasets absent: put it beside the repository\n"}`,
		`{"Action":"output","Package":"p/b","Test":"TestReal","Output":"--- SKIP: TestReal (0.00s)\n"}`,
		`{"Action":"skip","Package":"p/b","Test":"TestReal"}`,
	}, "\n")
	var out strings.Builder
	if code := run(strings.NewReader(in), &out); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	for _, want := range []string{"ok  \tp/a", "2 tests ran: 1 passed, 0 failed, 1 skipped", "every test skipped (their \"ok\" tested nothing): p/b",
		"skipped p/b TestReal: real_test.go:9: ../shared/datasets absent", "the 1 slowest tests:\n     12.5 s  p/a TestOne"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	for _, failing := range []string{`{"Action":"fail","Package":"p/a","Test":"TestOne"}`, `{"Action":"build-fail","ImportPath":"p/c"}`, "FAIL\tp/d [build failed]"} {
		if code := run(strings.NewReader(in+"\n"+failing), &strings.Builder{}); code != 1 {
			t.Errorf("%s: exit %d, want 1", failing, code)
		}
	}
}

// A failure shows why at the end: a subtest's t.Fatal message (its
// parent, which only failed with it, adds nothing), and a package that
// hit go test's timeout names the test that was running. The input is
// real go test -json output of a package made for it.
func TestFailuresSay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test on a package of its own")
	}
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/failing\n\ngo 1.21\n")
	write("f_test.go", `package failing

import (
	"os"
	"testing"
	"time"
)

func TestServeProcess(t *testing.T) {
	t.Run("nodesam", func(t *testing.T) { t.Fatalf("want 42 batches, got 41: the daemon said %q", "boom") })
	t.Run("none", func(t *testing.T) {})
}

func TestHangs(t *testing.T) {
	if os.Getenv("HANG") == "" {
		t.Skip("HANG unset")
	}
	time.Sleep(time.Minute)
}
`)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"fatal", nil, []string{"-run", "TestServeProcess"}, []string{"failures:", "--- FAIL: example.com/failing TestServeProcess/nodesam",
			`want 42 batches, got 41: the daemon said "boom"`}},
		{"timeout", []string{"HANG=1"}, []string{"-run", "TestHangs", "-timeout", "2s"}, []string{"failures:", "test timed out after 2s", "TestHangs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("go", append([]string{"test", "-json", "-count=1"}, tc.args...)...)
			cmd.Dir, cmd.Env = dir, append(os.Environ(), tc.env...)
			js, _ := cmd.Output() // it fails: that is the point
			var out strings.Builder
			if code := run(strings.NewReader(string(js)), &out); code != 1 {
				t.Fatalf("exit %d, want 1:\n%s", code, out.String())
			}
			summary := out.String()[strings.LastIndex(out.String(), "go test:"):]
			for _, w := range tc.want {
				if !strings.Contains(summary, w) {
					t.Errorf("the summary lacks %q:\n%s", w, summary)
				}
			}
			if strings.Contains(summary, "--- FAIL: example.com/failing TestServeProcess\n") {
				t.Errorf("the parent of a failed subtest is shown with nothing of its own:\n%s", summary)
			}
		})
	}
}

package main

import (
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
		`{"Action":"pass","Package":"p/a","Test":"TestOne"}`,
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
		"skipped p/b TestReal: real_test.go:9: ../shared/datasets absent"} {
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

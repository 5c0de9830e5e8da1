// Command testsummary reads `go test -json` on standard input, passes the
// usual output through, and ends with what ran and what was skipped, and
// why: a package whose every test skipped printed "ok" like any other
// (the real-dataset tests without ../shared, in 0.02 s). A failure is
// shown with why, at the end where a person reads: each failed test's own
// output (its t.Fatal lines, a panic), and for a package that failed with
// no test failed (go test's timeout, a crash) its last lines, which name
// the tests that were running. The ten slowest tests are named with their
// times. It exits 1 when a test or a package failed, so a pipe keeps go
// test's verdict.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64 // seconds, on a test's or package's end
}

// slowest is how many of the slowest tests the summary names.
const slowest = 10

// timed is one top-level test's time.
type timed struct {
	key     string // "pkg Test"
	seconds float64
}

func main() {
	os.Exit(run(os.Stdin, os.Stdout))
}

// keptLines bounds the output kept of one test or package for the
// failures section: the message is near the end.
const keptLines = 40

// tail keeps the last keptLines lines given.
type tail struct {
	lines []string
	cut   int // lines dropped from the front
}

func (t *tail) add(l string) {
	t.lines = append(t.lines, l)
	if len(t.lines) > keptLines {
		t.lines = t.lines[1:]
		t.cut++
	}
}

func run(in io.Reader, out io.Writer) int {
	type pkgCount struct{ run, pass, fail, skip int }
	counts := map[string]*pkgCount{}
	skips := map[string]string{} // "pkg Test" → the reason (the test's last output line)
	lastLine := map[string]string{}
	kept := map[string]*tail{} // "pkg Test" (or "pkg " for the package's own) → its last lines
	var failedTests []string   // "pkg Test", in the order they failed
	failedPkgs := map[string]bool{}
	running := map[string]bool{}    // "pkg Test" started and not ended: what a timeout or crash cut
	panics := map[string][]string{} // "pkg Test" → its panic line and the few after it (a timeout's running tests)
	panicLeft := map[string]int{}
	var times []timed
	failed := false
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Fprintln(out, sc.Text()) // not an event (a build error): as is
			if strings.HasPrefix(sc.Text(), "FAIL") {
				failed = true
			}
			continue
		}
		c := counts[e.Package]
		if c == nil {
			c = &pkgCount{}
			counts[e.Package] = c
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "build-output":
			fmt.Fprint(out, e.Output)
		case "build-fail":
			failed = true
		case "output":
			if l := strings.TrimRight(e.Output, "\n"); !strings.HasPrefix(strings.TrimSpace(l), "=== ") {
				if kept[key] == nil {
					kept[key] = &tail{}
				}
				kept[key].add(l)
			}
			if l := strings.TrimRight(e.Output, "\n"); strings.HasPrefix(l, "panic:") && panics[key] == nil {
				panics[key], panicLeft[key] = []string{l}, 6
			} else if panicLeft[key] > 0 {
				panics[key] = append(panics[key], l)
				panicLeft[key]--
			}
			if e.Test == "" && e.Output != "PASS\n" {
				fmt.Fprint(out, e.Output) // the package's ok/FAIL lines
			} else if l := strings.TrimSpace(e.Output); l != "" && !strings.HasPrefix(l, "---") && !strings.HasPrefix(l, "===") {
				lastLine[key] = l
			}
			if e.Test != "" && (strings.Contains(e.Output, "--- FAIL") || strings.Contains(e.Output, "panic:")) {
				fmt.Fprint(out, e.Output)
			}
		case "run":
			running[key] = e.Test != ""
			if e.Test != "" && !strings.Contains(e.Test, "/") {
				c.run++
			}
		case "pass":
			delete(running, key)
			if e.Test != "" && !strings.Contains(e.Test, "/") {
				c.pass++
				times = append(times, timed{key, e.Elapsed})
			}
		case "fail":
			delete(running, key)
			failed = true
			if e.Test != "" && !strings.Contains(e.Test, "/") {
				c.fail++
				times = append(times, timed{key, e.Elapsed})
			}
			if e.Test != "" {
				failedTests = append(failedTests, key)
			} else {
				failedPkgs[e.Package] = true
			}
		case "skip":
			delete(running, key)
			if e.Test != "" {
				if !strings.Contains(e.Test, "/") {
					c.skip++
				}
				skips[key] = lastLine[key]
			}
		}
	}
	// A test cut by its package's end (go test's timeout, a crash) failed
	// with it: shown with its panic, else its last lines.
	var cut []string
	for k, r := range running {
		if pkg, _, _ := strings.Cut(k, " "); r && failedPkgs[pkg] {
			cut = append(cut, k)
		}
	}
	sort.Strings(cut)
	for _, k := range cut {
		if p := panics[k]; p != nil {
			kept[k] = &tail{lines: append([]string{"(did not finish)"}, p...)}
		}
		failedTests = append(failedTests, k)
		if pkg, test, _ := strings.Cut(k, " "); !strings.Contains(test, "/") {
			counts[pkg].fail++
		}
	}
	var run, pass, fail, skip int
	var allSkipped []string
	for p, c := range counts {
		run, pass, fail, skip = run+c.run, pass+c.pass, fail+c.fail, skip+c.skip
		if c.run > 0 && c.skip == c.run {
			allSkipped = append(allSkipped, p)
		}
	}
	fmt.Fprintf(out, "\ngo test: %d tests ran: %d passed, %d failed, %d skipped\n", run, pass, fail, skip)
	if len(allSkipped) > 0 {
		sort.Strings(allSkipped)
		fmt.Fprintf(out, "packages whose every test skipped (their \"ok\" tested nothing): %s\n", strings.Join(allSkipped, ", "))
	}
	keys := make([]string, 0, len(skips))
	for k := range skips {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(out, "  skipped %s: %s\n", k, skips[k])
	}
	writeSlowest(out, times)
	writeFailures(out, failedTests, failedPkgs, kept)
	if failed {
		return 1
	}
	return 0
}

// writeSlowest names the slowest top-level tests that ended, with their
// times (a package's tests run one at a time unless they call t.Parallel;
// packages run side by side).
func writeSlowest(out io.Writer, times []timed) {
	if len(times) == 0 {
		return
	}
	sort.SliceStable(times, func(i, j int) bool { return times[i].seconds > times[j].seconds })
	times = times[:min(len(times), slowest)]
	fmt.Fprintf(out, "the %d slowest tests:\n", len(times))
	for _, t := range times {
		fmt.Fprintf(out, "  %7.1f s  %s\n", t.seconds, t.key)
	}
}

// writeFailures shows why each test failed (a parent whose subtest failed
// adds nothing of its own unless it has lines of its own), and the last
// lines of a package that failed with no test failed.
func writeFailures(out io.Writer, tests []string, pkgs map[string]bool, kept map[string]*tail) {
	if len(tests) == 0 && len(pkgs) == 0 {
		return
	}
	fmt.Fprintf(out, "\nfailures:\n")
	withTest := map[string]bool{}
	for _, k := range tests {
		pkg, _, _ := strings.Cut(k, " ")
		withTest[pkg] = true
		lines := own(kept[k])
		if len(lines) == 0 && hasFailedChild(k, tests) {
			continue
		}
		fmt.Fprintf(out, "--- FAIL: %s\n", k)
		for _, l := range lines {
			fmt.Fprintf(out, "    %s\n", strings.TrimSpace(l))
		}
	}
	names := make([]string, 0, len(pkgs))
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		if withTest[p] && !timedOut(kept[p+" "]) {
			continue
		}
		fmt.Fprintf(out, "--- FAIL: package %s, its last lines:\n", p)
		t := kept[p+" "]
		if t == nil {
			continue
		}
		if t.cut > 0 {
			fmt.Fprintf(out, "    (%d lines before)\n", t.cut)
		}
		for _, l := range t.lines {
			fmt.Fprintf(out, "    %s\n", l)
		}
	}
}

// own is a test's lines but its verdict lines (--- PASS/FAIL/SKIP of it
// and its subtests).
func own(t *tail) []string {
	if t == nil {
		return nil
	}
	var out []string
	for _, l := range t.lines {
		if s := strings.TrimSpace(l); s != "" && !strings.HasPrefix(s, "--- ") {
			out = append(out, l)
		}
	}
	return out
}

func hasFailedChild(k string, tests []string) bool {
	for _, o := range tests {
		if strings.HasPrefix(o, k+"/") {
			return true
		}
	}
	return false
}

// timedOut reports whether a package's lines hold go test's timeout.
func timedOut(t *tail) bool {
	if t == nil {
		return false
	}
	for _, l := range t.lines {
		if strings.Contains(l, "test timed out") {
			return true
		}
	}
	return false
}

// Command testsummary reads `go test -json` on standard input, passes the
// usual output through, and ends with what ran and what was skipped, and
// why: a package whose every test skipped printed "ok" like any other
// (the real-dataset tests without ../shared, in 0.02 s). It exits 1 when a
// test or a package failed, so a pipe keeps go test's verdict.
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
}

func main() {
	os.Exit(run(os.Stdin, os.Stdout))
}

func run(in io.Reader, out io.Writer) int {
	type pkgCount struct{ run, pass, fail, skip int }
	counts := map[string]*pkgCount{}
	skips := map[string]string{} // "pkg Test" → the reason (the test's last output line)
	lastLine := map[string]string{}
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
			if e.Test == "" && e.Output != "PASS\n" {
				fmt.Fprint(out, e.Output) // the package's ok/FAIL lines
			} else if l := strings.TrimSpace(e.Output); l != "" && !strings.HasPrefix(l, "---") && !strings.HasPrefix(l, "===") {
				lastLine[key] = l
			}
			if e.Test != "" && (strings.Contains(e.Output, "--- FAIL") || strings.Contains(e.Output, "panic:")) {
				fmt.Fprint(out, e.Output)
			}
		case "run":
			if e.Test != "" && !strings.Contains(e.Test, "/") {
				c.run++
			}
		case "pass":
			if e.Test != "" && !strings.Contains(e.Test, "/") {
				c.pass++
			}
		case "fail":
			failed = true
			if e.Test != "" && !strings.Contains(e.Test, "/") {
				c.fail++
			}
		case "skip":
			if e.Test != "" {
				if !strings.Contains(e.Test, "/") {
					c.skip++
				}
				skips[key] = lastLine[key]
			}
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
	if failed {
		return 1
	}
	return 0
}

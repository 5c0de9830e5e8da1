package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/augloader/augloader/internal/testkit/fixture"
)

// helpExample finds a flag's examples in its help: "e.g. 'A / B'" (one,
// quoted) or "e.g. A | B | C" or "e.g. A or B" (alternatives), up to "; ", ", ", " (" or
// ")" (a value's own ";" and "," have no space after them).
var helpExample = regexp.MustCompile(`e\.g\. ('[^']+'|.+?)(?:; |, | \(|\)|$)`)

func examples(usage string) []string {
	var out []string
	for _, m := range helpExample.FindAllStringSubmatch(usage, -1) {
		ex := strings.TrimSpace(m[1])
		if strings.HasPrefix(ex, "'") {
			out = append(out, strings.Trim(ex, "'"))
			continue
		}
		for _, alt := range regexp.MustCompile(` \| | or `).Split(ex, -1) { // alternatives
			out = append(out, strings.TrimSpace(alt))
		}
	}
	return out
}

// Every example value a flag's help gives is one the command takes (serve
// --help showed --twins 'dropnode:p=0.2 / …', which the daemon refuses):
// serve starts with it and stops cleanly; fetch reads an epoch with it;
// materialize writes an epoch with it.
func TestHelpExamplesRun(t *testing.T) {
	shards := fixture.SynthShards(t, "COLLAB", 60, 1)
	ran := 0
	app := newApp()
	for _, name := range []string{"serve", "fetch", "materialize"} {
		cmd := app.Command(name)
		for _, f := range cmd.Flags {
			sf, ok := f.(interface{ GetUsage() string })
			if !ok {
				continue
			}
			for _, ex := range examples(sf.GetUsage()) {
				flag := "--" + f.Names()[0]
				ran++
				t.Run(name+" "+flag+" "+ex, func(t *testing.T) {
					switch name {
					case "serve":
						d := startDaemon(t, "", "--shards", shards, flag, ex)
						d.stop(t)
					case "fetch":
						d := startDaemon(t, "", "--shards", shards)
						if _, stderr, code := runBin(t, "fetch", "--addr", d.sock, "--epoch", "0", flag, ex); code != 0 {
							t.Fatalf("fetch %s %s: exit %d\n%s", flag, ex, code, stderr)
						}
						d.stop(t)
					case "materialize":
						out := filepath.Join(t.TempDir(), "epochs")
						if _, stderr, code := runBin(t, "materialize", "--shards", shards, "--epochs", "0:1", "--out", out, flag, ex); code != 0 {
							t.Fatalf("materialize %s %s: exit %d\n%s", flag, ex, code, stderr)
						}
					}
				})
			}
		}
	}
	if ran < 8 {
		t.Fatalf("only %d help examples found: the pattern no longer matches the help", ran)
	}
}

var _ cli.Flag // the flags' help is read through their GetUsage

// serve --help opens with example command lines and prints its flags in
// the six groups, in order, each flag under its own heading (3520536
// printed 45 flags in one flat list); materialize's are grouped alike.
func TestServeHelpGrouped(t *testing.T) {
	out, stderr, code := runBin(t, "serve", "--help")
	if code != 0 {
		t.Fatalf("serve --help: exit %d\n%s", code, stderr)
	}
	ex := strings.Index(out, "Examples:\n")
	if ex < 0 || !strings.Contains(out[ex:], "augloader serve --shards demo/shards --socket") {
		t.Fatalf("serve --help opens with no example command lines:\n%s", out)
	}
	at := func(s string) int {
		i := strings.Index(out, s)
		if i < 0 {
			t.Fatalf("serve --help lacks %q:\n%s", s, out)
		}
		return i
	}
	last := at("OPTIONS:")
	for gi, g := range flagGroups {
		start := at("\n   " + g.heading + "\n")
		if start < last {
			t.Errorf("heading %q prints out of order", g.heading)
		}
		end := len(out)
		if gi+1 < len(flagGroups) {
			end = at("\n   " + flagGroups[gi+1].heading + "\n")
		}
		for _, f := range g.flags {
			i := strings.Index(out, "\n   --"+f+" ")
			if i < 0 {
				continue // a materialize flag
			}
			if i < start || i > end {
				t.Errorf("--%s prints outside %q", f, g.heading)
			}
		}
		last = start
	}
	for _, f := range newApp().Command("serve").Flags {
		if !strings.Contains(out, "\n   --"+f.Names()[0]+" ") && f.Names()[0] != "help" {
			t.Errorf("serve --help lacks --%s", f.Names()[0])
		}
	}
	if m, _, code := runBin(t, "materialize", "--help"); code != 0 || !strings.Contains(m, "1. Data and views") {
		t.Errorf("materialize --help is not grouped:\n%s", m)
	}
}

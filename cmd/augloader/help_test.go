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

package docstest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/augloader/augloader/internal/testkit/testutil"
)

// Speeds and costs quoted outside docs/bench.md are docs/bench.md's own
// figures, from its latest `make bench` run, so the pages cannot drift
// apart again (deploy.md said SubMix ran "about 10k COLLAB graphs/s per
// core" where bench.md measured 19k to 24k; the README gave the real
// COLLAB's conversion as 1.3 s and 320 MiB where bench.md said 0.6 s).
func TestFiguresQuoteBench(t *testing.T) {
	root := testutil.Root(t)
	bench, err := os.ReadFile(filepath.Join(root, "docs", "bench.md"))
	if err != nil {
		t.Fatal(err)
	}
	figures := map[string]bool{}
	for _, n := range regexp.MustCompile(`\d[\d,]*(?:\.\d+)?`).FindAllString(string(bench), -1) {
		figures[n] = true
	}
	patterns := []*regexp.Regexp{
		regexp.MustCompile(`(\d[\d,]*(?:\.\d+)?k?) (?:[\w-]+ ){0,2}graphs/s`),
		regexp.MustCompile(`(\d[\d,]*(?:\.\d+)?) ?[MG]B/s`),
		regexp.MustCompile(`(?:takes|in) (?:about )?(\d[\d.]*) ?s with a peak RSS of (?:about )?(\d+) MiB`),
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append(docs, filepath.Join(root, "README.md"))
	checked := 0
	for _, p := range docs {
		if filepath.Base(p) == "bench.md" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(string(b)), " ")
		for _, re := range patterns {
			for _, m := range re.FindAllStringSubmatch(text, -1) {
				for _, n := range m[1:] {
					checked++
					if !figures[n] {
						t.Errorf("%s: %q quotes %s, which docs/bench.md (the latest make bench run) does not hold: quote its figure, or point to it", filepath.Base(p), m[0], n)
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no figure found to check: the patterns no longer match the docs")
	}
}

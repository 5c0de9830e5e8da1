package docstest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/augloader/augloader/internal/testkit/testutil"
)

// docs/map.md names packages, folders and files a newcomer is sent to:
// each must exist, so the map cannot drift from the tree.
func TestMapNamesExist(t *testing.T) {
	root := testutil.Root(t)
	b, err := os.ReadFile(filepath.Join(root, "docs", "map.md"))
	if err != nil {
		t.Fatal(err)
	}
	// A path in backticks: a folder ending in "/", or a file with an
	// extension, relative to the repository's root.
	paths := regexp.MustCompile("`([a-z][\\w./-]*(?:/|\\.(?:go|py|md|json|tsv)))`").FindAllStringSubmatch(string(b), -1)
	if len(paths) < 20 {
		t.Fatalf("only %d paths found in docs/map.md", len(paths))
	}
	for _, m := range paths {
		p := m[1]
		if p == "manifest.json" || strings.Contains(p, "*") {
			continue // a file of a shard folder, not of the tree
		}
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("docs/map.md names %s, which is not in the tree", p)
		}
	}
}

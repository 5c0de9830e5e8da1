package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// readFloors reads docs/map.md's floors table: package → floor.
func readFloors(t *testing.T) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "map.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(b), "\n## Floors\n")
	if !found {
		t.Fatal("docs/map.md has no \"## Floors\" section: the layering it draws is what this test checks")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile(`(?m)^\| (\d+) \|[^|]*\|(.*)\|$`)
	name := regexp.MustCompile("`([a-z][a-z0-9/]*)`")
	floors := map[string]int{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		n, _ := strconv.Atoi(m[1])
		for _, p := range name.FindAllStringSubmatch(m[2], -1) {
			if f, dup := floors[p[1]]; dup {
				t.Errorf("docs/map.md places %s on floors %d and %d", p[1], f, n)
			}
			floors[p[1]] = n
		}
	}
	if len(floors) == 0 {
		t.Fatal("docs/map.md's floors table names no package")
	}
	return floors
}

// The layering docs/map.md draws holds: every package is placed, no
// import climbs to a higher floor, test helpers (internal/testkit)
// included, and those helpers stand above every package whose tests use
// them.
func TestFloors(t *testing.T) {
	floors := readFloors(t)
	top := 0
	for _, f := range floors {
		top = max(top, f)
	}
	seen := map[string]bool{}
	for _, p := range listPackages(t) {
		name := rel(p.ImportPath)
		seen[name] = true
		f, placed := floors[name]
		if !placed {
			t.Errorf("%s stands on no floor of docs/map.md's table: give it one", name)
			continue
		}
		if strings.HasPrefix(name, "internal/testkit") && f != top {
			t.Errorf("%s is a test helper on floor %d: test helpers stand on the top floor (%d), above what they test", name, f, top)
		}
		for _, imp := range p.Imports {
			if dep := rel(imp); strings.HasPrefix(imp, mod+"/") && floors[dep] > f {
				t.Errorf("%s (floor %d) imports %s (floor %d): an import climbs", name, f, dep, floors[dep])
			}
		}
		for _, imp := range append(p.TestImports, p.XTestImports...) {
			if dep := rel(imp); strings.HasPrefix(dep, "internal/testkit") && !strings.HasPrefix(name, "internal/testkit") && floors[dep] <= f {
				t.Errorf("%s's tests use %s, which stands on floor %d, not above %s's %d", name, dep, floors[dep], name, f)
			}
		}
	}
	for p := range floors {
		if !seen[p] {
			t.Errorf("docs/map.md places %s, which is not a package", p)
		}
	}
}

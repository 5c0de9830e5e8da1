package archtest

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/augloader/augloader"

// allowed lists, per package, the packages of this module it may import
// (internal/* helpers are allowed everywhere except aug, which imports
// nothing of ours). Anything not listed fails the test.
var allowed = map[string][]string{
	"aug":         {},
	"shard":       {"internal/"},
	"shard/tu":    {"shard", "internal/"},
	"epoch":       {"aug"},
	"wire":        {"internal/"},
	"loader":      {"aug", "epoch", "shard", "wire", "internal/"},
	"materialize": {"loader", "shard", "wire", "internal/"},
	"server":      {"loader", "materialize", "epoch", "shard", "wire", "internal/"},
	"client":      {"wire", "internal/"},
}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", mod+"/...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestLayering(t *testing.T) {
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, mod), "/")
		rules, ok := allowed[rel]
		if !ok {
			continue // cmd/*, bench, internal/*: the top of the house
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, mod+"/") {
				continue
			}
			dep := strings.TrimPrefix(imp, mod+"/")
			okDep := false
			for _, r := range rules {
				if dep == r || (strings.HasSuffix(r, "/") && strings.HasPrefix(dep, r)) {
					okDep = true
				}
			}
			if !okDep {
				t.Errorf("%s imports %s: not allowed by the layering (cmd → server → loader → epoch, aug, shard; wire beside)", rel, dep)
			}
		}
	}
}

// The library pulls no plotting or other tool-only code.
func TestNoToolDependencies(t *testing.T) {
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, mod), "/")
		if _, lib := allowed[rel]; !lib {
			continue
		}
		for _, d := range p.Deps {
			if strings.HasPrefix(d, "gonum.org/") {
				t.Errorf("%s depends on %s", rel, d)
			}
		}
	}
}

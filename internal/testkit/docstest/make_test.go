package docstest

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augloader/augloader/internal/testkit/testutil"
)

// Every pip install the Makefile runs into a venv takes the pins as
// constraints ($(PIP_C)): make paper's matplotlib once pulled numpy 2
// into .venv, which Debian's torch refuses to load, and make test then
// failed until .venv was removed by hand. .venv-torch2 (torch 2.x, NumPy
// 2) has pins of its own ($(PIP_C2)).
func TestMakefilePipKeepsPins(t *testing.T) {
	f, err := os.Open(filepath.Join(testutil.Root(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n, installs := 0, 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "#") || !strings.Contains(line, "pip install") {
			continue
		}
		installs++
		if !strings.Contains(line, "$(PIP_C)") && !strings.Contains(line, "$(PIP_C2)") {
			t.Errorf("Makefile:%d installs without the pins as constraints ($(PIP_C) or $(PIP_C2)): %s", n, strings.TrimSpace(line))
		}
	}
	if installs == 0 {
		t.Fatal("no pip install found in the Makefile: the test reads the wrong file")
	}
	// The torch 2.x venv's file and the MosaicML peer's are locks installed
	// with --no-deps ($(PIP_C2)): every package they need pinned exactly,
	// or pip would take whatever version the index has that day.
	for _, rel := range []string{"tests/requirements-torch2.txt", "bench/requirements-mosaic.txt"} {
		lock, err := os.ReadFile(filepath.Join(testutil.Root(t), rel))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(lock), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if name, version, ok := strings.Cut(line, "=="); !ok || name == "" || version == "" || strings.ContainsAny(line, " ;<>~!") {
				t.Errorf("%s:%d: %q is not name==version", rel, i+1, line)
			}
		}
	}
}

// make wheel needs Go and a bare venv, not the test venv (torch, PyG,
// pyarrow pins: it built all of that first, 20 minutes on the 2-core
// machine, for a wheel that holds none of it).
func TestWheelNeedsOnlyGo(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testutil.Root(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]string{}
	var current string
	for line := range strings.SplitSeq(string(b), "\n") {
		if name, deps, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "\t") && !strings.Contains(name, " ") && !strings.HasPrefix(deps, "=") {
			current = name
			rules[current] = deps
		} else if strings.HasPrefix(line, "\t") && current != "" {
			rules[current] += "\n" + line
		}
	}
	wheel, ok := rules["wheel"]
	if !ok {
		t.Fatal("no wheel rule in the Makefile")
	}
	deps, recipe, _ := strings.Cut(wheel, "\n")
	if strings.Contains(strings.ReplaceAll(deps, "$(WHEEL_VENV)", ""), "venv") || strings.Contains(deps, "$(VENV)") || strings.Contains(recipe, "$(PY) ") {
		t.Errorf("make wheel needs the test venv: wheel:%s", wheel)
	}
}

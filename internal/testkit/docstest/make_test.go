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
}

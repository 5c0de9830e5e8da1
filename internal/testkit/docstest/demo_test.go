package docstest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/augloader/augloader/internal/testkit/testutil"
)

// The quick start's demo (make demo) runs end to end, and a rerun or make
// clean removes only what the demo wrote: the README puts demo/mutag and
// demo/folds beside its outputs, and `rm -rf demo/` deleted them.
func TestDemoOwnsOnlyWhatItWrote(t *testing.T) {
	root := testutil.Root(t)
	bin := binaries(t)
	demo := filepath.Join(t.TempDir(), "demo")
	mine := []string{filepath.Join(demo, "mutag", "manifest.json"), filepath.Join(demo, "folds", "fold-00.json")}
	for _, p := range mine {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("the user's\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(root, "bench", "demo.sh")}, args...)...)
		cmd.Env = append(os.Environ(), "BIN="+bin, "DEMO_DIR="+demo, "DEMO_GRAPHS=30")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("demo.sh %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	for range 2 { // a rerun too
		nextSteps(t, root, demo, run())
		if _, err := os.Stat(filepath.Join(demo, "shards", "manifest.json")); err != nil {
			t.Fatalf("the demo wrote no shards: %v", err)
		}
	}
	run("clean")
	if _, err := os.Stat(filepath.Join(demo, "shards")); err == nil {
		t.Fatal("clean left the demo's shards")
	}
	for _, p := range mine {
		if b, err := os.ReadFile(p); err != nil || string(b) != "the user's\n" {
			t.Fatalf("%s, which the demo did not write, is gone or changed: %v", p, err)
		}
	}
}

// The demo ends by saying what to do next (3520536 ended at the server's
// log): the GIN example on the demo's shards, with flags the example has,
// and the map of the docs.
func nextSteps(t *testing.T, root, demo, out string) {
	t.Helper()
	_, next, ok := strings.Cut(out, "== next\n")
	if !ok {
		t.Fatalf("the demo's output ends without its next steps:\n%s", out)
	}
	cmd := "examples/train_gin.py cv --shards " + filepath.Join(demo, "shards")
	if !strings.Contains(next, cmd) || !strings.Contains(next, "docs/map.md") {
		t.Fatalf("the next steps lack %q or docs/map.md:\n%s", cmd, next)
	}
	src, err := os.ReadFile(filepath.Join(root, "examples", "train_gin.py"))
	if err != nil {
		t.Fatal(err)
	}
	line := next[strings.Index(next, cmd):]
	line = line[:strings.IndexByte(line, '\n')]
	for _, f := range strings.Fields(line) {
		if strings.HasPrefix(f, "--") && !strings.Contains(string(src), `"`+f+`"`) {
			t.Errorf("the next steps' command uses %s, which examples/train_gin.py does not define", f)
		}
	}
}

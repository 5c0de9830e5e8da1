package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// --task names the labels' task where OGB's rule would guess another:
// one integer label a graph of 0 and 1 is binary targets by default and
// two classes when asked (PyG's convention for a 1-D label); a task the
// labels cannot be is refused naming the file, line and field, and TU
// labels, which are classes, refuse any other task.
func TestTaskFlag(t *testing.T) {
	dir := t.TempDir()
	mol := filepath.Join(dir, "molhiv")
	if _, e, code := run(t, "synth", "--like", "ogbg-molhiv", "--graphs", "40", "--seed", "3", "-o", mol); code != 0 {
		t.Fatal(e)
	}
	tu := filepath.Join(dir, "collab")
	if _, e, code := run(t, "synth", "--like", "COLLAB", "--graphs", "20", "-o", tu); code != 0 {
		t.Fatal(e)
	}
	cases := []struct {
		name, input, task string
		code              int
		stats, stderr     string
	}{
		{"auto", mol, "auto", 0, "binary targets ×1", ""},
		{"class", mol, "class", 0, "2 classes", ""},
		{"regression", mol, "regression", 0, "regression targets ×1", ""},
		{"binary", mol, "binary", 0, "binary targets ×1", ""},
		{"tu-class", tu, "class", 0, "classes", ""},
		{"tu-binary", tu, "binary", 1, "", "--task binary: TU graph labels are classes"},
		{"bad-name", mol, "labels", 1, "", "--task \"labels\": want one of auto, class, binary, regression"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "shards")
			_, e, code := run(t, "convert", "-q", "-i", c.input, "-o", out, "--task", c.task)
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s", code, c.code, e)
			}
			if c.stderr != "" && !strings.Contains(e, c.stderr) {
				t.Fatalf("stderr %q lacks %q", e, c.stderr)
			}
			if c.code != 0 {
				return
			}
			st, e, code := run(t, "stats", out)
			if code != 0 || !strings.Contains(st, c.stats) {
				t.Fatalf("stats (exit %d) lacks %q:\n%s%s", code, c.stats, st, e)
			}
		})
	}
}

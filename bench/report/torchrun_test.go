package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The torchrun section: a row per case with its median and range; a page
// without bench/results/torchrun.txt says how to make it.
func TestTorchrunSection(t *testing.T) {
	dir := t.TempDir()
	body := "# bench/python_torchrun.py at abc\n" +
		"RESULT kind=machine cores=2 torch=2.9.1\n" +
		"RESULT kind=torchrun case=start nodes=2 procs=2 first_batch_s=11.5 min_s=11.1 max_s=11.7 ranks=4 runs=3\n" +
		"RESULT kind=torchrun case=restart nodes=2 procs=2 first_batch_s=9.2 min_s=9.1 max_s=9.6 ranks=2 runs=3\n"
	if err := os.WriteFile(filepath.Join(dir, "torchrun.txt"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := readResultsDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	(&page{results: res}).writeTorchrun(&w)
	for _, want := range []string{
		"From `bench/results/torchrun.txt`: bench/python_torchrun.py at abc",
		"| start | 2 × 2 | 4 | 11.500 | 11.100–11.700 | 3 |",
		"| restart | 2 × 2 | 2 | 9.200 | 9.100–9.600 | 3 |",
	} {
		if !strings.Contains(w.String(), want) {
			t.Errorf("the section lacks %q:\n%s", want, w.String())
		}
	}
	w.Reset()
	(&page{}).writeTorchrun(&w)
	if !strings.Contains(w.String(), "bench/results/torchrun.txt is missing") {
		t.Errorf("a page without torchrun.txt: %q", w.String())
	}
}

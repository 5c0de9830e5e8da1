package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The beside section: each row's medians per build, their ratio, and the
// GETs of both; absent without bench/results/beside.txt.
func TestBesideSection(t *testing.T) {
	dir := t.TempDir()
	body := "# bench/beside.sh abc: old = abc, new = def\n" +
		"RESULT build=old run=limit-64MiB epoch_s=2.0\nRESULT build=old run=limit-64MiB epoch_s=4.0\n" +
		"RESULT build=new run=limit-64MiB epoch_s=3.0\nRESULT build=new run=limit-64MiB epoch_s=3.0\n" +
		"RESULT build=new kind=s3 name=s3 epoch_s=10 gets=132\nRESULT build=old kind=s3 name=s3 epoch_s=8 gets=132\n" +
		"RESULT build=new round=1 kind=s3 name=local epoch_s=5\nRESULT build=old round=1 kind=s3 name=local epoch_s=5\n"
	if err := os.WriteFile(filepath.Join(dir, "beside.txt"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := readResultsDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	(&page{results: res}).writeBeside(&w)
	pageHas(t, w.String(),
		"From bench/results/beside.txt: bench/beside.sh abc: old = abc, new = def.",
		"| cliff | limit-64MiB | 3.000 (2) | 3.000 (2) | 1.00 |  |",
		"| s3 | s3 | 8.000 (1) | 10.000 (1) | 1.25 | 132, 132 |",
		"| s3, alternating | local | 5.000 (1) | 5.000 (1) | 1.00 |  |")
	w.Reset()
	(&page{}).writeBeside(&w)
	if w.Len() != 0 {
		t.Errorf("a section without beside.txt: %q", w.String())
	}
}

package archtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// No tracked file is a compiled binary (a 12 MB ELF, bench/report/report,
// was committed once): builds go to ignored folders; nor a stray file
// (internal/testkit/s3test/*.go.tmp was committed once).
func TestNoTrackedBinaries(t *testing.T) {
	dir := repoRoot(t)
	out, err := exec.Command("git", "-C", dir, "ls-files", "-z").Output()
	if err != nil {
		t.Fatal(err)
	}
	magics := map[string][]byte{
		"ELF":         []byte("\x7fELF"),
		"Mach-O":      {0xcf, 0xfa, 0xed, 0xfe},
		"Windows PE":  []byte("MZ"),
		"WebAssembly": []byte("\x00asm"),
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if name == "" || strings.HasSuffix(name, ".pyc") {
			if name != "" {
				t.Errorf("%s: compiled Python is tracked", name)
			}
			continue
		}
		if base := filepath.Base(name); strings.ContainsAny(base, "*?") || strings.HasSuffix(base, ".tmp") || strings.HasSuffix(base, ".orig") ||
			strings.HasSuffix(base, ".rej") || strings.HasSuffix(base, "~") {
			t.Errorf("%s: a stray file is tracked (an editor's or a patch's leftover, or a glob's name)", name)
		}
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			continue // deleted in the work tree
		}
		head := make([]byte, 4)
		n, _ := f.Read(head)
		f.Close()
		for kind, m := range magics {
			if n >= len(m) && bytes.Equal(head[:len(m)], m) {
				t.Errorf("%s is a tracked %s binary: build outputs belong in ignored folders", name, kind)
			}
		}
	}
}

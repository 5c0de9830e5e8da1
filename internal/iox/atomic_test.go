package iox_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/augloader/augloader/internal/iox"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	for _, content := range []string{"first", "second, longer"} {
		if err := iox.WriteFileAtomic(p, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v", st.Mode())
	}
	assertOnly(t, dir, "f.json")
}

// An aborted file leaves the old content and no temporary file.
func TestAtomicFileAbort(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := iox.WriteFileAtomic(p, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := iox.CreateAtomic(p, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("half")
	f.Abort()
	f.Abort() // idempotent
	if err := f.Commit(); err == nil {
		t.Fatal("commit after abort succeeded")
	}
	if got, _ := os.ReadFile(p); string(got) != "kept" {
		t.Fatalf("content %q after abort", got)
	}
	assertOnly(t, dir, "f")
}

// A committed folder replaces the old one whole; an aborted one leaves
// nothing behind.
func TestTempDirCommitAbort(t *testing.T) {
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	os.Mkdir(out, 0o755)
	os.WriteFile(filepath.Join(out, "old"), nil, 0o644)

	td, err := iox.NewTempDir(out)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(td.Path, "new"), []byte("x"), 0o644)
	if err := td.Commit(); err != nil {
		t.Fatal(err)
	}
	td.Abort() // a no-op after Commit
	assertOnly(t, out, "new")
	assertOnly(t, parent, "out")

	td, _ = iox.NewTempDir(out)
	os.WriteFile(filepath.Join(td.Path, "half"), nil, 0o644)
	td.Abort()
	assertOnly(t, out, "new")
	assertOnly(t, parent, "out")
}

// A temporary folder whose writer died (its lock free) is removed by the
// next writer of the same destination; one whose writer lives (the lock
// held) is left alone.
func TestTempDirStale(t *testing.T) {
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	dead, err := iox.NewTempDir(out)
	if err != nil {
		t.Fatal(err)
	}
	// Simulate kill -9: the folder and lock file stay, the lock is freed
	// by the kernel when the process's descriptors close.
	lock := dead.Path + ".lock"
	lf, _ := os.Open(lock)
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		t.Fatal("the lock of a live writer could be taken")
	}
	lf.Close()
	live, err := iox.NewTempDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead.Path); err != nil {
		t.Fatalf("a live writer's folder was removed: %v", err)
	}
	// Release the dead writer's lock without removing its files, as the
	// kernel does for a killed process.
	releaseOnly(t, dead)
	if removed := iox.RemoveStaleTemps(out); len(removed) != 1 || removed[0] != dead.Path {
		t.Fatalf("removed %v, want [%s]", removed, dead.Path)
	}
	if _, err := os.Stat(live.Path); err != nil {
		t.Fatalf("the live writer's folder went: %v", err)
	}
	live.Abort()
	assertOnly(t, parent)
}

// A run killed between creating its lock file and its folder leaves a
// lock file alone; the next writer removes it when it is free, and keeps
// one a live writer holds.
func TestOrphanLockRemoved(t *testing.T) {
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	orphan := filepath.Join(parent, ".out.tmp-123.lock")
	if err := os.WriteFile(orphan, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	held := filepath.Join(parent, ".out.tmp-456.lock")
	hf, err := os.Create(held)
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	if err := syscall.Flock(int(hf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	td, err := iox.NewTempDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Fatalf("the free orphan lock file is still there (%v)", err)
	}
	if _, err := os.Stat(held); err != nil {
		t.Fatalf("a held lock file was removed: %v", err)
	}
	td.Abort()
	hf.Close()
	os.Remove(held)
	assertOnly(t, parent)
}

// releaseOnly drops the writer's lock but keeps its folder and lock file,
// as after kill -9.
func releaseOnly(t *testing.T, td *iox.TempDir) {
	t.Helper()
	iox.ReleaseForTest(td)
}

func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("%s holds %v, want %v", dir, got, names)
	}
}

// SyncClose runs the steps in order, stops at the first that fails (no
// later step, no fsync), closes the file in every case and returns the
// first error.
func TestSyncClose(t *testing.T) {
	open := func() *os.File {
		f, err := os.Create(filepath.Join(t.TempDir(), "f"))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	var ran []int
	step := func(i int, err error) func() error {
		return func() error { ran = append(ran, i); return err }
	}
	f := open()
	if err := iox.SyncClose(f, step(1, nil), step(2, nil)); err != nil || len(ran) != 2 {
		t.Fatalf("clean: %v, ran %v", err, ran)
	}
	if _, err := f.Write([]byte("x")); err == nil {
		t.Fatal("the file is still open")
	}
	ran = nil
	f = open()
	boom := errors.New("boom")
	if err := iox.SyncClose(f, step(1, boom), step(2, nil)); !errors.Is(err, boom) || len(ran) != 1 {
		t.Fatalf("failing step: %v, ran %v", err, ran)
	}
	if _, err := f.Write([]byte("x")); err == nil {
		t.Fatal("the file is still open after a failed step")
	}
}

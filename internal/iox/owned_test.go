package iox_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/augloader/augloader/internal/iox"
)

// serve --remove-on-exit (issue #45): a launcher's marked folder is
// removed with what it holds; anything else is refused at start and left
// whole: a path through a symlink and "..", a user's folder that happens
// to be named augloader-*, a symlink named augloader-*, and a folder
// replaced while the daemon ran.
func TestOwnedDir(t *testing.T) {
	s := t.TempDir()
	mk := func(parts ...string) string {
		p := filepath.Join(append([]string{s}, parts...)...)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mark := func(dir string) {
		if err := os.WriteFile(filepath.Join(dir, iox.LauncherMark), []byte("test\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	user := mk("userdata", "inner")
	if err := os.WriteFile(filepath.Join(s, "userdata", "precious"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := mk("augloader-run")
	mark(run)
	if err := os.Symlink(user, filepath.Join(run, "link")); err != nil {
		t.Fatal(err)
	}
	own := mk("augloader-own-data")
	if err := os.WriteFile(filepath.Join(own, "results.csv"), []byte("1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(s, "userdata"), filepath.Join(s, "augloader-alias")); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{
		"through a symlink and ..": run + "/link/..", // as given: Join would clean it
		"a user's folder":          own,
		"a symlink":                filepath.Join(s, "augloader-alias"),
		"another name":             filepath.Join(s, "userdata"),
	} {
		if _, err := iox.ClaimOwnedDir(dir); !errors.Is(err, iox.ErrNotOwned) {
			t.Errorf("%s (%s): %v, want ErrNotOwned", name, dir, err)
		}
	}
	for _, p := range []string{filepath.Join(s, "userdata", "precious"), user, filepath.Join(own, "results.csv")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s lost: %v", p, err)
		}
	}

	// The launcher's folder: removed, its symlink with it, not its target.
	o, err := iox.ClaimOwnedDir(run)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(run); !os.IsNotExist(err) {
		t.Fatalf("the launcher's folder is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s, "userdata", "precious")); err != nil {
		t.Fatalf("removed through the folder's symlink: %v", err)
	}

	// Replaced while the daemon ran (same name, another folder): left.
	again := mk("augloader-again")
	mark(again)
	o, err = iox.ClaimOwnedDir(again)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(again, filepath.Join(s, "moved")); err != nil {
		t.Fatal(err)
	}
	other := mk("augloader-again")
	mark(other)
	if err := o.Remove(); !errors.Is(err, iox.ErrNotOwned) {
		t.Fatalf("a replaced folder: %v, want ErrNotOwned", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("the replacement was removed: %v", err)
	}
}

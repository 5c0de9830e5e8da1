package iox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// LauncherMark is the file a launcher (augloader.Daemon) writes into the
// folder it makes for a daemon's socket and log, saying the folder is
// there to be removed with the daemon (serve --remove-on-exit).
const LauncherMark = ".augloader-launcher"

// ErrNotOwned: a folder a daemon was asked to remove on exit is not
// provably a launcher's own.
var ErrNotOwned = errors.New("iox: not a launcher's folder")

// OwnedDir is a folder a launcher made for one daemon, to be removed when
// the daemon exits, and only then if it is still that folder.
type OwnedDir struct {
	path     string
	dev, ino uint64
}

// ClaimOwnedDir checks dir before the daemon uses it: a path written
// plainly (no "." or ".." parts: "run/link/.." names link's target's
// parent, which the path's cleaned text does not say), a real folder (not
// a symlink), named augloader-*, holding the launcher's mark; its device
// and inode are kept, so that Remove removes that folder or nothing. Anything else is refused with ErrNotOwned, naming why,
// and nothing is removed: a user's folder that happens to be named
// augloader-* has no mark.
func ClaimOwnedDir(dir string) (*OwnedDir, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNotOwned, dir, err)
	}
	if filepath.Clean(dir) != strings.TrimSuffix(dir, string(filepath.Separator)) || strings.Contains(dir, "..") {
		return nil, fmt.Errorf("%w: %s is not written plainly (no . or .. parts): give the folder's own path", ErrNotOwned, dir)
	}
	if !strings.HasPrefix(filepath.Base(abs), "augloader-") {
		return nil, fmt.Errorf("%w: %s: only a folder whose name starts with augloader- (a launcher's own) is removed", ErrNotOwned, dir)
	}
	o := &OwnedDir{path: abs}
	if err := o.stat(); err != nil {
		return nil, err
	}
	if st, err := os.Lstat(filepath.Join(abs, LauncherMark)); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s holds no %s file (a launcher writes one into the folder it makes for the daemon)", ErrNotOwned, dir, LauncherMark)
	}
	return o, nil
}

// stat records (or, again, compares) the folder's device and inode.
func (o *OwnedDir) stat() error {
	st, err := os.Lstat(o.path)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrNotOwned, o.path, err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !st.IsDir() || !ok {
		return fmt.Errorf("%w: %s is not a folder", ErrNotOwned, o.path)
	}
	dev, ino := uint64(sys.Dev), sys.Ino
	if o.ino != 0 && (dev != o.dev || ino != o.ino) {
		return fmt.Errorf("%w: %s was replaced while the daemon ran", ErrNotOwned, o.path)
	}
	o.dev, o.ino = dev, ino
	return nil
}

// Remove removes the folder and what it holds (symlinks in it are
// removed, never followed), if it is still the folder claimed, with its
// mark.
func (o *OwnedDir) Remove() error {
	if err := o.stat(); err != nil {
		return err
	}
	if _, err := os.Lstat(filepath.Join(o.path, LauncherMark)); err != nil {
		return fmt.Errorf("%w: %s lost its %s file: left in place", ErrNotOwned, o.path, LauncherMark)
	}
	return os.RemoveAll(o.path)
}

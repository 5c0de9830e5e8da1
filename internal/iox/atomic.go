package iox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Crash-safe output: everything augloader writes for the user goes through
// one of these, so a crash, a full disk or an error never leaves a file or
// folder that looks complete, and never loses what was there before.
//
//	file:   temporary name in the same folder → fsync → rename → fsync folder
//	folder: temporary folder beside it (held by a lock file) → fsync → the
//	        old folder moved aside → rename → fsync parent → old removed

// SyncClose ends a file that is being written: it runs steps in order
// (flushing what buffers it: an encoder's close, a bufio.Writer's Flush)
// until one fails, fsyncs the file if none did, and closes it in any
// case. It returns the first error.
func SyncClose(f *os.File, steps ...func() error) error {
	var err error
	for _, step := range steps {
		if err = step(); err != nil {
			break
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// SyncDir fsyncs a folder, making a rename inside it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// WriteFileAtomic writes data to path so that path holds either its old
// content or all of data, whatever happens: a temporary file beside it,
// fsync, rename, fsync of the folder.
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) error {
	f, err := CreateAtomic(path, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Commit()
}

// AtomicFile is a file written under a temporary name in its final folder;
// Commit puts it in place, Abort removes it.
type AtomicFile struct {
	*os.File
	path   string
	done   bool
	sealed bool // synced and closed, not yet in place
}

// CreateAtomic starts writing path (created with perm).
func CreateAtomic(path string, perm fs.FileMode) (*AtomicFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &AtomicFile{File: f, path: path}, nil
}

// TempName is the temporary file's path.
func (f *AtomicFile) TempName() string { return f.File.Name() }

// Commit fsyncs, closes and renames the file into place, then fsyncs the
// folder. On error the temporary file is removed and path is untouched.
func (f *AtomicFile) Commit() error {
	if f.done {
		return errors.New("iox: file already committed or aborted")
	}
	f.done = true
	var err error
	if !f.sealed {
		err = SyncClose(f.File)
	}
	if err == nil {
		err = os.Rename(f.File.Name(), f.path)
	}
	if err != nil {
		os.Remove(f.File.Name())
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	return SyncDir(filepath.Dir(f.path))
}

// Seal fsyncs and closes the file, still under its temporary name: its
// descriptor is given back while it waits for Commit (several files that
// are put in place together).
func (f *AtomicFile) Seal() error {
	if f.done || f.sealed {
		return errors.New("iox: file already sealed, committed or aborted")
	}
	f.sealed = true
	return SyncClose(f.File)
}

// Abort closes and removes the temporary file; a no-op after Commit.
func (f *AtomicFile) Abort() {
	if f.done {
		return
	}
	f.done = true
	if !f.sealed {
		f.File.Close()
	}
	os.Remove(f.File.Name())
}

// TempDir is a folder written beside its destination under a temporary
// name (".NAME.tmp-XXXX"), held by a lock file (".NAME.tmp-XXXX.lock")
// for as long as its writer lives, so that a later writer of the same
// destination can tell a dead run's leftovers (the lock is free) from a
// live run (the lock is held) and remove only the former.
type TempDir struct {
	Path string // the temporary folder
	out  string
	lock *os.File
}

const tmpInfix = ".tmp-"

// NewTempDir creates a temporary folder for out in out's parent (created
// if missing), removing the folders that killed runs left for out.
func NewTempDir(out string) (*TempDir, error) {
	out = filepath.Clean(out)
	parent, base := filepath.Dir(out), filepath.Base(out)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	RemoveStaleTemps(out)
	lf, err := newLock(parent, "."+base+tmpInfix+"*.lock")
	if err != nil {
		return nil, err
	}
	dir := strings.TrimSuffix(lf.Name(), ".lock")
	if err := os.Mkdir(dir, 0o755); err != nil {
		lf.Close()
		os.Remove(lf.Name())
		return nil, err
	}
	return &TempDir{Path: dir, out: out, lock: lf}, nil
}

// newLock creates and locks a lock file. The lock file comes before its
// folder, so a folder without one is always stale. Between the creation
// and the flock the file is free, and another writer's RemoveStaleTemps
// may take it for a dead run's (a process killed in that window leaves
// just such a file) and unlink it: a lock whose path no longer names it
// is dropped and made again.
func newLock(parent, pattern string) (*os.File, error) {
	for try := 0; ; try++ {
		lf, err := os.CreateTemp(parent, pattern)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			lf.Close()
			os.Remove(lf.Name())
			return nil, fmt.Errorf("lock %s: %w", lf.Name(), err)
		}
		held, herr := lf.Stat()
		named, nerr := os.Stat(lf.Name())
		if herr == nil && nerr == nil && os.SameFile(held, named) {
			return lf, nil
		}
		lf.Close()
		if try == 10 {
			return nil, fmt.Errorf("lock %s: removed by another writer ten times in a row", lf.Name())
		}
	}
}

// RemoveStaleTemps removes the temporary folders of out that no live
// writer holds: their lock file is free (the writer died) or missing.
// Folders younger than a minute without a lock file are left alone, in
// case their writer is between creating the lock and the folder. A free
// lock file without its folder (a run killed between the two) goes too.
func RemoveStaleTemps(out string) (removed []string) {
	out = filepath.Clean(out)
	parent, base := filepath.Dir(out), filepath.Base(out)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	prefix := "." + base + tmpInfix
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		if !e.IsDir() {
			if dir, ok := strings.CutSuffix(filepath.Join(parent, name), ".lock"); ok {
				removeOrphanLock(dir)
			}
			continue
		}
		dir := filepath.Join(parent, name)
		lf, err := os.OpenFile(dir+".lock", os.O_RDWR, 0)
		if err != nil {
			if info, ierr := e.Info(); ierr == nil && time.Since(info.ModTime()) < time.Minute {
				continue
			}
			if os.RemoveAll(dir) == nil {
				removed = append(removed, dir)
			}
			continue
		}
		if syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			if os.RemoveAll(dir) == nil {
				removed = append(removed, dir)
			}
			os.Remove(lf.Name())
		}
		lf.Close()
	}
	return removed
}

// removeOrphanLock removes dir's lock file when dir does not exist and
// no writer holds the lock.
func removeOrphanLock(dir string) {
	if _, err := os.Lstat(dir); err == nil {
		return // the folder's own pass decides
	}
	lf, err := os.OpenFile(dir+".lock", os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer lf.Close()
	if syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
		if _, err := os.Lstat(dir); err != nil {
			os.Remove(lf.Name())
		}
	}
}

// Commit fsyncs the temporary folder and renames it to its destination. An
// existing destination is moved aside first and removed only once the new
// folder is in place, so nothing the user had is lost if the rename fails.
func (t *TempDir) Commit() (err error) {
	defer func() {
		if err != nil {
			os.RemoveAll(t.Path) // gone already when only the last steps failed
		}
		t.release()
	}()
	if err := SyncDir(t.Path); err != nil {
		return err
	}
	var aside string
	if _, err := os.Lstat(t.out); err == nil {
		aside = fmt.Sprintf("%s.old-%d", t.out, time.Now().UnixNano())
		if err := os.Rename(t.out, aside); err != nil {
			return fmt.Errorf("move %s aside: %w", t.out, err)
		}
	}
	if err := os.Rename(t.Path, t.out); err != nil {
		if aside != "" {
			_ = os.Rename(aside, t.out)
		}
		return fmt.Errorf("rename %s into place: %w", t.out, err)
	}
	if err := SyncDir(filepath.Dir(t.out)); err != nil {
		return err
	}
	if aside != "" {
		return os.RemoveAll(aside)
	}
	return nil
}

// Abort removes the temporary folder; safe after Commit (a no-op).
func (t *TempDir) Abort() {
	if t.lock == nil {
		return
	}
	os.RemoveAll(t.Path)
	t.release()
}

func (t *TempDir) release() {
	if t.lock != nil {
		os.Remove(t.lock.Name())
		t.lock.Close()
		t.lock = nil
	}
}

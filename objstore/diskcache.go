package objstore

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/augloader/augloader/internal/crc32c"
	"github.com/augloader/augloader/shard"
	"golang.org/x/sys/unix"
)

// ErrDiskCache is a disk cache folder that cannot be used: not a folder,
// not writable, or held by another process.
var ErrDiskCache = errors.New("objstore: disk cache")

// DiskCache is a shard.Store that keeps the ranges it reads from another
// store (pages, the manifest, the graph-size index) as files of a local
// folder, so a host fetches each page of a folder in object storage once,
// across restarts too.
//
// An entry is keyed by the store's location, the file's name, its version
// (shard.Versioned: the ETag a HEAD answered when the file was opened, so
// a replaced object is never served from an old entry; a file without a
// version is read through, not cached), its size and the range. Its file,
// DIR/<hash of the key>.page, holds the key, the bytes and a CRC-32C of
// both, checked on every read: an entry that fails the check (a torn
// write, a flipped bit, another key's file) is deleted and its range read
// from the store again, counted as bad. An entry whose bytes pass its own
// check but not the reader's (the page's CRC-32C the manifest seals: a
// transfer damaged once, or a store that lied, before the entry was
// written) is dropped too when the reader asks for the range again
// (RereadAt, shard.Rereader), so damaged bytes cost one more read, never
// a lasting error. The folder holds at most the limit in entries, the
// least recently used dropped first; use is an entry's modification time,
// so the order outlives the process. Failing to write an entry (a full
// disk) is counted, never an error of the read: the cache only saves
// requests. One process uses a folder at a time (an flock on DIR/.lock,
// opened without following a link and refused unless it is the regular
// file of a process id the cache makes). A file is the cache's only by a
// name it gives (32 hex digits, or .tmp- and digits, then .page) and the
// header it writes; only such files are ever removed, and entries are
// opened regular-only and without blocking, never through a link. When a
// file is opened at a new version (its folder replaced in the store), the
// entries of its older versions are deleted at once (Stale), not left to
// age out.
type DiskCache struct {
	inner shard.Store
	dir   string
	limit int64
	lock  *os.File

	mu      sync.Mutex
	entries map[string]*list.Element // by file name; values *diskEntry
	lru     list.List                // most recently used at the front
	bytes   int64
	// objects indexes the entries by the object they hold a range of
	// (location and name): a start that opens an object at another
	// version drops the older version's entries, which no read can hit
	// again (their key holds the version).
	objects map[string]map[string]struct{}

	stats DiskCacheStats
}

// diskEntry is one entry file: its name and size, and the object and
// version its key names ("" for a torn entry whose key is unread).
type diskEntry struct {
	name            string
	size            int64
	object, version string
}

// DiskCacheStats counts a DiskCache's work (read while it serves).
type DiskCacheStats struct {
	// Hits and Misses count reads served from the folder and from the
	// store; Bad the entries that failed their check (each then a miss).
	Hits, Misses, Bad atomic.Int64
	// Written counts entry bytes written, Evictions entries dropped to
	// stay within the limit, WriteErrors entries that could not be
	// written (the read went on from the store's bytes).
	Written, Evictions, WriteErrors atomic.Int64
	// Stale counts entries of an object's older version, dropped when the
	// object was opened at a new one (a folder replaced in the store).
	Stale atomic.Int64
}

const (
	diskCacheMagic = "AUGPAGE1"
	diskCacheExt   = ".page"
	diskCacheTemp  = ".tmp-"
	// diskCacheName is the length of an entry's file name: 32 hex digits
	// (128 bits of the key's SHA-256) and the extension.
	diskCacheName = 32 + len(diskCacheExt)
)

// NewDiskCache opens (creating it when absent) folder dir as a cache of at
// most limit bytes of inner's reads. The entries a previous process left
// are kept, the oldest dropped past limit; its temporary files are
// removed.
func NewDiskCache(inner shard.Store, dir string, limit int64) (*DiskCache, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: %s: a limit of %d bytes (give a positive size)", ErrDiskCache, dir, limit)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDiskCache, err)
	}
	lock, err := openLock(filepath.Join(dir, ".lock"))
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := make([]byte, 32)
		n, _ := lock.ReadAt(holder, 0)
		lock.Close()
		pid := strings.TrimSpace(string(holder[:n]))
		if pid == "" {
			pid = "unknown"
		}
		return nil, fmt.Errorf("%w: %s is in use by another process (pid %s): give each daemon a folder of its own", ErrDiskCache, dir, pid)
	}
	if err := lock.Truncate(0); err == nil {
		lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	c := &DiskCache{inner: inner, dir: dir, limit: limit, lock: lock, entries: map[string]*list.Element{},
		objects: map[string]map[string]struct{}{}}
	if err := c.load(); err != nil {
		lock.Close()
		return nil, err
	}
	return c, nil
}

// openLock opens (creating it) the folder's lock file, refusing one that
// this cache did not make: a symbolic link (never followed, so a link to
// a user's file is never truncated), a file with other links, anything
// but a regular file (opened without blocking, so a FIFO cannot hang the
// start), or one that holds anything but a process id.
func openLock(path string) (*os.File, error) {
	lock, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%w: %s is a symbolic link, not the lock this cache makes: remove it, or give --disk-cache a folder of the cache's own", ErrDiskCache, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDiskCache, err)
	}
	info, err := lock.Stat()
	var why string
	switch {
	case err != nil:
		why = err.Error()
	case !info.Mode().IsRegular():
		why = "not a regular file"
	case info.Sys().(*syscall.Stat_t).Nlink != 1:
		why = "a file with other links"
	case info.Size() > 24:
		why = fmt.Sprintf("%d bytes, not a process id", info.Size())
	default:
		b := make([]byte, info.Size())
		if _, err := lock.ReadAt(b, 0); err != nil || strings.Trim(string(b), "0123456789\n") != "" {
			why = "it holds other text than a process id"
		}
	}
	if why != "" {
		lock.Close()
		return nil, fmt.Errorf("%w: %s is not the lock this cache makes (%s): remove it, or give --disk-cache a folder of the cache's own", ErrDiskCache, path, why)
	}
	return lock, nil
}

// isEntryName reports whether name is one the cache gives an entry: 32
// lowercase hex digits and the extension.
func isEntryName(name string) bool {
	return len(name) == diskCacheName && strings.HasSuffix(name, diskCacheExt) && isDigits(name[:32], "0123456789abcdef")
}

// isTempName reports whether name is one the cache gives a temporary
// file (os.CreateTemp's decimal digits between the prefix and the
// extension).
func isTempName(name string) bool {
	mid, ok := strings.CutPrefix(name, diskCacheTemp)
	if !ok {
		return false
	}
	mid, ok = strings.CutSuffix(mid, diskCacheExt)
	return ok && mid != "" && isDigits(mid, "0123456789")
}

func isDigits(s, digits string) bool {
	for _, r := range s {
		if !strings.ContainsRune(digits, r) {
			return false
		}
	}
	return true
}

// ownHeader reports whether the regular file at path begins as an entry
// the cache writes does (the magic, or as much of it as a torn write
// left), read without following a link or blocking, and returns the key
// its header holds ("" when the header is torn).
func ownHeader(path string) (key string, own bool) {
	fh, err := openEntry(path)
	if err != nil {
		return "", false
	}
	defer fh.Close()
	head := make([]byte, len(diskCacheMagic)+4)
	n, _ := fh.ReadAt(head, 0)
	m := min(n, len(diskCacheMagic))
	if string(head[:m]) != diskCacheMagic[:m] {
		return "", false
	}
	if n < len(head) {
		return "", true
	}
	k := make([]byte, min(binary.LittleEndian.Uint32(head[len(diskCacheMagic):]), 1<<16))
	if n, _ := fh.ReadAt(k, int64(len(head))); n != len(k) {
		return "", true
	}
	return string(k), true
}

// keyObject is the object (location and name) and version an entry's key
// names; empty for a key not of entryOf's form.
func keyObject(key string) (object, version string) {
	f := strings.Split(key, "\x00")
	if len(f) != 6 {
		return "", ""
	}
	return f[0] + "\x00" + f[1], f[2]
}

// openEntry opens an entry for reading: a regular file only, never
// through a symbolic link, and without blocking (a FIFO in an entry's
// place would otherwise hold the read, past any signal).
func openEntry(path string) (*os.File, error) {
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if info, err := fh.Stat(); err != nil || !info.Mode().IsRegular() {
		fh.Close()
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	return fh, nil
}

// load indexes the entries in the folder, oldest first, and trims them to
// the limit. A file is the cache's only by a name it gives and the header
// it writes: anything else in the folder is never indexed, evicted or
// removed.
func (c *DiskCache) load() error {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrDiskCache, err)
	}
	type found struct {
		diskEntry
		used time.Time
	}
	var all []found
	for _, e := range ents {
		name := e.Name()
		path := filepath.Join(c.dir, name)
		if !e.Type().IsRegular() || !(isTempName(name) || isEntryName(name)) {
			continue
		}
		key, own := ownHeader(path)
		if !own {
			continue
		}
		switch {
		case isTempName(name):
			os.Remove(path) // a write a stopped process left
		default:
			if info, err := e.Info(); err == nil {
				object, version := keyObject(key)
				all = append(all, found{diskEntry{name, info.Size(), object, version}, info.ModTime()})
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].used.Before(all[j].used) })
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range all {
		c.addLocked(&diskEntry{f.name, f.size, f.object, f.version})
	}
	c.evictLocked()
	return nil
}

// addLocked indexes entry d as the most recently used.
func (c *DiskCache) addLocked(d *diskEntry) {
	c.entries[d.name] = c.lru.PushFront(d)
	c.bytes += d.size
	if d.object != "" {
		if c.objects[d.object] == nil {
			c.objects[d.object] = map[string]struct{}{}
		}
		c.objects[d.object][d.name] = struct{}{}
	}
}

// dropStale removes the entries of object (location and name) at another
// version than version: a replaced object's, which no read hits again.
func (c *DiskCache) dropStale(object, version string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.objects[object] {
		e := c.entries[name]
		if e.Value.(*diskEntry).version != version {
			c.removeLocked(e)
			c.stats.Stale.Add(1)
		}
	}
}

// Location is the cached store's.
func (c *DiskCache) Location() string { return c.inner.Location() }

// Inner is the store whose reads are cached.
func (c *DiskCache) Inner() shard.Store { return c.inner }

// Dir is the cache's folder.
func (c *DiskCache) Dir() string { return c.dir }

// Limit is the most bytes of entries the folder holds.
func (c *DiskCache) Limit() int64 { return c.limit }

// Used is the bytes of entries the folder holds now.
func (c *DiskCache) Used() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// Stats returns the cache's counters.
func (c *DiskCache) Stats() *DiskCacheStats { return &c.stats }

// Close releases the folder for another process.
func (c *DiskCache) Close() error { return c.lock.Close() }

// Open opens the store's file; its reads go through the cache when it has
// a version.
func (c *DiskCache) Open(ctx context.Context, name string) (shard.StoreFile, error) {
	f, err := c.inner.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	v, ok := f.(shard.Versioned)
	if !ok || v.Version() == "" {
		return f, nil
	}
	c.dropStale(c.inner.Location()+"\x00"+name, v.Version())
	return &cachedFile{StoreFile: f, c: c, name: name, version: v.Version()}, nil
}

// cachedFile is a versioned file of the cached store.
type cachedFile struct {
	shard.StoreFile
	c             *DiskCache
	name, version string
}

// ReadAt serves a range within the file from its entry, or reads it from
// the store and writes the entry.
func (f *cachedFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	c := f.c
	entry, key, ok := f.entryOf(p, off)
	if !ok {
		return f.StoreFile.ReadAt(ctx, p, off)
	}
	if c.get(entry, key, p) {
		c.stats.Hits.Add(1)
		return len(p), nil
	}
	c.stats.Misses.Add(1)
	n, err := f.StoreFile.ReadAt(ctx, p, off)
	if err != nil {
		return n, err
	}
	if err := c.put(entry, key, p); err != nil {
		c.stats.WriteErrors.Add(1)
	}
	return n, nil
}

// RereadAt reads a range from the store again, past its entry, and drops
// the entry, counted as bad: the reader asks this when the bytes served
// failed their check (shard.Rereader). Those bytes may have come damaged
// from one transfer and been kept; they are not kept again, and the
// range's next miss writes the entry anew.
func (f *cachedFile) RereadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if entry, _, ok := f.entryOf(p, off); ok && f.c.drop(entry) {
		f.c.stats.Bad.Add(1)
	}
	if rr, ok := f.StoreFile.(shard.Rereader); ok {
		return rr.RereadAt(ctx, p, off)
	}
	return f.StoreFile.ReadAt(ctx, p, off)
}

// entryOf names the entry of the range of len(p) bytes at off and its
// key; ok is false for a range the cache does not keep.
func (f *cachedFile) entryOf(p []byte, off int64) (entry, key string, ok bool) {
	if len(p) == 0 || off < 0 || off > f.Size()-int64(len(p)) || int64(len(p)) > f.c.limit {
		return "", "", false
	}
	key = strings.Join([]string{f.c.inner.Location(), f.name, f.version, strconv.FormatInt(f.Size(), 10),
		strconv.FormatInt(off, 10), strconv.Itoa(len(p))}, "\x00")
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16]) + diskCacheExt, key, true
}

// get fills p from entry when the folder holds it and it passes its
// check; a failing entry is deleted.
func (c *DiskCache) get(entry, key string, p []byte) bool {
	c.mu.Lock()
	_, ok := c.entries[entry]
	c.mu.Unlock()
	if !ok {
		return false
	}
	path := filepath.Join(c.dir, entry)
	fh, err := openEntry(path)
	if err != nil {
		// Removed under us (by hand, or an eviction), or something that is
		// not an entry in its place (left there, not removed).
		c.forget(entry)
		return false
	}
	good := checkEntry(fh, key, p)
	fh.Close()
	if !good {
		c.stats.Bad.Add(1)
		c.drop(entry)
		return false
	}
	c.mu.Lock()
	if e, ok := c.entries[entry]; ok {
		c.lru.MoveToFront(e)
	}
	c.mu.Unlock()
	// The use outlives the process; the entry's own times, never those of
	// what a symbolic link put in its place would point to.
	now := unix.NsecToTimespec(time.Now().UnixNano())
	unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{now, now}, unix.AT_SYMLINK_NOFOLLOW)
	return true
}

// checkEntry reads an entry file into p and reports whether it is key's,
// of len(p) bytes, whole, and matches its CRC-32C.
func checkEntry(fh *os.File, key string, p []byte) bool {
	head := make([]byte, len(diskCacheMagic)+4+len(key))
	if info, err := fh.Stat(); err != nil || info.Size() != int64(len(head)+len(p)+4) {
		return false
	}
	var tail [4]byte
	if _, err := fh.ReadAt(head, 0); err != nil {
		return false
	}
	if _, err := fh.ReadAt(p, int64(len(head))); err != nil {
		return false
	}
	if _, err := fh.ReadAt(tail[:], int64(len(head)+len(p))); err != nil {
		return false
	}
	if string(head[:len(diskCacheMagic)]) != diskCacheMagic ||
		binary.LittleEndian.Uint32(head[len(diskCacheMagic):]) != uint32(len(key)) ||
		string(head[len(diskCacheMagic)+4:]) != key {
		return false
	}
	return binary.LittleEndian.Uint32(tail[:]) == entryCRC(head, p)
}

// entryCRC is an entry's trailer: the CRC-32C of its header and page.
func entryCRC(head, p []byte) uint32 { return crc32c.Update(crc32c.Checksum(head), p) }

// put writes p as entry (a temporary file renamed into place) and drops the
// least recently used entries past the limit.
func (c *DiskCache) put(entry, key string, p []byte) error {
	tmp, err := os.CreateTemp(c.dir, diskCacheTemp+"*"+diskCacheExt)
	if err != nil {
		return err
	}
	head := make([]byte, 0, len(diskCacheMagic)+4+len(key))
	head = append(head, diskCacheMagic...)
	head = binary.LittleEndian.AppendUint32(head, uint32(len(key)))
	head = append(head, key...)
	tail := binary.LittleEndian.AppendUint32(nil, entryCRC(head, p))
	_, err = tmp.Write(head)
	if err == nil {
		_, err = tmp.Write(p)
	}
	if err == nil {
		_, err = tmp.Write(tail)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	// No fsync: an entry a crash tears fails its check and is fetched again.
	if err == nil {
		// Never in place of what is not an entry (a folder, a FIFO, a link).
		if info, lerr := os.Lstat(filepath.Join(c.dir, entry)); lerr == nil && !info.Mode().IsRegular() {
			err = fmt.Errorf("%s: not a regular file", entry)
		}
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(c.dir, entry))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	size := int64(len(head) + len(p) + len(tail))
	c.stats.Written.Add(size)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[entry]; ok { // two readers fetched it at once
		c.forgetLocked(e)
	}
	object, version := keyObject(key)
	c.addLocked(&diskEntry{entry, size, object, version})
	c.evictLocked()
	return nil
}

// drop forgets entry and deletes its file, reporting whether it was held.
func (c *DiskCache) drop(entry string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[entry]
	if ok {
		c.removeLocked(e)
	}
	return ok
}

// forget forgets entry and leaves its path as it is.
func (c *DiskCache) forget(entry string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[entry]; ok {
		c.forgetLocked(e)
	}
}

func (c *DiskCache) forgetLocked(e *list.Element) *diskEntry {
	d := e.Value.(*diskEntry)
	c.lru.Remove(e)
	delete(c.entries, d.name)
	c.bytes -= d.size
	if names := c.objects[d.object]; names != nil {
		delete(names, d.name)
		if len(names) == 0 {
			delete(c.objects, d.object)
		}
	}
	return d
}

// evictLocked drops the least recently used entries until the folder
// holds at most the limit.
func (c *DiskCache) evictLocked() {
	for c.bytes > c.limit && c.lru.Len() > 0 {
		c.removeLocked(c.lru.Back())
		c.stats.Evictions.Add(1)
	}
}

func (c *DiskCache) removeLocked(e *list.Element) {
	path := filepath.Join(c.dir, c.forgetLocked(e).name)
	if info, err := os.Lstat(path); err != nil || !info.Mode().IsRegular() {
		return // gone, or something else in its place: not the cache's to remove
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.stats.WriteErrors.Add(1)
	}
}

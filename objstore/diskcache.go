package objstore

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
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

	"github.com/augloader/augloader/shard"
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
// from the store again, counted as bad. The folder holds at most the limit
// in entries, the least recently used dropped first; use is an entry's
// modification time, so the order outlives the process. Failing to write
// an entry (a full disk) is counted, never an error of the read: the cache
// only saves requests. One process uses a folder at a time (an flock on
// DIR/.lock); it removes only *.page entries and its own temporary files,
// never other files in DIR.
type DiskCache struct {
	inner shard.Store
	dir   string
	limit int64
	lock  *os.File

	mu      sync.Mutex
	entries map[string]*list.Element // by file name; values *diskEntry
	lru     list.List                // most recently used at the front
	bytes   int64

	stats DiskCacheStats
}

// diskEntry is one entry file: its name and size.
type diskEntry struct {
	name string
	size int64
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
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDiskCache, err)
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
	c := &DiskCache{inner: inner, dir: dir, limit: limit, lock: lock, entries: map[string]*list.Element{}}
	if err := c.load(); err != nil {
		lock.Close()
		return nil, err
	}
	return c, nil
}

// load indexes the entries in the folder, oldest first, and trims them to
// the limit.
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
		switch {
		case strings.HasPrefix(name, diskCacheTemp) && strings.HasSuffix(name, diskCacheExt):
			os.Remove(filepath.Join(c.dir, name)) // a write a stopped process left
		case len(name) == diskCacheName && strings.HasSuffix(name, diskCacheExt) && e.Type().IsRegular():
			if info, err := e.Info(); err == nil {
				all = append(all, found{diskEntry{name, info.Size()}, info.ModTime()})
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].used.Before(all[j].used) })
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range all {
		c.entries[f.name] = c.lru.PushFront(&diskEntry{f.name, f.size})
		c.bytes += f.size
	}
	c.evictLocked()
	return nil
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
func (f *cachedFile) ReadAt(p []byte, off int64) (int, error) {
	c := f.c
	if len(p) == 0 || off < 0 || off > f.Size()-int64(len(p)) || int64(len(p)) > c.limit {
		return f.StoreFile.ReadAt(p, off)
	}
	key := strings.Join([]string{c.inner.Location(), f.name, f.version, strconv.FormatInt(f.Size(), 10),
		strconv.FormatInt(off, 10), strconv.Itoa(len(p))}, "\x00")
	sum := sha256.Sum256([]byte(key))
	entry := hex.EncodeToString(sum[:16]) + diskCacheExt
	if c.get(entry, key, p) {
		c.stats.Hits.Add(1)
		return len(p), nil
	}
	c.stats.Misses.Add(1)
	n, err := f.StoreFile.ReadAt(p, off)
	if err != nil {
		return n, err
	}
	if err := c.put(entry, key, p); err != nil {
		c.stats.WriteErrors.Add(1)
	}
	return n, nil
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
	fh, err := os.Open(path)
	if err != nil {
		c.drop(entry) // removed under us (by hand, or an eviction)
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
	now := time.Now()
	os.Chtimes(path, now, now) // the use outlives the process
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
	crc := crc32.Update(crc32.Checksum(head, castagnoli), castagnoli, p)
	return binary.LittleEndian.Uint32(tail[:]) == crc
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

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
	tail := binary.LittleEndian.AppendUint32(nil, crc32.Update(crc32.Checksum(head, castagnoli), castagnoli, p))
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
		c.bytes -= e.Value.(*diskEntry).size
		c.lru.Remove(e)
	}
	c.entries[entry] = c.lru.PushFront(&diskEntry{entry, size})
	c.bytes += size
	c.evictLocked()
	return nil
}

// drop forgets entry and deletes its file.
func (c *DiskCache) drop(entry string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[entry]; ok {
		c.removeLocked(e)
	}
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
	d := e.Value.(*diskEntry)
	c.lru.Remove(e)
	delete(c.entries, d.name)
	c.bytes -= d.size
	if err := os.Remove(filepath.Join(c.dir, d.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.stats.WriteErrors.Add(1)
	}
}

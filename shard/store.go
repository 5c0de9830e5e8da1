package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/augloader/augloader/internal/iox"
)

// Store is where a shard folder's files are read from: a local folder
// (DirStore) or a prefix in object storage (package objstore). A reader
// asks for a file's size once and then for ranges of it, each checked
// against a CRC-32C the manifest seals, so a store need not be trusted
// for integrity, only asked for bytes.
type Store interface {
	// Open opens file name of the folder (a name of the manifest's, never
	// a path) for reads at offsets. A missing file is an error that
	// wraps fs.ErrNotExist.
	Open(ctx context.Context, name string) (StoreFile, error)
	// Location names the folder in messages: a path or a URL.
	Location() string
}

// StoreFile is one file of a Store: its size when opened, and reads at
// offsets. ReadAt reads len(p) bytes at off (a short read is an error, as
// io.ReaderAt says) and gives up once ctx ends, with an error wrapping
// ctx's: shutdown, a client gone and an idle timeout end a read of a
// stalled store as they end the request that needed it.
type StoreFile interface {
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	io.Closer
	Size() int64
}

// Versioned is a StoreFile that names the version of the bytes it
// reads: an S3 object's ETag, a local file's size and modification time.
// Another version is other bytes; a cache of a store's reads keys them
// by it (objstore.DiskCache), and a file that has none is not cached.
type Versioned interface {
	Version() string
}

// Rereader is a StoreFile whose bytes pass through something that can
// damage them in passing (a transfer, a cache entry written from one).
// RereadAt reads a range again from the source itself, past any copy
// kept of it, and drops that copy: what a read whose bytes failed their
// check is worth once (checked).
type Rereader interface {
	RereadAt(ctx context.Context, p []byte, off int64) (int, error)
}

// checked runs read against f's reads under ctx and, when what it read
// fails a check (an error wrapping ErrCorrupt) and f is a Rereader, once
// more against the source: a transfer damaged once costs one read, never
// a lasting error, and a kept copy of damaged bytes is dropped, not
// served again. Bytes that fail twice are the store's own, and the error
// stands.
func checked(ctx context.Context, f StoreFile, read func(io.ReaderAt) error) error {
	err := read(readerAt{ctx, f})
	if rr, ok := f.(Rereader); ok && errors.Is(err, ErrCorrupt) && ctx.Err() == nil {
		err = read(rereading{ctx, rr})
	}
	return err
}

// readerAt is f's reads under ctx.
type readerAt struct {
	ctx context.Context
	f   StoreFile
}

func (r readerAt) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAt(r.ctx, p, off) }

// located adds to a corruption found in a folder of object storage the
// file's whole location (s3://BUCKET/PREFIX/FILE): the bare file name a
// CorruptionError holds says which folder only on a local path.
func located(st Store, err error) error {
	var c *CorruptionError
	if loc := st.Location(); err == nil || !strings.Contains(loc, "://") || !errors.As(err, &c) || strings.Contains(c.File, "://") {
		return err
	}
	return fmt.Errorf("%w (%s/%s)", err, strings.TrimSuffix(st.Location(), "/"), c.File)
}

// rereading reads every range from a Rereader's source, under ctx.
type rereading struct {
	ctx context.Context
	r   Rereader
}

func (r rereading) ReadAt(p []byte, off int64) (int, error) { return r.r.RereadAt(r.ctx, p, off) }

// DirStore is the store of a local folder.
func DirStore(dir string) Store { return dirStore(dir) }

type dirStore string

func (d dirStore) Location() string { return string(d) }

// Open opens a regular file of the folder (a symlink to one is followed;
// a device or a folder refused) and notes its size.
func (d dirStore) Open(_ context.Context, name string) (StoreFile, error) {
	f, err := iox.OpenRegular(filepath.Join(string(d), name))
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &dirFile{f: f, size: st.Size(), version: fmt.Sprintf("%d@%d", st.Size(), st.ModTime().UnixNano())}, nil
}

type dirFile struct {
	f       *os.File
	size    int64
	version string
}

// ReadAt reads from the file unless ctx has ended (a local read does not
// stall the way a remote one does: it is not interrupted).
func (f *dirFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

func (f *dirFile) Close() error { return f.f.Close() }

func (f *dirFile) Size() int64 { return f.size }

// Version is the file's size and modification time when opened.
func (f *dirFile) Version() string { return f.version }

// readAll reads a whole file of st of at most limit bytes and runs check
// on its bytes (read once more from the source if they fail: checked).
func readAll(ctx context.Context, st Store, name string, limit int64, check func([]byte) error) ([]byte, error) {
	f, err := st.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if f.Size() > limit {
		return nil, corrupt(name, "size", "%d bytes, at most %d expected", f.Size(), limit)
	}
	data := make([]byte, f.Size())
	err = checked(ctx, f, func(rd io.ReaderAt) error {
		if _, err := rd.ReadAt(data, 0); err != nil && !(errors.Is(err, io.EOF) && len(data) == 0) {
			return fmt.Errorf("shard: %s: %w", name, err)
		}
		return check(data)
	})
	return data, err
}

package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/klauspost/compress/gzip"

	"github.com/augloader/augloader/internal/iox"
)

// Files is an input's files, wherever they are: a folder (listed to
// MaxDepth levels), a .zip, a .tar, .tar.gz or .tar.xz (recognised by
// content, not by name; the entries a format wants streamed once into a
// spool folder, never held in memory), or one bare file. Entries are named
// by their path inside the container, with '/' ("raw/edge.csv.gz"); a bare
// file's one entry is its base name. Reading an entry to its end records
// its SHA-256 (Hashes).
type Files struct {
	Path string // the input as given
	// Bare: the input is one plain file, not a container.
	Bare bool
	// Magic is a bare file's first bytes (at most 512), for Detect.
	Magic []byte

	entries  []string
	open     map[string]func() (io.ReadCloser, error)
	closers  []func() error
	spoolDir string
	limit    Expansion
	ctx      context.Context // nil: never done
	// inputBytes is the input's size on disk; inflated the bytes its
	// compressed streams gave (per stream the most any one read of it
	// gave, so a file read twice counts once), held to
	// limit.Bound(inputBytes).
	inputBytes int64
	inflated   int64
	inflatedBy map[string]int64

	mu     sync.Mutex
	hashes map[string]SourceHash
	// streams: every stream a format opened (a raw entry, an inflated
	// gzip member, a nested archive's entry), by key, and whether one of
	// its reads reached its checked end (Complete).
	streams map[string]*stream
}

// stream is one checked stream: how to open it again, and whether a read
// of it reached its end with every check passed (a gzip trailer's CRC-32
// and size, a zip entry's CRC-32).
type stream struct {
	shown    string
	open     func() (io.ReadCloser, error)
	verified bool
}

// SourceHash is the SHA-256 of one input file, computed while it was read.
type SourceHash struct {
	Name   string
	Bytes  int64
	SHA256 string
}

// FilesOptions tune OpenFiles.
type FilesOptions struct {
	// SpoolDir is where a tar archive's entries are written while it is
	// read (default: the system's temporary folder). The spool is removed
	// by Close, and by a later OpenFiles when its process was killed.
	SpoolDir string
	// Wanted says which tar entries to spool (the formats' files); nil:
	// every regular entry.
	Wanted func(entry string) bool
	// MaxExpansion bounds what a compressed archive may inflate to
	// (zero: DefaultExpansion).
	MaxExpansion Expansion
	// Context, when set, stops a long read (a tar spooled) when it is
	// done.
	Context context.Context
}

func (o FilesOptions) expansion() Expansion {
	if o.MaxExpansion.Ratio <= 0 {
		return DefaultExpansion
	}
	return o.MaxExpansion
}

// Listing bounds: a folder is listed this deep and no further, and an
// input holds at most MaxEntries files (a home folder given by mistake is
// refused, not walked).
const (
	MaxDepth   = 4
	MaxEntries = 100_000
)

// containerErr is a container fault, not any format's.
func containerErr(p, detail string, args ...any) error {
	return Errorf("input", p, 0, 0, detail, args...)
}

// OpenFiles opens an input: a folder, a zip, a tar (plain, gzip, xz) or a
// bare file.
func OpenFiles(p string, o FilesOptions) (*Files, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	f := &Files{Path: p, open: map[string]func() (io.ReadCloser, error){}, hashes: map[string]SourceHash{},
		streams: map[string]*stream{}, spoolDir: o.SpoolDir, limit: o.expansion(), ctx: o.Context,
		inputBytes: st.Size(), inflatedBy: map[string]int64{}}
	if st.IsDir() {
		if err := f.listFolder(p); err != nil {
			return nil, err
		}
		return f, nil
	}
	if !st.Mode().IsRegular() {
		// A FIFO or a device would block open or read forever (and a
		// zip needs random access): only regular files are read.
		return nil, containerErr(p, "not a regular file (%s): give a folder or a file", st.Mode().Type())
	}
	head, err := readHead(p)
	if err != nil {
		return nil, err
	}
	switch {
	case bytes.HasPrefix(head, []byte("PK\x03\x04")), bytes.HasPrefix(head, []byte("PK\x05\x06")):
		err = f.openZip(p)
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		err = f.openTar(p, "gzip", o)
	case bytes.HasPrefix(head, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		err = f.openTar(p, "xz", o)
	case len(head) >= 263 && string(head[257:262]) == "ustar":
		err = f.openTar(p, "tar", o)
	default:
		f.Bare, f.Magic = true, head
		name := filepath.Base(p)
		f.entries = []string{name}
		f.open[name] = func() (io.ReadCloser, error) { return iox.OpenRegular(p) }
		return f, nil
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Entries lists the input's files, sorted.
func (f *Files) Entries() []string { return f.entries }

// Has reports whether the input holds entry.
func (f *Files) Has(entry string) bool { return f.open[entry] != nil }

// Close releases an archive and removes a tar's spool.
func (f *Files) Close() error {
	var err error
	for _, c := range f.closers {
		if cerr := c(); err == nil {
			err = cerr
		}
	}
	f.closers = nil
	return err
}

// Open opens entry; reading it to its end records its SHA-256 under the
// name shown (see Hashes). A goroutine reads and hashes one block ahead of
// the caller.
func (f *Files) Open(entry, shown string) (io.ReadCloser, error) {
	rc, err := f.OpenDirect(entry, shown)
	if err != nil {
		return nil, err
	}
	return newPrefetcher(rc), nil
}

// OpenDirect is Open without the read-ahead, for a caller that reads on a
// goroutine of its own: one copy of the bytes fewer.
func (f *Files) OpenDirect(entry, shown string) (io.ReadCloser, error) {
	op := f.open[entry]
	if op == nil {
		return nil, containerErr(shown, "missing required file")
	}
	return f.Track("file:"+shown, shown, func() (io.ReadCloser, error) {
		rc, err := op()
		if err != nil {
			return nil, containerErr(shown, "cannot open: %v", err)
		}
		return &hashingReader{rc: rc, h: sha256.New(), name: shown, f: f}, nil
	})
}

// OpenGzip opens entry, a gzip file, inflated: every member is read to its
// trailer, whose CRC-32 and size are checked, and a read ends in io.EOF
// only there (a file cut short is an error, never a shorter file). A
// goroutine inflates one block ahead of the caller.
func (f *Files) OpenGzip(entry, shown string) (io.ReadCloser, error) {
	rc, err := f.Track("gzip:"+shown, shown, func() (io.ReadCloser, error) {
		raw, err := f.OpenDirect(entry, shown)
		if err != nil {
			return nil, err
		}
		zr, err := gzip.NewReader(raw)
		if err != nil {
			raw.Close()
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, containerErr(shown, "%v: a gzip file cut short", ErrDamaged)
			}
			return nil, containerErr(shown, "not gzip: %v", err)
		}
		return &gzFile{Reader: zr, guard: &expansionGuard{r: zr, f: f, key: "gzip:" + shown, shown: shown}, raw: raw}, nil
	})
	if err != nil {
		return nil, err
	}
	return newPrefetcher(rc), nil
}

type gzFile struct {
	*gzip.Reader
	guard *expansionGuard
	raw   io.Closer
}

func (g *gzFile) Read(p []byte) (int, error) { return g.guard.Read(p) }

func (g *gzFile) Close() error {
	err := g.Reader.Close()
	if cerr := g.raw.Close(); err == nil {
		err = cerr
	}
	return err
}

// Limit is the bound on what the input's compressed streams may inflate
// to, and the input's size it applies to.
func (f *Files) Limit() (Expansion, int64) { return f.limit, f.inputBytes }

// TempFile creates an unlinked temporary file in the spool folder (beside
// the output: a temporary folder may be memory), gone with its last
// descriptor however the process ends.
func (f *Files) TempFile() (*os.File, error) {
	tmp, err := os.CreateTemp(f.spoolDir, ".augloader-entry-*")
	if err != nil {
		return nil, err
	}
	os.Remove(tmp.Name())
	return tmp, nil
}

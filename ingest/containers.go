package ingest

// The containers an input comes in: a folder, a zip, a tar (plain, gzip
// or xz, its xz footer checked), and the guard on a nested zip entry.

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/augloader/augloader/internal/iox"
	"github.com/klauspost/compress/gzip"
	"github.com/ulikunitz/xz"
)

func readHead(p string) ([]byte, error) {
	fh, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	defer fh.Close()
	b := make([]byte, 512)
	n, _ := io.ReadFull(fh, b)
	return b[:n], nil
}

// skipped: entries no format reads (macOS resource forks and folders).
func skipped(name string) bool {
	b := path.Base(name)
	return strings.HasPrefix(b, "._") || strings.Contains(name, "__MACOSX")
}

// listFolder lists dir's regular files to MaxDepth levels (hidden folders
// skipped, links never followed).
func (f *Files) listFolder(dir string) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if p != dir && (strings.HasPrefix(d.Name(), ".") || strings.Count(rel, string(filepath.Separator)) >= MaxDepth-1) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		name := filepath.ToSlash(rel)
		if skipped(name) {
			return nil
		}
		if len(f.entries) >= MaxEntries {
			return containerErr(dir, "more than %d files: give the dataset's own folder", MaxEntries)
		}
		if info, err := d.Info(); err == nil {
			f.inputBytes += info.Size()
		}
		f.entries = append(f.entries, name)
		f.open[name] = func() (io.ReadCloser, error) { return iox.OpenRegular(p) }
		return nil
	})
	sort.Strings(f.entries)
	if err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			return err
		}
		return fmt.Errorf("ingest: %w", err)
	}
	return nil
}

func (f *Files) openZip(p string) error {
	zr, err := zip.OpenReader(p)
	if err != nil {
		return containerErr(p, "not a readable zip: %v", err)
	}
	f.closers = append(f.closers, zr.Close)
	fh, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	err = CheckZipNames(fh, &zr.Reader)
	fh.Close()
	if err != nil {
		return containerErr(p, "%v", err)
	}
	for _, e := range zr.File {
		if e.FileInfo().IsDir() || skipped(e.Name) {
			continue
		}
		if f.open[e.Name] != nil {
			return containerErr(p, "the zip holds %q twice: refusing to guess which one is the dataset", e.Name)
		}
		if len(f.entries) >= MaxEntries {
			return containerErr(p, "more than %d entries", MaxEntries)
		}
		e := e
		f.entries = append(f.entries, e.Name)
		f.open[e.Name] = func() (io.ReadCloser, error) { return f.GuardZipEntry(e, p+"/"+e.Name) }
	}
	sort.Strings(f.entries)
	return nil
}

// openTar reads a tar (kind "tar", "gzip" or "xz" around one) in a single
// streaming pass, writing the entries o.Wanted takes into a spool folder
// under their own paths. Nothing of the archive is held in memory; the
// spool is removed by Close. The compressed stream is read to its end
// (its trailer's checks made), and what it inflates to is charged to the
// input's Expansion bound.
func (f *Files) openTar(p, kind string, o FilesOptions) error {
	fh, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	defer fh.Close()
	var r io.Reader = bufio.NewReaderSize(fh, 1<<20)
	switch kind {
	case "gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return containerErr(p, "gzip: %v", err)
		}
		defer zr.Close()
		r = zr
	case "xz":
		xr, err := xz.NewReader(r)
		if err != nil {
			return containerErr(p, "xz: %v", err)
		}
		r = xr
	}
	dir := o.SpoolDir
	if dir == "" {
		dir = os.TempDir()
	}
	td, err := iox.NewTempDir(filepath.Join(dir, "augloader-spool-"+filepath.Base(p)))
	if err != nil {
		return fmt.Errorf("ingest: spool for %s: %w", p, err)
	}
	f.closers = append(f.closers, func() error { td.Abort(); return nil })
	guard := &expansionGuard{r: r, f: f, key: "tar:" + p, shown: p}
	end := &endReader{r: guard}
	tr := tar.NewReader(end)
	for {
		if err := ctxErr(f.ctx); err != nil {
			return err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if end.atEOF {
				// Go's tar reader takes the end of its input at a header
				// for the end of the archive; a tar ends with two zero
				// blocks, and one without them was cut short.
				return containerErr(p, "%v: the tar ends without its end-of-archive blocks (cut short?)", ErrDamaged)
			}
			break
		}
		if err != nil {
			return containerErr(p, "not a readable tar: %v", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue // folders, links and devices are never followed
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if skipped(name) || (o.Wanted != nil && !o.Wanted(name)) {
			continue
		}
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			continue // never written outside the spool
		}
		if f.open[name] != nil {
			return containerErr(p, "the archive holds %q twice: refusing to guess which one is the dataset", name)
		}
		if len(f.entries) >= MaxEntries {
			return containerErr(p, "more than %d entries", MaxEntries)
		}
		dst := filepath.Join(td.Path, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return fmt.Errorf("ingest: spool: %w", err)
		}
		if err := spool(f.ctx, dst, tr); err != nil {
			var fe *FormatError
			if errors.As(err, &fe) || errors.Is(err, context.Canceled) {
				return err
			}
			return containerErr(p, "%s: %v", h.Name, err)
		}
		f.entries = append(f.entries, name)
		f.open[name] = func() (io.ReadCloser, error) { return iox.OpenRegular(dst) }
	}
	// The tar ends before its compressed stream does (its last record's
	// padding, the gzip trailer or the xz index): read it to the end, so a
	// file cut there is refused too.
	if kind != "tar" {
		if _, err := io.Copy(io.Discard, guard); err != nil {
			var fe *FormatError
			if errors.As(err, &fe) {
				return err
			}
			return containerErr(p, "%v after the tar's last entry (%s): %v", ErrDamaged, kind, err)
		}
	}
	if kind == "xz" {
		if err := xzFooter(p); err != nil {
			return containerErr(p, "%v: %v", ErrDamaged, err)
		}
	}
	sort.Strings(f.entries)
	return nil
}

// endReader says whether the last read of its source returned io.EOF
// with nothing: the tar reader asked for a header and got the end of its
// input.
type endReader struct {
	r     io.Reader
	atEOF bool
}

func (e *endReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.atEOF = n == 0 && err == io.EOF
	return n, err
}

// xzFooter checks that the .xz file at p ends with a stream footer (after
// any stream padding): its CRC-32 and its magic. The xz package returns a
// clean end of file when a stream is cut right after a block, before its
// index and footer.
func xzFooter(p string) error {
	fh, err := os.Open(p)
	if err != nil {
		return err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	end := st.Size()
	var tail [12]byte
	for {
		if end < 12 {
			return errors.New("xz: no stream footer")
		}
		if _, err := fh.ReadAt(tail[:], end-12); err != nil {
			return err
		}
		if end%4 == 0 && bytes.Equal(tail[8:], []byte{0, 0, 0, 0}) {
			end -= 4 // stream padding
			continue
		}
		break
	}
	if string(tail[10:]) != "YZ" || crc32.ChecksumIEEE(tail[4:10]) != binary.LittleEndian.Uint32(tail[:4]) {
		return errors.New("xz: the file does not end with a stream footer (cut short?)")
	}
	return nil
}

// GuardZipEntry opens a zip entry (the input's own, or a nested
// archive's: an .npz array, a torch.save storage) bounded in what it
// inflates to: an entry that declares more than the input's bound allows
// is refused before it is read, and one that inflates past it (its
// declared size is checked only at its end) as it does.
func (f *Files) GuardZipEntry(e *zip.File, shown string) (io.ReadCloser, error) {
	if e.Method != zip.Store {
		f.mu.Lock()
		left := f.limit.Bound(f.inputBytes) - f.inflated + f.inflatedBy["zip:"+shown]
		f.mu.Unlock()
		if int64(e.UncompressedSize64) > left {
			return nil, f.overInflated(shown, int64(e.UncompressedSize64))
		}
	}
	rc, err := e.Open()
	if err != nil {
		return nil, err
	}
	if e.Method == zip.Store {
		return rc, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{&expansionGuard{r: rc, f: f, key: "zip:" + shown, shown: shown}, rc}, nil
}

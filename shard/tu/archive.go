package tu

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/ulikunitz/xz"

	"github.com/augloader/augloader/internal/iox"
)

// openTar reads a tar (kind "tar", "gzip" or "xz" around one) in a single
// streaming pass, writing the entries that can belong to a dataset (TU
// files, GIN text candidates) into a spool folder, then opens that folder.
// Nothing of the archive is held in memory; the spool is removed by Close.
func openTar(p, kind string, o OpenOptions) (src *Source, err error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("tu: %w", err)
	}
	defer f.Close()
	var r io.Reader = bufio.NewReaderSize(f, 1<<20)
	switch kind {
	case "gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, formatErr(p, 0, 0, "gzip: %v", err)
		}
		defer zr.Close()
		r = zr
	case "xz":
		xr, err := xz.NewReader(r)
		if err != nil {
			return nil, formatErr(p, 0, 0, "xz: %v", err)
		}
		r = xr
	}
	dir := o.SpoolDir
	if dir == "" {
		dir = os.TempDir()
	}
	td, err := iox.NewTempDir(filepath.Join(dir, "augloader-spool-"+filepath.Base(p)))
	if err != nil {
		return nil, fmt.Errorf("tu: spool for %s: %w", p, err)
	}
	defer func() {
		if err != nil {
			td.Abort()
		}
	}()
	tr := tar.NewReader(r)
	seen := map[string]string{} // spooled base name → full entry name
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, formatErr(p, 0, 0, "not a readable tar: %v", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue // folders, links and devices are never followed
		}
		base := path.Base(h.Name)
		if !wanted(h.Name) {
			continue
		}
		if prev, ok := seen[base]; ok {
			return nil, formatErr(p, 0, 0, "the archive holds %q and %q: refusing to guess which one is the dataset", prev, h.Name)
		}
		seen[base] = h.Name
		if err := spool(filepath.Join(td.Path, base), tr); err != nil {
			return nil, formatErr(p, 0, 0, "%s: %v", h.Name, err)
		}
	}
	s, err := openFolder(td.Path, p, o.Name)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() error { td.Abort(); return nil })
	return s, nil
}

// wanted says whether an archive entry may be a dataset file.
func wanted(full string) bool {
	b := path.Base(full)
	if strings.HasPrefix(b, "._") || strings.Contains(full, "__MACOSX") {
		return false
	}
	for _, suf := range suffixes {
		if strings.HasSuffix(b, suf) {
			return true
		}
	}
	return ginCandidate(full)
}

func spool(dst string, r io.Reader) error {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

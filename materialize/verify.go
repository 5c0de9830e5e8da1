package materialize

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/augloader/augloader/internal/iox"
)

// Verify checks OUT: for every fold of every view, every complete epoch's
// files against their SHA-256 and every batch against its digest and
// offsets; incomplete epochs (no manifest) are reported but are not
// errors. It returns the epochs checked and the incomplete ones (their
// folders relative to OUT), and one error per problem.
func Verify(ctx context.Context, out string) (checked, incomplete []string, errs []error) {
	cfg, err := ReadConfig(out)
	if err != nil {
		return nil, nil, []error{err}
	}
	for _, v := range cfg.Views {
		for _, f := range v.Folds {
			c, inc, e := verifyDir(ctx, out, f.Dir, cfg.World)
			checked, incomplete, errs = append(checked, c...), append(incomplete, inc...), append(errs, e...)
			if ctx.Err() != nil {
				return checked, incomplete, errs
			}
		}
	}
	return checked, incomplete, errs
}

// verifyDir checks the epochs of one fold's folder (rel, relative to out).
func verifyDir(ctx context.Context, out, rel string, world int) (checked, incomplete []string, errs []error) {
	dir := filepath.Join(out, rel)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil // no epoch made yet
	}
	if err != nil {
		return nil, nil, []error{err}
	}
	var epochs []uint64
	for _, ent := range entries {
		name := ent.Name()
		if !ent.IsDir() || !strings.HasPrefix(name, "epoch-") {
			continue
		}
		e, err := strconv.ParseUint(strings.TrimPrefix(name, "epoch-"), 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("materialize: %s: not an epoch folder", filepath.Join(rel, name)))
			continue
		}
		epochs = append(epochs, e)
	}
	sort.Slice(epochs, func(i, j int) bool { return epochs[i] < epochs[j] })
	for _, e := range epochs {
		name := filepath.Join(rel, EpochDir(e))
		if err := ctx.Err(); err != nil {
			return checked, incomplete, append(errs, err)
		}
		man, err := ReadEpoch(dir, e)
		if errors.Is(err, os.ErrNotExist) {
			incomplete = append(incomplete, name)
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(man.Files) != world {
			errs = append(errs, fmt.Errorf("materialize: %s: %d files for world size %d", name, len(man.Files), world))
		}
		for i, fi := range man.Files {
			if fi.Rank != i || fi.File != FileName(i, world) {
				errs = append(errs, fmt.Errorf("materialize: %s: file %d is rank %d, %q; want rank %d, %q", name, i, fi.Rank, fi.File, i, FileName(i, world)))
				continue
			}
			if err := verifyFile(filepath.Join(dir, EpochDir(e), fi.File), fi); err != nil {
				errs = append(errs, fmt.Errorf("materialize: %s/%s: %w", name, fi.File, err))
			}
		}
		checked = append(checked, name)
	}
	return checked, incomplete, errs
}

func verifyFile(path string, fi FileInfo) error {
	f, err := iox.OpenRegular(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() != fi.Bytes {
		return fmt.Errorf("%d bytes, manifest says %d", st.Size(), fi.Bytes)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != fi.SHA256 {
		return fmt.Errorf("sha256 %s, manifest says %s", got, fi.SHA256)
	}
	if got, err := sectionDigest(f, 0, fi.SchemaBytes); err != nil {
		return err
	} else if got != fi.SchemaSHA256 {
		return fmt.Errorf("schema message: sha256 %s, manifest says %s", got, fi.SchemaSHA256)
	}
	graphs := 0
	next := fi.SchemaBytes
	for i, b := range fi.Batches {
		if b.Offset != next {
			return fmt.Errorf("batch %d at offset %d, want %d", i, b.Offset, next)
		}
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(f, b.Offset, b.Bytes)); err != nil {
			return err
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != b.SHA256 {
			return fmt.Errorf("batch %d: sha256 %s, manifest says %s", i, got, b.SHA256)
		}
		if b.Graphs < 1 {
			return fmt.Errorf("batch %d: %d graphs", i, b.Graphs)
		}
		graphs += b.Graphs
		next += b.Bytes
	}
	for _, b := range fi.OverBudget {
		if b < 0 || b >= len(fi.Batches) || fi.Batches[b].Graphs != 1 {
			return fmt.Errorf("over_budget lists batch %d, which is not a batch of one graph", b)
		}
	}
	if graphs != fi.Graphs {
		return fmt.Errorf("batches hold %d graphs, manifest says %d", graphs, fi.Graphs)
	}
	if next+8 != fi.Bytes {
		return fmt.Errorf("batches end at %d, the end-of-stream marker should follow at %d", next, fi.Bytes-8)
	}
	return nil
}

package materialize

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/internal/ipcframe"
	"github.com/augloader/augloader/server"
	"github.com/augloader/augloader/wire"
)

// Verify checks OUT: every complete epoch's files against their SHA-256 and
// every batch against its digest and offsets; incomplete epochs (no
// manifest) are reported but are not errors. It returns the epochs checked
// and one error per problem.
func Verify(ctx context.Context, out string) (checked []uint64, incomplete []string, errs []error) {
	cfg, err := ReadConfig(out)
	if err != nil {
		return nil, nil, []error{err}
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		return nil, nil, []error{err}
	}
	for _, ent := range entries {
		name := ent.Name()
		if !ent.IsDir() || !strings.HasPrefix(name, "epoch-") {
			continue
		}
		e, err := strconv.ParseUint(strings.TrimPrefix(name, "epoch-"), 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("materialize: %s: not an epoch folder", name))
			continue
		}
		if err := ctx.Err(); err != nil {
			return checked, incomplete, append(errs, err)
		}
		man, err := ReadEpoch(out, e)
		if errors.Is(err, os.ErrNotExist) {
			incomplete = append(incomplete, name)
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(man.Files) != cfg.World {
			errs = append(errs, fmt.Errorf("materialize: %s: %d files for world size %d", name, len(man.Files), cfg.World))
		}
		for _, fi := range man.Files {
			if err := verifyFile(filepath.Join(out, name, fi.File), fi); err != nil {
				errs = append(errs, fmt.Errorf("materialize: %s/%s: %w", name, fi.File, err))
			}
		}
		checked = append(checked, e)
	}
	sort.Slice(checked, func(i, j int) bool { return checked[i] < checked[j] })
	return checked, incomplete, errs
}

func verifyFile(path string, fi FileInfo) error {
	f, err := os.Open(path)
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
		next += b.Bytes
	}
	if next+8 != fi.Bytes {
		return fmt.Errorf("batches end at %d, the end-of-stream marker should follow at %d", next, fi.Bytes-8)
	}
	return nil
}

// Replay serves materialized epochs over the socket protocol: the same
// bytes the live server sends for the same request.
type Replay struct {
	Out string
	cfg *Config
}

// OpenReplay checks OUT's configuration.
func OpenReplay(out string) (*Replay, error) {
	cfg, err := ReadConfig(out)
	if err != nil {
		return nil, err
	}
	return &Replay{Out: out, cfg: cfg}, nil
}

// Config returns what the epochs were made with.
func (r *Replay) Config() *Config { return r.cfg }

// Open implements server.Source.
func (r *Replay) Open(req wire.Request) (server.Stream, error) {
	world := max(req.World, 1)
	if world != r.cfg.World {
		return nil, fmt.Errorf("%w: world size %d, the epochs were materialized for %d", epoch.ErrRange, world, r.cfg.World)
	}
	if req.BatchSize != 0 && req.BatchSize != r.cfg.BatchSize {
		return nil, fmt.Errorf("%w: batch size %d, the epochs were materialized with %d", epoch.ErrRange, req.BatchSize, r.cfg.BatchSize)
	}
	if req.Rank < 0 || req.Rank >= world {
		return nil, fmt.Errorf("%w: rank %d of world size %d", epoch.ErrRange, req.Rank, world)
	}
	man, err := ReadEpoch(r.Out, req.Epoch)
	if err != nil {
		return nil, fmt.Errorf("%w: epoch %d is not materialized", epoch.ErrRange, req.Epoch)
	}
	var fi *FileInfo
	for i := range man.Files {
		if man.Files[i].Rank == req.Rank {
			fi = &man.Files[i]
		}
	}
	if fi == nil {
		return nil, fmt.Errorf("materialize: epoch %d has no file for rank %d", req.Epoch, req.Rank)
	}
	if req.StartBatch > len(fi.Batches) {
		return nil, fmt.Errorf("%w: start batch %d, the rank has %d batches", epoch.ErrRange, req.StartBatch, len(fi.Batches))
	}
	return &replayStream{path: filepath.Join(r.Out, EpochDir(req.Epoch), fi.File), fi: fi, req: req, dataset: r.cfg.Dataset}, nil
}

type replayStream struct {
	path    string
	fi      *FileInfo
	req     wire.Request
	dataset string
}

func (s *replayStream) Info() wire.Response {
	g := 0
	for _, b := range s.fi.Batches[s.req.StartBatch:] {
		g += b.Graphs
	}
	return wire.Response{Dataset: s.dataset, Epoch: s.req.Epoch, Batches: len(s.fi.Batches) - s.req.StartBatch,
		TotalBatches: len(s.fi.Batches), Graphs: g}
}

// WriteTo sends the schema message, the batches from StartBatch on, and the
// end-of-stream marker, copied from the file.
func (s *replayStream) WriteTo(ctx context.Context, w io.Writer) (int, int, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := io.Copy(bw, io.NewSectionReader(f, 0, s.fi.SchemaBytes)); err != nil {
		return 0, 0, err
	}
	batches, graphs := 0, 0
	buf := make([]byte, 0, 1<<20)
	for i, b := range s.fi.Batches[s.req.StartBatch:] {
		if err := ctx.Err(); err != nil {
			bw.Write(ipcframe.EOS)
			bw.Flush()
			return batches, graphs, err
		}
		// Read the batch whole and check its SHA-256 before sending a byte
		// of it: a file damaged on disk fails this request, naming it.
		buf = slices.Grow(buf[:0], int(b.Bytes))[:b.Bytes]
		if _, err := f.ReadAt(buf, b.Offset); err != nil {
			bw.Write(ipcframe.EOS)
			bw.Flush()
			return batches, graphs, fmt.Errorf("materialize: %s: batch %d: %w", s.path, s.req.StartBatch+i, err)
		}
		if sum := sha256.Sum256(buf); hex.EncodeToString(sum[:]) != b.SHA256 {
			bw.Write(ipcframe.EOS)
			bw.Flush()
			return batches, graphs, fmt.Errorf("materialize: %s: batch %d fails its SHA-256: the file is corrupt (run augloader verify)", s.path, s.req.StartBatch+i)
		}
		if _, err := bw.Write(buf); err != nil {
			return batches, graphs, err
		}
		if err := bw.Flush(); err != nil {
			return batches, graphs, err
		}
		batches++
		graphs += b.Graphs
	}
	if _, err := bw.Write(ipcframe.EOS); err != nil {
		return batches, graphs, err
	}
	return batches, graphs, bw.Flush()
}

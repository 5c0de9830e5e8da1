package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/internal/ipcframe"
	"github.com/augloader/augloader/materialize"
	"github.com/augloader/augloader/wire"
)

// Replay serves epochs materialized to disk (package materialize): the
// same bytes the live loader sends for the same request.
type Replay struct {
	Out string
	cfg *materialize.Config
}

// OpenReplay checks OUT's configuration.
func OpenReplay(out string) (*Replay, error) {
	cfg, err := materialize.ReadConfig(out)
	if err != nil {
		return nil, err
	}
	return &Replay{Out: out, cfg: cfg}, nil
}

// Config returns what the epochs were made with.
func (r *Replay) Config() *materialize.Config { return r.cfg }

// Open implements Source.
func (r *Replay) Open(req wire.Request) (Stream, error) {
	world := max(req.World, 1)
	if world != r.cfg.World {
		return nil, fmt.Errorf("%w: world size %d, the epochs were materialized for %d", epoch.ErrRange, world, r.cfg.World)
	}
	if req.BatchSize != 0 && req.BatchSize != r.cfg.Stream.BatchSize {
		return nil, fmt.Errorf("%w: batch size %d, the epochs were materialized with %d", epoch.ErrRange, req.BatchSize, r.cfg.Stream.BatchSize)
	}
	if req.Rank < 0 || req.Rank >= world {
		return nil, fmt.Errorf("%w: rank %d of world size %d", epoch.ErrRange, req.Rank, world)
	}
	man, err := materialize.ReadEpoch(r.Out, req.Epoch)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: epoch %d is not materialized", epoch.ErrRange, req.Epoch)
	}
	if err != nil {
		return nil, err // a damaged or edited manifest: internal, naming it
	}
	var fi *materialize.FileInfo
	for i := range man.Files {
		if man.Files[i].Rank == req.Rank {
			fi = &man.Files[i]
		}
	}
	if fi == nil {
		return nil, fmt.Errorf("server: %s: epoch %d has no file for rank %d", r.Out, req.Epoch, req.Rank)
	}
	if req.StartBatch > len(fi.Batches) {
		return nil, fmt.Errorf("%w: start batch %d, the rank has %d batches", epoch.ErrRange, req.StartBatch, len(fi.Batches))
	}
	st := &replayStream{path: filepath.Join(r.Out, materialize.EpochDir(req.Epoch), fi.File), fi: fi, req: req, cfg: r.cfg.Stream}
	if st.schemaMsg, st.schema, err = readSchema(st.path, fi); err != nil {
		return nil, err
	}
	return st, nil
}

// readSchema reads the schema message opening a materialized stream,
// checks it against its digest (a damaged schema would otherwise reach
// the client as a valid stream with a wrong column name or count) and
// decodes it.
func readSchema(path string, fi *materialize.FileInfo) ([]byte, *arrow.Schema, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("server: %w", err)
	}
	defer f.Close()
	msg := make([]byte, fi.SchemaBytes)
	if _, err := f.ReadAt(msg, 0); err != nil {
		return nil, nil, fmt.Errorf("server: %s: schema message: %w", path, err)
	}
	if sum := sha256.Sum256(msg); hex.EncodeToString(sum[:]) != fi.SchemaSHA256 {
		return nil, nil, fmt.Errorf("server: %s: the schema message fails its SHA-256: the file is corrupt (run augloader verify)", path)
	}
	ir, err := ipc.NewReader(io.MultiReader(bytes.NewReader(msg), bytes.NewReader(ipcframe.EOS)))
	if err != nil {
		return nil, nil, fmt.Errorf("server: %s: schema: %w", path, err)
	}
	defer ir.Release()
	return msg, ir.Schema(), nil
}

type replayStream struct {
	schema    *arrow.Schema
	schemaMsg []byte // checked against its digest
	path      string
	fi        *materialize.FileInfo
	req       wire.Request
	cfg       wire.Config
}

func (s *replayStream) Info() wire.Response {
	g := 0
	for _, b := range s.fi.Batches[s.req.StartBatch:] {
		g += b.Graphs
	}
	return wire.Response{Dataset: s.cfg.Dataset, Epoch: s.req.Epoch, Batches: len(s.fi.Batches) - s.req.StartBatch,
		TotalBatches: len(s.fi.Batches), Graphs: g, Config: &s.cfg}
}

func (s *replayStream) Schema() *arrow.Schema { return s.schema }

// WriteTo sends the schema message, the batches from StartBatch on, and the
// end-of-stream marker, copied from the file.
func (s *replayStream) WriteTo(ctx context.Context, w io.Writer) (int, int, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := bw.Write(s.schemaMsg); err != nil {
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
			return batches, graphs, fmt.Errorf("server: %s: batch %d: %w", s.path, s.req.StartBatch+i, err)
		}
		if sum := sha256.Sum256(buf); hex.EncodeToString(sum[:]) != b.SHA256 {
			bw.Write(ipcframe.EOS)
			bw.Flush()
			return batches, graphs, fmt.Errorf("server: %s: batch %d fails its SHA-256: the file is corrupt (run augloader verify)", s.path, s.req.StartBatch+i)
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

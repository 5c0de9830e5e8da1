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
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/internal/iox"
	"github.com/augloader/augloader/internal/ipcframe"
	"github.com/augloader/augloader/materialize"
	"github.com/augloader/augloader/wire"
)

// Replay serves epochs materialized to disk (package materialize): for
// every request field it honours, the bytes a live daemon of the same
// configuration sends — views and folds, start batch, stride and count
// (one of several replay daemons, a DataLoader worker), drop_last, and
// batches_per_epoch (passes stitched from materialized epochs, when the
// schedule is the same in every epoch and no node or edge budget shapes
// the batches). What it cannot honour it refuses, saying why: another
// world size or batch size, an epoch (or a pass) not materialized, a view
// or fold the folder does not have.
type Replay struct {
	Out   string
	cfg   *materialize.Config
	views map[string]*replayView
	def   string
}

type replayView struct {
	name    string
	perFold bool
	folds   []*replayFold
}

// replayFold is one fold's materialized epochs.
type replayFold struct {
	dir   string // its epochs' folder
	id    wire.Config
	world int
	// stitch: batches_per_epoch can be served (a constant schedule, no
	// budgets); why says why not.
	stitch bool
	why    string
}

// OpenReplay checks OUT's configuration.
func OpenReplay(out string) (*Replay, error) {
	cfg, err := materialize.ReadConfig(out)
	if err != nil {
		return nil, err
	}
	r := &Replay{Out: out, cfg: cfg, views: map[string]*replayView{}}
	for _, v := range cfg.Views {
		rv := &replayView{name: v.Name, perFold: v.PerFold}
		for _, f := range v.Folds {
			rf := &replayFold{dir: filepath.Join(out, f.Dir), id: f.Config, world: cfg.World}
			sched, err := epoch.ParseSchedule(f.Config.Schedule)
			switch {
			case err != nil:
				return nil, fmt.Errorf("server: %s: schedule %q: %w", out, f.Config.Schedule, err)
			case !sched.Constant():
				rf.why = fmt.Sprintf("the schedule %s changes with the epoch", f.Config.Schedule)
			case f.Config.NodeBudget > 0 || f.Config.EdgeBudget > 0:
				rf.why = "a node or edge budget shapes the batches (a pass's batches then depend on the schedule's largest bound)"
			default:
				rf.stitch = true
			}
			rv.folds = append(rv.folds, rf)
		}
		r.views[v.Name] = rv
		if v.Default || len(cfg.Views) == 1 {
			r.def = v.Name
		}
	}
	return r, nil
}

// Config returns what the epochs were made with.
func (r *Replay) Config() *materialize.Config { return r.cfg }

func (r *Replay) names() string {
	var n []string
	for name := range r.views {
		n = append(n, name)
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}

// Open implements Source.
func (r *Replay) Open(req wire.Request) (Stream, error) {
	name := req.View
	if name == "" {
		name = r.def
	}
	v := r.views[name]
	switch {
	case v == nil && name == "":
		return nil, &wire.Error{Code: wire.CodeOutOfRange, Message: fmt.Sprintf("a view is required: the materialized epochs hold several views (%s) and none is the default; name one", r.names())}
	case v == nil && len(r.views) == 1 && r.views[""] != nil:
		return nil, fmt.Errorf("%w: the materialized epochs have no views (view %q asked)", epoch.ErrRange, req.View)
	case v == nil:
		return nil, &wire.Error{Code: wire.CodeOutOfRange, Message: fmt.Sprintf("no view %q: the materialized epochs hold %s", req.View, r.names())}
	case req.Fold < 0 || req.Fold >= len(v.folds):
		if !v.perFold {
			return nil, fmt.Errorf("%w: view %q has no folds (fold %d asked)", epoch.ErrRange, v.name, req.Fold)
		}
		return nil, fmt.Errorf("%w: fold %d of view %q (the materialized epochs hold %d)", epoch.ErrRange, req.Fold, v.name, len(v.folds))
	}
	return v.folds[req.Fold].open(req)
}

// batchRef is one batch of a stream: where it is stored.
type batchRef struct {
	epoch uint64 // the materialized epoch (the pass) holding it
	index int    // its index in that epoch's rank file
	path  string
	info  materialize.BatchInfo
}

// open plans req exactly as loader.Plan would: the rank's batches of the
// epoch (one pass, or batches_per_epoch batches from consecutive passes,
// each pass dropping its short last batch with drop_last), then from
// start_batch every stride-th, at most count.
func (f *replayFold) open(req wire.Request) (Stream, error) {
	world := max(req.World, 1)
	bs := f.id.BatchSize
	switch {
	case world != f.world:
		return nil, fmt.Errorf("%w: world size %d, the epochs were materialized for %d", epoch.ErrRange, world, f.world)
	case req.BatchSize != 0 && req.BatchSize != bs:
		return nil, fmt.Errorf("%w: batch size %d, the epochs were materialized with %d", epoch.ErrRange, req.BatchSize, bs)
	case req.Rank < 0 || req.Rank >= world:
		return nil, fmt.Errorf("%w: rank %d of world size %d", epoch.ErrRange, req.Rank, world)
	case req.BatchesPerEpoch < 0 || req.StartBatch < 0 || req.Stride < 0 || req.Count < 0:
		return nil, fmt.Errorf("%w: negative batches_per_epoch, start_batch, stride or count", epoch.ErrRange)
	case len(req.Resume) > 0:
		return nil, fmt.Errorf("%w: resume phases: materialized epochs were cut for %d ranks and replay at that world size only (start_batch); serve the shards to resume at another world size", epoch.ErrRange, f.world)
	case req.Twins > 0:
		return nil, fmt.Errorf("%w: twins %d: materialized epochs hold one copy of each graph; serve the shards (--twins) for twin streams", epoch.ErrRange, req.Twins)
	case req.BatchesPerEpoch > 0 && !f.stitch:
		return nil, fmt.Errorf("%w: batches_per_epoch cannot be replayed from these epochs: %s; materialize and request whole epochs instead", epoch.ErrRange, f.why)
	}
	files := map[uint64]*materialize.FileInfo{}
	file := func(e uint64) (*materialize.FileInfo, error) {
		if fi := files[e]; fi != nil {
			return fi, nil
		}
		man, err := materialize.ReadEpoch(f.dir, e)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: epoch %d is not materialized", epoch.ErrRange, e)
		}
		if err != nil {
			return nil, err // a damaged or edited manifest: internal, naming it
		}
		for i := range man.Files {
			if man.Files[i].Rank == req.Rank {
				files[e] = &man.Files[i]
				return files[e], nil
			}
		}
		return nil, fmt.Errorf("server: %s: epoch %d has no file for rank %d", f.dir, e, req.Rank)
	}
	// perPass: the batches of a pass that a request keeps (drop_last drops
	// a short last one; every pass has the same sizes).
	perPass := func(fi *materialize.FileInfo) int {
		n := len(fi.Batches)
		if req.DropLast && n > 0 && fi.Batches[n-1].Graphs < bs {
			n--
		}
		return n
	}
	var all []batchRef // the rank's whole epoch
	add := func(e uint64, fi *materialize.FileInfo, i int) {
		all = append(all, batchRef{epoch: e, index: i, info: fi.Batches[i],
			path: filepath.Join(f.dir, materialize.EpochDir(e), fi.File)})
	}
	var schemaFrom *materialize.FileInfo
	var schemaEpoch uint64
	if req.BatchesPerEpoch == 0 {
		fi, err := file(req.Epoch)
		if err != nil {
			return nil, err
		}
		for i := range perPass(fi) {
			add(req.Epoch, fi, i)
		}
		schemaFrom, schemaEpoch = fi, req.Epoch
	} else {
		B := uint64(req.BatchesPerEpoch)
		if req.Epoch > (1<<62)/B {
			return nil, fmt.Errorf("%w: epoch %d with %d batches per epoch", epoch.ErrRange, req.Epoch, B)
		}
		// Every pass has the same batches for the rank (no budgets): any
		// materialized pass says how many.
		probe, err := f.anyEpoch(file)
		if err != nil {
			return nil, err
		}
		per := uint64(perPass(probe))
		if per == 0 {
			return nil, fmt.Errorf("%w: a pass of the served set holds no full batch for rank %d of %d", epoch.ErrRange, req.Rank, world)
		}
		first := req.Epoch * B // the epoch's first batch in the endless sequence of passes
		for g := first; g < first+B; g++ {
			pass := g / per
			fi, err := file(pass)
			if err != nil {
				return nil, fmt.Errorf("%w (batches_per_epoch %d: epoch %d needs pass %d)", err, B, req.Epoch, pass)
			}
			if uint64(perPass(fi)) != per {
				return nil, fmt.Errorf("server: %s: epoch %d has %d batches for rank %d, another epoch %d", f.dir, pass, perPass(fi), req.Rank, per)
			}
			add(pass, fi, int(g%per))
			if schemaFrom == nil {
				schemaFrom, schemaEpoch = fi, pass
			}
		}
	}
	if req.StartBatch > len(all) {
		return nil, fmt.Errorf("%w: start batch %d, the rank has %d batches", epoch.ErrRange, req.StartBatch, len(all))
	}
	st := &replayStream{req: req, id: f.id, total: len(all)}
	stride := max(req.Stride, 1)
	for bi := req.StartBatch; bi < len(all) && (req.Count == 0 || len(st.batches) < req.Count); bi += stride {
		st.batches = append(st.batches, all[bi])
		if req.BatchesPerEpoch == 0 && slices.Contains(schemaFrom.OverBudget, all[bi].index) {
			st.overBudget = append(st.overBudget, bi)
		}
		st.graphs += all[bi].info.Graphs
	}
	path := filepath.Join(f.dir, materialize.EpochDir(schemaEpoch), schemaFrom.File)
	msg, schema, err := readSchema(path, schemaFrom)
	if err != nil {
		return nil, err
	}
	if schemaEpoch != req.Epoch {
		// A stitched epoch's schema says the requested epoch, as the live
		// stream's does: re-encode the stored one with it.
		if schema, err = withEpoch(schema, req.Epoch); err != nil {
			return nil, fmt.Errorf("server: %s: %w", path, err)
		}
		if msg, err = schemaMessage(schema); err != nil {
			return nil, fmt.Errorf("server: %s: %w", path, err)
		}
	}
	st.schemaMsg, st.schema = msg, schema
	return st, nil
}

// anyEpoch returns the rank file of the lowest materialized epoch.
func (f *replayFold) anyEpoch(file func(uint64) (*materialize.FileInfo, error)) (*materialize.FileInfo, error) {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	var epochs []uint64
	for _, ent := range entries {
		if e, err := strconv.ParseUint(strings.TrimPrefix(ent.Name(), "epoch-"), 10, 64); err == nil && strings.HasPrefix(ent.Name(), "epoch-") {
			if _, err := os.Stat(filepath.Join(f.dir, ent.Name(), materialize.ManifestName)); err == nil {
				epochs = append(epochs, e)
			}
		}
	}
	if len(epochs) == 0 {
		return nil, fmt.Errorf("%w: no epoch is materialized", epoch.ErrRange)
	}
	return file(slices.Min(epochs))
}

// withEpoch is schema with its augloader.epoch metadata set to e.
func withEpoch(schema *arrow.Schema, e uint64) (*arrow.Schema, error) {
	md := schema.Metadata()
	i := md.FindKey(wire.MetaEpoch)
	if i < 0 {
		return nil, fmt.Errorf("the schema has no %s", wire.MetaEpoch)
	}
	vals := slices.Clone(md.Values())
	vals[i] = strconv.FormatUint(e, 10)
	nm := arrow.NewMetadata(md.Keys(), vals)
	return arrow.NewSchema(schema.Fields(), &nm), nil
}

// schemaMessage encodes schema's IPC message as the loader's stream
// writer does (ipc.Writer: the same encoder, the same options).
func schemaMessage(schema *arrow.Schema) ([]byte, error) {
	var b bytes.Buffer
	w := ipc.NewWriter(&b, ipc.WithSchema(schema))
	if err := w.Close(); err != nil {
		return nil, err
	}
	msg := b.Bytes()
	if !bytes.HasSuffix(msg, ipcframe.EOS) {
		return nil, errors.New("schema message: no end-of-stream marker after it")
	}
	return msg[:len(msg)-len(ipcframe.EOS)], nil
}

// readSchema reads the schema message opening a materialized stream,
// checks it against its digest (a damaged schema would otherwise reach
// the client as a valid stream with a wrong column name or count) and
// decodes it.
func readSchema(path string, fi *materialize.FileInfo) ([]byte, *arrow.Schema, error) {
	f, err := iox.OpenRegular(path)
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
	schema     *arrow.Schema
	schemaMsg  []byte // checked against its digest, or re-encoded from one that was
	req        wire.Request
	id         wire.Config
	batches    []batchRef
	total      int   // batches of the rank's whole epoch
	graphs     int   // in batches
	overBudget []int // indices in the rank's epoch
}

func (s *replayStream) Info() wire.Response {
	id := s.id
	return wire.Response{Dataset: s.id.Dataset, Epoch: s.req.Epoch, Batches: len(s.batches),
		TotalBatches: s.total, Graphs: s.graphs, OverBudget: s.overBudget, Config: &id}
}

func (s *replayStream) Schema() *arrow.Schema { return s.schema }

// MaxMessageBytes is the stream's largest IPC message.
func (s *replayStream) MaxMessageBytes() int64 {
	n := int64(len(s.schemaMsg))
	for _, b := range s.batches {
		n = max(n, b.info.Bytes)
	}
	return n
}

// WriteTo sends the schema message, the planned batches and the
// end-of-stream marker, copied from the files.
func (s *replayStream) WriteTo(ctx context.Context, w io.Writer) (int, int, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := bw.Write(s.schemaMsg); err != nil {
		return 0, 0, err
	}
	var (
		f       *os.File
		open    string
		batches int
		graphs  int
		buf     = make([]byte, 0, 1<<20)
	)
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	cut := func(err error) (int, int, error) {
		bw.Write(ipcframe.EOS)
		bw.Flush()
		return batches, graphs, err
	}
	for _, b := range s.batches {
		if err := ctx.Err(); err != nil {
			return cut(err)
		}
		if b.path != open {
			if f != nil {
				f.Close()
			}
			var err error
			if f, err = iox.OpenRegular(b.path); err != nil {
				f = nil
				return cut(fmt.Errorf("server: %w", err))
			}
			open = b.path
		}
		// Read the batch whole and check its SHA-256 before sending a byte
		// of it: a file damaged on disk fails this request, naming it.
		buf = slices.Grow(buf[:0], int(b.info.Bytes))[:b.info.Bytes]
		if _, err := f.ReadAt(buf, b.info.Offset); err != nil {
			return cut(fmt.Errorf("server: %s: batch %d: %w", b.path, b.index, err))
		}
		if sum := sha256.Sum256(buf); hex.EncodeToString(sum[:]) != b.info.SHA256 {
			return cut(fmt.Errorf("server: %s: batch %d fails its SHA-256: the file is corrupt (run augloader verify)", b.path, b.index))
		}
		if _, err := bw.Write(buf); err != nil {
			return batches, graphs, err
		}
		if err := bw.Flush(); err != nil {
			return batches, graphs, err
		}
		batches++
		graphs += b.info.Graphs
	}
	if _, err := bw.Write(ipcframe.EOS); err != nil {
		return batches, graphs, err
	}
	return batches, graphs, bw.Flush()
}

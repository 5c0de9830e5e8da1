// Package materialize writes augmented epochs to disk, verifies them, and
// replays them over the socket protocol byte for byte.
//
// Layout of OUT (format 3; docs/protocol.md, "Materialized epochs"):
//
//	materialize.json                       configuration: world, and per view and fold its folder and identity
//	epoch-000042/rank-000-of-002.arrows    the Arrow IPC stream rank 0 of 2 would receive live (a folder made without views)
//	epoch-000042/manifest.json             per file: bytes, SHA-256; per batch: offset, bytes, graphs, SHA-256
//	view-train/fold-03/epoch-000042/...    the same for fold 3 of view train (--view/--folds)
//	view-all/epoch-000042/...              a view without folds
//
// Contract: a file is written under a temporary name, fsynced and renamed;
// an epoch's manifest.json is written last (same way), so an epoch without
// one is incomplete and a rerun redoes it; a rerun skips complete epochs.
// The files are exactly the live stream's bytes, so replay is a copy.
// Format 2 folders (one configuration, no views) are read as one unnamed
// view.
package materialize

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/augloader/augloader/internal/iox"
	"github.com/augloader/augloader/internal/jsonseal"
	"github.com/augloader/augloader/internal/version"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/wire"
)

// Format constants (docs/protocol.md, "Materialized epochs").
const (
	ConfigName   = "materialize.json"
	ManifestName = "manifest.json"
	FormatName   = "augloader-epochs"
	// Version 3 holds views and folds, each in a folder of its own with its
	// own identity. Version 2 (one identity, epochs directly in OUT) is
	// still read; version 1 is refused (rerun with --force to redo it).
	Version = 3
	// MinVersion is the oldest format this build reads.
	MinVersion = 2
)

// Config is materialize.json: what the epochs were made from.
type Config struct {
	Format        string `json:"format"`
	FormatVersion int    `json:"format_version"`
	ToolVersion   string `json:"tool_version"`
	World         int    `json:"world"`
	// Stream is format 2's single identity (a format 3 folder keeps each
	// fold's in Views); ReadConfig turns it into one unnamed view.
	Stream *wire.Config `json:"config,omitempty"`
	// Views are the materialized views, in the order given.
	Views    []ViewInfo `json:"views,omitempty"`
	Checksum string     `json:"checksum"`
}

// ViewInfo is one materialized view.
type ViewInfo struct {
	// Name is "" for the one view of a folder made without --view.
	Name    string `json:"name"`
	Set     string `json:"set"` // all, training or test
	PerFold bool   `json:"per_fold,omitempty"`
	Default bool   `json:"default,omitempty"`
	// Folds[i] is fold i (a single one for a view without folds).
	Folds []FoldInfo `json:"folds"`
}

// FoldInfo is one fold of a view: where its epochs are and what made them.
type FoldInfo struct {
	// Dir holds the fold's epoch folders, relative to OUT ("" for OUT).
	Dir string `json:"dir"`
	// Config is the identity of the configuration every file of the fold
	// was made with (seed, canonical schedule, batch size, budgets,
	// remainder, served-set and shards digests): a rerun with any other is
	// refused.
	Config wire.Config `json:"config"`
}

// ChecksumField implements jsonseal.Sealed.
func (c *Config) ChecksumField() *string { return &c.Checksum }

// Dataset is the dataset the epochs were made from.
func (c *Config) Dataset() string { return c.Views[0].Folds[0].Config.Dataset }

// FoldDir is the folder of a view's fold, relative to OUT: OUT itself for
// the unnamed view, view-NAME for a view without folds, view-NAME/fold-NN
// (NN as wide as the last fold's number, at least two digits) per fold.
func FoldDir(view string, perFold bool, fold, folds int) string {
	switch {
	case view == "":
		return ""
	case !perFold:
		return "view-" + view
	}
	w := max(2, len(fmt.Sprint(folds-1)))
	return filepath.Join("view-"+view, fmt.Sprintf("fold-%0*d", w, fold))
}

// EpochManifest is epoch-NNNNNN/manifest.json.
type EpochManifest struct {
	Epoch    uint64     `json:"epoch"`
	Files    []FileInfo `json:"files"`
	Checksum string     `json:"checksum"`
}

// ChecksumField implements jsonseal.Sealed.
func (m *EpochManifest) ChecksumField() *string { return &m.Checksum }

// FileInfo describes one rank's stream file.
type FileInfo struct {
	Rank        int    `json:"rank"`
	File        string `json:"file"`
	Bytes       int64  `json:"bytes"`
	SHA256      string `json:"sha256"`
	SchemaBytes int64  `json:"schema_bytes"` // the schema message opening the stream
	// SchemaSHA256 is the schema message's digest: replay checks it before
	// sending a byte, as it checks every batch's.
	SchemaSHA256 string      `json:"schema_sha256"`
	Graphs       int         `json:"graphs"`
	Batches      []BatchInfo `json:"batches"`
	// OverBudget lists the batches (indices in the file) made of one graph
	// that may alone exceed the node or edge budget: the live response's
	// over_budget, which replay gives too.
	OverBudget []int `json:"over_budget,omitempty"`
}

// BatchInfo locates one record batch message in its file.
type BatchInfo struct {
	Offset int64  `json:"offset"`
	Bytes  int64  `json:"bytes"`
	Graphs int    `json:"graphs"`
	SHA256 string `json:"sha256"`
}

// Options configure Run.
type Options struct {
	// Views are materialized, every fold of every view; nil: Loader alone,
	// as one unnamed view.
	Views    *loader.Views
	Loader   *loader.Loader
	Out      string
	From, To uint64 // epochs [From, To)
	World    int    // default 1
	Force    bool   // redo an OUT made with another configuration (all its epochs are removed)
	Logger   *slog.Logger
}

// Run materializes epochs [From, To) for every rank of every fold of
// every view, epoch by epoch, skipping complete ones.
func Run(ctx context.Context, o Options) error {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.World <= 0 {
		o.World = 1
	}
	if o.Views == nil {
		if o.Loader == nil {
			return errors.New("materialize: no loader and no views")
		}
		o.Views = loader.Single(o.Loader)
	}
	if o.To <= o.From {
		return fmt.Errorf("materialize: empty epoch range %d:%d", o.From, o.To)
	}
	cfg := Config{Format: FormatName, FormatVersion: Version, ToolVersion: version.Version, World: o.World}
	type fold struct {
		l   *loader.Loader
		dir string
		tag []any // for the log
	}
	var folds []fold
	for _, v := range o.Views.List() {
		vi := ViewInfo{Name: v.Name, Set: v.Set, PerFold: v.PerFold, Default: v.Name != "" && v.Name == o.Views.Default}
		for i, l := range v.Folds {
			dir := FoldDir(v.Name, v.PerFold, i, len(v.Folds))
			vi.Folds = append(vi.Folds, FoldInfo{Dir: dir, Config: l.Identity()})
			var tag []any
			if v.Name != "" {
				tag = append(tag, "view", v.Name)
			}
			if v.PerFold {
				tag = append(tag, "fold", i)
			}
			folds = append(folds, fold{l: l, dir: filepath.Join(o.Out, dir), tag: tag})
		}
		cfg.Views = append(cfg.Views, vi)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return fmt.Errorf("materialize: %w", err)
	}
	switch old, err := ReadConfig(o.Out); {
	case errors.Is(err, os.ErrNotExist):
		if err := removeEpochs(o.Out); err != nil { // epochs without a config are nobody's
			return err
		}
	case err != nil && !o.Force:
		return fmt.Errorf("%w (use --force to redo the folder)", err)
	case err != nil || configDiff(old, &cfg) != "":
		if !o.Force {
			return fmt.Errorf("materialize: %s was made with another configuration (the folder's vs this run's): %s; use --force to redo it", o.Out, configDiff(old, &cfg))
		}
		log.Warn("--force: removing the epochs made with another configuration", "out", o.Out)
		if err := removeEpochs(o.Out); err != nil {
			return err
		}
	}
	if err := writeSealed(filepath.Join(o.Out, ConfigName), &cfg); err != nil {
		return err
	}
	for e := o.From; e < o.To; e++ {
		for _, f := range folds {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("materialize: interrupted before epoch %d: %w", e, err)
			}
			dir := filepath.Join(f.dir, EpochDir(e))
			if _, err := os.Stat(filepath.Join(dir, ManifestName)); err == nil {
				log.Info("epoch already complete, skipped", append([]any{"epoch", e}, f.tag...)...)
				continue
			}
			t := time.Now()
			man, err := writeEpoch(ctx, f.l, o.World, e, dir)
			if err != nil {
				return err
			}
			var bytes int64
			var graphs int
			for _, fi := range man.Files {
				bytes += fi.Bytes
				graphs += fi.Graphs
			}
			secs := time.Since(t).Seconds()
			log.Info("epoch materialized", append(append([]any{"epoch", e}, f.tag...), "ranks", o.World, "graphs", graphs,
				"MB", float64(bytes)/1e6, "seconds", secs, "graphs_per_s", float64(graphs)/max(secs, 1e-9))...)
		}
	}
	return nil
}

// EpochDir names an epoch's folder.
func EpochDir(e uint64) string { return fmt.Sprintf("epoch-%06d", e) }

// FileName names a rank's stream file.
func FileName(rank, world int) string { return fmt.Sprintf("rank-%03d-of-%03d.arrows", rank, world) }

// configDiff names how cur differs from old ("" when it does not): the
// world size, the views, and each fold's identity (wire.Config.Diff).
func configDiff(old, cur *Config) string {
	var d []string
	if old.World != cur.World {
		d = append(d, fmt.Sprintf("world %d vs %d", old.World, cur.World))
	}
	name := func(v ViewInfo) string {
		if v.Name == "" {
			return "the served set"
		}
		return "view " + v.Name
	}
	if len(old.Views) != len(cur.Views) {
		return strings.Join(append(d, fmt.Sprintf("%d views vs %d", len(old.Views), len(cur.Views))), "; ")
	}
	for i, a := range old.Views {
		b := cur.Views[i]
		switch {
		case a.Name != b.Name:
			d = append(d, fmt.Sprintf("%s vs %s", name(a), name(b)))
		case a.Set != b.Set || a.PerFold != b.PerFold || len(a.Folds) != len(b.Folds):
			d = append(d, fmt.Sprintf("%s: %s set, %d folds vs %s set, %d folds", name(a), a.Set, len(a.Folds), b.Set, len(b.Folds)))
		default:
			for f := range a.Folds {
				if diff := a.Folds[f].Config.Diff(b.Folds[f].Config); len(diff) > 0 {
					where := name(a)
					if a.PerFold {
						where += fmt.Sprintf(" fold %d", f)
					}
					d = append(d, where+": "+strings.Join(diff, ", "))
					break
				}
			}
		}
	}
	return strings.Join(d, "; ")
}

func removeEpochs(out string) error {
	entries, err := os.ReadDir(out)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "epoch-") || (e.IsDir() && strings.HasPrefix(e.Name(), "view-")) {
			if err := os.RemoveAll(filepath.Join(out, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeEpoch(ctx context.Context, l *loader.Loader, world int, e uint64, dir string) (*EpochManifest, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("materialize: %w", err)
	}
	// An incomplete epoch (no manifest) is redone from scratch: temporary
	// files left by a killed run, and any stream files, go first.
	if stale, err := os.ReadDir(dir); err == nil {
		for _, ent := range stale {
			os.Remove(filepath.Join(dir, ent.Name()))
		}
	}
	man := &EpochManifest{Epoch: e}
	// Every rank's file is committed only once all are written, right
	// before the manifest: a run stopped between two ranks (SIGTERM) leaves
	// no stream file that looks complete in an epoch without a manifest.
	var files []*iox.AtomicFile
	defer func() {
		for _, f := range files {
			f.Abort() // a no-op once committed
		}
	}()
	for rank := 0; rank < world; rank++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("materialize: interrupted in epoch %d: %w", e, err)
		}
		fi, f, err := writeRank(ctx, l, world, e, rank, dir)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		man.Files = append(man.Files, *fi)
		afterRank(rank)
	}
	for i, f := range files {
		if err := f.Commit(); err != nil {
			return nil, fmt.Errorf("materialize: epoch %d rank %d: %w", e, i, err)
		}
	}
	if err := writeSealed(filepath.Join(dir, ManifestName), man); err != nil {
		return nil, err
	}
	return man, nil
}

// afterRank runs after each rank's file is written (a test's hook: the
// losing order of a signal between two ranks).
var afterRank = func(rank int) {}

// writeRank writes a rank's stream into a temporary file the caller
// commits (or aborts).
func writeRank(ctx context.Context, l *loader.Loader, world int, e uint64, rank int, dir string) (*FileInfo, *iox.AtomicFile, error) {
	p, err := l.Plan(wire.Request{Epoch: e, Rank: rank, World: world})
	if err != nil {
		return nil, nil, fmt.Errorf("materialize: epoch %d rank %d: %w", e, rank, err)
	}
	name := FileName(rank, world)
	f, err := iox.CreateAtomic(filepath.Join(dir, name), 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("materialize: %w", err)
	}
	fail := func(err error) (*FileInfo, *iox.AtomicFile, error) {
		f.Abort()
		return nil, nil, err
	}
	tw := &iox.CountingWriter{W: f, Hash: sha256.New()}
	st, err := l.WriteStream(ctx, p, tw)
	if err != nil {
		return fail(fmt.Errorf("materialize: epoch %d rank %d: %w", e, rank, err))
	}
	fi := &FileInfo{Rank: rank, File: name, OverBudget: p.OverBudget}
	if fi.SchemaBytes, fi.SchemaSHA256, fi.Batches, err = scanStream(f.TempName()); err != nil {
		return fail(fmt.Errorf("materialize: epoch %d rank %d: %w", e, rank, err))
	}
	if len(fi.Batches) != st.Batches || len(fi.Batches) != len(p.Batches) {
		return fail(fmt.Errorf("materialize: epoch %d rank %d: %d batches written, %d in the file", e, rank, st.Batches, len(fi.Batches)))
	}
	for i := range fi.Batches {
		fi.Batches[i].Graphs = len(p.Batches[i])
	}
	fi.Bytes, fi.Graphs = tw.N, st.Graphs
	fi.SHA256 = hex.EncodeToString(tw.Hash.Sum(nil))
	if err := f.Seal(); err != nil {
		return fail(fmt.Errorf("materialize: epoch %d rank %d: %w", e, rank, err))
	}
	return fi, f, nil
}

// scanStream walks an Arrow IPC stream file message by message and returns
// the schema message's length and SHA-256, and each record batch message's
// offset, length and SHA-256 (the bytes a client hashes per batch).
func scanStream(path string) (int64, string, []BatchInfo, error) {
	f, err := iox.OpenRegular(path)
	if err != nil {
		return 0, "", nil, err
	}
	defer f.Close()
	cr := &iox.CountingReader{R: bufio.NewReaderSize(f, 1<<20)}
	mr := ipc.NewMessageReader(cr)
	defer mr.Release()
	var schemaBytes, prev int64
	var out []BatchInfo
	for i := 0; ; i++ {
		msg, err := mr.Message()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, "", nil, fmt.Errorf("message %d: %w", i, err)
		}
		typ := msg.Type()
		msg.Release()
		switch {
		case i == 0 && typ == ipc.MessageSchema:
			schemaBytes = cr.N
		case typ == ipc.MessageRecordBatch:
			out = append(out, BatchInfo{Offset: prev, Bytes: cr.N - prev})
		default:
			return 0, "", nil, fmt.Errorf("message %d: unexpected %s", i, typ)
		}
		prev = cr.N
	}
	schemaSum, err := sectionDigest(f, 0, schemaBytes)
	if err != nil {
		return 0, "", nil, err
	}
	for i := range out {
		b := &out[i]
		if b.SHA256, err = sectionDigest(f, b.Offset, b.Bytes); err != nil {
			return 0, "", nil, err
		}
	}
	return schemaBytes, schemaSum, out, nil
}

// sectionDigest is the hex SHA-256 of n bytes of f at off.
func sectionDigest(f io.ReaderAt, off, n int64) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, off, n)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeSealed writes a sealed document crash-safely.
func writeSealed(path string, v jsonseal.Sealed) error {
	b, err := jsonseal.Seal(v)
	if err != nil {
		return err
	}
	if err := iox.WriteFileAtomic(path, b, 0o644); err != nil {
		return fmt.Errorf("materialize: %w", err)
	}
	return nil
}

// ReadConfig reads OUT/materialize.json (format 2 or 3) and checks it:
// the seal, the world size, every view and fold, and every identity's id
// against its fields (a hand-forged seed or batch size with a recomputed
// checksum is refused). A format 2 config comes back as one unnamed view.
func ReadConfig(out string) (*Config, error) {
	path := filepath.Join(out, ConfigName)
	b, err := iox.ReadRegular(path, 64<<20)
	if err != nil {
		return nil, err
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("materialize: %s: %w", path, err)
	}
	if c.Format != FormatName || c.FormatVersion < MinVersion || c.FormatVersion > Version {
		return nil, fmt.Errorf("materialize: %s: format %q version %d, this build reads %q versions %d to %d", path, c.Format, c.FormatVersion, FormatName, MinVersion, Version)
	}
	if err := jsonseal.Check(&c); err != nil {
		return nil, fmt.Errorf("materialize: %s: %w", path, err)
	}
	if c.World < 1 {
		return nil, fmt.Errorf("materialize: %s: world size %d", path, c.World)
	}
	switch {
	case c.FormatVersion == 2 && (c.Stream == nil || len(c.Views) > 0):
		return nil, fmt.Errorf("materialize: %s: a format 2 config has one configuration and no views", path)
	case c.FormatVersion == 2:
		c.Views = []ViewInfo{{Set: "all", Folds: []FoldInfo{{Config: *c.Stream}}}}
	case c.Stream != nil || len(c.Views) == 0:
		return nil, fmt.Errorf("materialize: %s: a format 3 config lists its views (and no top-level config)", path)
	}
	seen := map[string]bool{}
	for _, v := range c.Views {
		switch {
		case v.Name == "" && len(c.Views) > 1, v.Name != "" && !loader.ValidViewName(v.Name), seen[v.Name]:
			return nil, fmt.Errorf("materialize: %s: view name %q (unnamed beside others, invalid, or twice)", path, v.Name)
		case len(v.Folds) == 0 || (!v.PerFold && len(v.Folds) != 1):
			return nil, fmt.Errorf("materialize: %s: view %q has %d folds", path, v.Name, len(v.Folds))
		}
		seen[v.Name] = true
		for i, f := range v.Folds {
			if want := FoldDir(v.Name, v.PerFold, i, len(v.Folds)); f.Dir != want {
				return nil, fmt.Errorf("materialize: %s: view %q fold %d is in %q, want %q", path, v.Name, i, f.Dir, want)
			}
			if err := f.Config.Check(); err != nil {
				return nil, fmt.Errorf("materialize: %s: view %q fold %d: %w", path, v.Name, i, err)
			}
		}
	}
	return &c, nil
}

// ReadEpoch reads an epoch's manifest.
func ReadEpoch(out string, e uint64) (*EpochManifest, error) {
	b, err := iox.ReadRegular(filepath.Join(out, EpochDir(e), ManifestName), 256<<20)
	if err != nil {
		return nil, err
	}
	var m EpochManifest
	path := filepath.Join(out, EpochDir(e), ManifestName)
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("materialize: %s: %w", path, err)
	}
	if err := jsonseal.Check(&m); err != nil {
		return nil, fmt.Errorf("materialize: %s: %w", path, err)
	}
	if m.Epoch != e {
		return nil, fmt.Errorf("materialize: %s: says epoch %d", path, m.Epoch)
	}
	return &m, nil
}

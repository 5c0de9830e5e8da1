// Package materialize writes augmented epochs to disk, verifies them, and
// replays them over the socket protocol byte for byte.
//
// Layout of OUT:
//
//	materialize.json                 configuration (dataset, seed, schedule, batch size, world, ...)
//	epoch-000042/rank-000-of-002.arrows   the Arrow IPC stream rank 0 of 2 would receive live
//	epoch-000042/manifest.json       per file: bytes, SHA-256; per batch: offset, bytes, graphs, SHA-256
//
// Contract: a file is written under a temporary name, fsynced and renamed;
// an epoch's manifest.json is written last (same way), so an epoch without
// one is incomplete and a rerun redoes it; a rerun skips complete epochs.
// The files are exactly the live stream's bytes, so replay is a copy.
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
	// Version 2 stores the configuration's whole identity and seals
	// materialize.json and every epoch manifest (internal/jsonseal); a
	// version 1 folder is refused (rerun with --force to redo it).
	Version = 2
)

// Config is materialize.json: what the epochs were made from.
type Config struct {
	Format        string `json:"format"`
	FormatVersion int    `json:"format_version"`
	ToolVersion   string `json:"tool_version"`
	World         int    `json:"world"`
	// Stream is the identity of the configuration every file was made
	// with (seed, canonical schedule, batch size, budgets, remainder,
	// served-set and shards digests): a rerun with any other is refused.
	Stream   wire.Config `json:"config"`
	Checksum string      `json:"checksum"`
}

// ChecksumField implements jsonseal.Sealed.
func (c *Config) ChecksumField() *string { return &c.Checksum }

// Dataset is the dataset the epochs were made from.
func (c *Config) Dataset() string { return c.Stream.Dataset }

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
	Loader    *loader.Loader
	Out       string
	From, To  uint64 // epochs [From, To)
	World     int    // default 1
	BatchSize int    // default: the loader's
	Force     bool   // redo an OUT made with another configuration (all its epochs are removed)
	Logger    *slog.Logger
}

// Run materializes epochs [From, To) for every rank, skipping complete ones.
func Run(ctx context.Context, o Options) error {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.World <= 0 {
		o.World = 1
	}
	lc := o.Loader.Config()
	if o.BatchSize <= 0 {
		o.BatchSize = lc.BatchSize
	}
	if o.To <= o.From {
		return fmt.Errorf("materialize: empty epoch range %d:%d", o.From, o.To)
	}
	id := o.Loader.Identity()
	id.BatchSize = o.BatchSize // the size every file is cut with
	cfg := Config{Format: FormatName, FormatVersion: Version, ToolVersion: version.Version,
		World: o.World, Stream: id.WithID()}
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
	case err != nil || old.World != cfg.World || old.Stream.ID != cfg.Stream.ID:
		if !o.Force {
			return fmt.Errorf("materialize: %s was made with another configuration: %s; use --force to redo it", o.Out, configDiff(old, &cfg))
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
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("materialize: interrupted before epoch %d: %w", e, err)
		}
		dir := filepath.Join(o.Out, EpochDir(e))
		if _, err := os.Stat(filepath.Join(dir, ManifestName)); err == nil {
			log.Info("epoch already complete, skipped", "epoch", e)
			continue
		}
		t := time.Now()
		man, err := writeEpoch(ctx, o, e, dir)
		if err != nil {
			return err
		}
		var bytes int64
		var graphs int
		for _, f := range man.Files {
			bytes += f.Bytes
			graphs += f.Graphs
		}
		secs := time.Since(t).Seconds()
		log.Info("epoch materialized", "epoch", e, "ranks", o.World, "graphs", graphs, "MB", float64(bytes)/1e6,
			"seconds", secs, "graphs_per_s", float64(graphs)/max(secs, 1e-9))
	}
	return nil
}

// EpochDir names an epoch's folder.
func EpochDir(e uint64) string { return fmt.Sprintf("epoch-%06d", e) }

// FileName names a rank's stream file.
func FileName(rank, world int) string { return fmt.Sprintf("rank-%03d-of-%03d.arrows", rank, world) }

// configDiff names the settings two configurations differ in.
func configDiff(old, cur *Config) string {
	var d []string
	a, b := old.Stream, cur.Stream
	add := func(name string, x, y any) {
		if x != y {
			d = append(d, fmt.Sprintf("%s %v, now %v", name, x, y))
		}
	}
	add("world", old.World, cur.World)
	add("dataset", a.Dataset, b.Dataset)
	add("shards", a.ShardsSHA256, b.ShardsSHA256)
	add("served set", a.ServedSHA256, b.ServedSHA256)
	add("seed", a.Seed, b.Seed)
	add("schedule", a.Schedule, b.Schedule)
	add("batch size", a.BatchSize, b.BatchSize)
	add("node budget", a.NodeBudget, b.NodeBudget)
	add("edge budget", a.EdgeBudget, b.EdgeBudget)
	add("remainder", a.Remainder, b.Remainder)
	if len(d) == 0 {
		return "identity " + a.ID + ", now " + b.ID
	}
	return strings.Join(d, "; ")
}

func removeEpochs(out string) error {
	entries, err := os.ReadDir(out)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "epoch-") {
			if err := os.RemoveAll(filepath.Join(out, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeEpoch(ctx context.Context, o Options, e uint64, dir string) (*EpochManifest, error) {
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
	for rank := 0; rank < o.World; rank++ {
		fi, err := writeRank(ctx, o, e, rank, dir)
		if err != nil {
			return nil, err
		}
		man.Files = append(man.Files, *fi)
	}
	if err := writeSealed(filepath.Join(dir, ManifestName), man); err != nil {
		return nil, err
	}
	return man, nil
}

func writeRank(ctx context.Context, o Options, e uint64, rank int, dir string) (*FileInfo, error) {
	p, err := o.Loader.Plan(wire.Request{Epoch: e, Rank: rank, World: o.World, BatchSize: o.BatchSize})
	if err != nil {
		return nil, fmt.Errorf("materialize: epoch %d rank %d: %w", e, rank, err)
	}
	name := FileName(rank, o.World)
	f, err := iox.CreateAtomic(filepath.Join(dir, name), 0o644)
	if err != nil {
		return nil, fmt.Errorf("materialize: %w", err)
	}
	defer f.Abort() // a no-op once committed
	tw := &iox.CountingWriter{W: f, Hash: sha256.New()}
	st, err := o.Loader.WriteStream(ctx, p, tw)
	if err != nil {
		return nil, fmt.Errorf("materialize: epoch %d rank %d: %w", e, rank, err)
	}
	fi := &FileInfo{Rank: rank, File: name}
	if fi.SchemaBytes, fi.SchemaSHA256, fi.Batches, err = scanStream(f.TempName()); err != nil {
		return nil, fmt.Errorf("materialize: epoch %d rank %d: %w", e, rank, err)
	}
	if len(fi.Batches) != st.Batches || len(fi.Batches) != len(p.Batches) {
		return nil, fmt.Errorf("materialize: epoch %d rank %d: %d batches written, %d in the file", e, rank, st.Batches, len(fi.Batches))
	}
	for i := range fi.Batches {
		fi.Batches[i].Graphs = len(p.Batches[i])
	}
	fi.Bytes, fi.Graphs = tw.N, st.Graphs
	fi.SHA256 = hex.EncodeToString(tw.Hash.Sum(nil))
	if err := f.Commit(); err != nil {
		return nil, fmt.Errorf("materialize: epoch %d rank %d: %w", e, rank, err)
	}
	return fi, nil
}

// scanStream walks an Arrow IPC stream file message by message and returns
// the schema message's length and SHA-256, and each record batch message's
// offset, length and SHA-256 (the bytes a client hashes per batch).
func scanStream(path string) (int64, string, []BatchInfo, error) {
	f, err := os.Open(path)
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

// ReadConfig reads OUT/materialize.json.
func ReadConfig(out string) (*Config, error) {
	b, err := os.ReadFile(filepath.Join(out, ConfigName))
	if err != nil {
		return nil, err
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("materialize: %s: %w", filepath.Join(out, ConfigName), err)
	}
	if c.Format != FormatName || c.FormatVersion != Version {
		return nil, fmt.Errorf("materialize: %s: format %q version %d, this build reads %q version %d", filepath.Join(out, ConfigName), c.Format, c.FormatVersion, FormatName, Version)
	}
	if err := jsonseal.Check(&c); err != nil {
		return nil, fmt.Errorf("materialize: %s: %w", filepath.Join(out, ConfigName), err)
	}
	if c.World < 1 {
		return nil, fmt.Errorf("materialize: %s: world size %d", filepath.Join(out, ConfigName), c.World)
	}
	return &c, nil
}

// ReadEpoch reads an epoch's manifest.
func ReadEpoch(out string, e uint64) (*EpochManifest, error) {
	b, err := os.ReadFile(filepath.Join(out, EpochDir(e), ManifestName))
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

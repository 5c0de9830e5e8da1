// Command augloader serves deterministic augmented epochs of a shard folder
// to training processes over a Unix socket, materializes them to disk,
// verifies and replays them, fetches them for inspection, and writes
// stratified k-fold split files. The work is done by the loader, server,
// materialize, client and epoch packages.
package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/augloader/augloader/app"
	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/internal/cliutil"
	"github.com/augloader/augloader/internal/iox"
	"github.com/augloader/augloader/internal/version"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/materialize"
	"github.com/augloader/augloader/objstore"
	"github.com/augloader/augloader/shard"
)

func main() { cliutil.Main(newApp()) }

func positiveDuration(name string) func(*cli.Context, time.Duration) error {
	return func(_ *cli.Context, d time.Duration) error {
		if d <= 0 {
			return fmt.Errorf("--%s %s: want a positive duration", name, d)
		}
		return nil
	}
}

func newApp() *cli.App {
	return &cli.App{
		Name:    "augloader",
		Usage:   "serve deterministic NodeSam/SubMix-augmented graph batches to a trainer",
		Version: version.Version,
		// A view's policy is a mixture written with commas
		// ("train={fold}:training:nodesam:0.5,submix:0.5"): repeatable
		// flags take one value each, never split on commas.
		DisableSliceFlagSeparator: true,
		Commands: []*cli.Command{
			serveCmd(), materializeCmd(), verifyCmd(), fetchCmd(), splitCmd(),
		},
	}
}

func logger() *slog.Logger { return slog.New(slog.NewTextHandler(os.Stderr, nil)) }

// loaderFlags are serve's and materialize's: what shapes the batches.
var loaderFlags = []cli.Flag{
	&cli.Uint64Flag{Name: "seed", Value: 0, Usage: "seed of every permutation and augmentation draw"},
	&cli.StringFlag{Name: "policy", Usage: "augmentation schedule of views that give none (default: nodesam for training and whole-set views; a test set gets none), e.g. nodesam | submix:p=0.4 | nodesam:0.5,none:0.5 | 0..50|none;50..|nodesam (docs/schedule.md)"},
	&cli.StringFlag{Name: "schedule", Usage: "read the schedule from this file instead of --policy"},
	&cli.IntFlag{Name: "workers", Value: runtime.NumCPU(), Usage: "augmentation workers (1..1024)"},
	&cli.IntFlag{Name: "batch-size", Value: app.DefaultBatchSize, Usage: "graphs per batch (1..65536; a request may ask for another)"},
	&cli.StringFlag{Name: "split", Usage: "split file {\"training\": [...], \"test\": [...]}: serve only one of its sets"},
	&cli.StringFlag{Name: "split-set", Value: app.SetTraining, Usage: "which set of --split to serve: training, valid or test (a test or valid set defaults to policy none)"},
	&cli.BoolFlag{Name: "augment-test", Usage: "allow an augmenting policy on a test set (refused otherwise)"},
	&cli.StringFlag{Name: "remainder", Value: string(app.DefaultRemainder), Usage: "when the graphs do not divide by the world size: pad (repeat, marked padded) or drop"},
	&cli.IntFlag{Name: "node-budget", Usage: "also cap a batch's nodes, counted after augmentation (0: no cap; a graph larger alone is sent alone, flagged)"},
	&cli.IntFlag{Name: "max-atoms", Usage: "structures: at most N atoms a batch, the batches of each step balanced across ranks (--node-budget N --balanced)", Action: cliutil.IntRange("max-atoms", 0, 1<<30)},
	&cli.IntFlag{Name: "max-edges", Usage: "structures: at most N neighbour pairs (directed edges) a batch, balanced across ranks (--edge-budget N --balanced)", Action: cliutil.IntRange("max-edges", 0, 1<<30)},
	&cli.BoolFlag{Name: "balanced", Usage: "cut budget batches in steps of one batch per rank, each step's batches within one graph's nodes of each other: every rank gets as many batches (DDP needs it); without it each rank cuts its own slice and counts may differ"},
	&cli.IntFlag{Name: "edge-budget", Usage: "also cap a batch's undirected edges, counted after augmentation (0: no cap; a graph larger alone is sent alone, flagged)"},
	&cli.StringFlag{Name: "edge-fill", Usage: "what an edge no input edge explains (a NodeSam split's new edge, an added edge) carries, for shards with edge features: codes=C1,C2,... (a code per categorical edge column) and/or x=V (every float column); default: each column's reserved code (its vocabulary size) and 0"},
	&cli.Uint64Flag{Name: "max-epoch", Usage: "refuse requests for epochs >= this (0: no limit)"},
	&cli.BoolFlag{Name: "rotate", Usage: "structures: rotate each structure uniformly at random, keyed by (seed, epoch, structure): positions, cell, forces and dipole turn, stress and virials as R σ Rᵀ; the neighbour list and shifts stay"},
	&cli.Float64Flag{Name: "noise", Usage: "structures: add Gaussian noise of this σ (Å) to every position, keyed by (seed, epoch, structure), served as the noise column (a denoising target); the neighbour list is built again for the noisy positions (0..10; 0: none)", Action: cliutil.Float64Range("noise", 0, 10)},
	&cli.Float64Flag{Name: "cutoff", Usage: "structures: the served neighbour list's cutoff in Å, at most the one the shards were converted with (their pairs filtered by distance; 0: the stored one)", Action: cliutil.Float64Range("cutoff", 0, 100)},
	&cli.BoolFlag{Name: "no-index", Usage: "do not cache per-graph NodeSam indexes (saves up to 16 bytes per edge; NodeSam gets slower)"},
	&cli.StringFlag{Name: "memory-budget", Value: cliutil.FormatSize(app.DefaultMemoryBudget), Usage: "bytes of batches in flight across all streams, socket and Flight together, beyond each stream's next batch (e.g. 512MiB)"},
	&cli.StringSliceFlag{Name: "view", Usage: "a named view, repeatable: NAME=all[:POLICY], NAME={fold}:training|test[:POLICY] (one per --folds file) or NAME=SPLITFILE:training|valid|test[:POLICY] (an OGB split's sets: training, valid, test); a request names its view and fold (NAME: letters, digits, _ - .)"},
	&cli.StringFlag{Name: "views", Usage: "read view specs from this file (one a line, # comments)"},
	&cli.StringFlag{Name: "folds", Usage: "folder of split files fold-NN.json ({fold} views), as augloader split writes them: fold N is the file numbered N"},
	&cli.StringFlag{Name: "ppr-cache", Value: cliutil.FormatSize(app.DefaultPPRCache), Usage: "memory for SubMix's cached PageRank rankings per (graph, root): later draws skip the solve, bytes unchanged (0: no cache)"},
	&cli.StringFlag{Name: "cache-limit", Value: "0", Usage: "bytes of decoded pages and NodeSam indexes held (e.g. 1GiB; at least 16MiB and the largest page): a page, one record batch of a shard file (at most 1,024 graphs, a few MiB), is read by offset when first needed and checked, the one needed farthest ahead in the epoch's known order dropped, which changes speed, never bytes; 0 reads every shard at start. The process holds about this plus --memory-budget, --ppr-cache and 128MiB (docs/deploy.md)"},
	&cli.StringFlag{Name: "disk-cache", Usage: "a local folder (created when absent) that keeps what is read from --shards, each page checked by its CRC-32C on every read and kept across restarts, so a host fetches each page of an s3:// folder once; one daemon per folder"},
	&cli.StringFlag{Name: "disk-cache-limit", Value: cliutil.FormatSize(app.DefaultDiskCacheLimit), Usage: "bytes --disk-cache holds at most, the least recently used pages dropped first"},
	&cli.StringFlag{Name: "shuffle", Usage: "the epoch's order: global (one permutation of the whole set), window:N (the pages, a shard file's record batches, in a per-epoch order, graphs permuted within each N consecutive pages; SubMix draws partners in the window; docs/schedule.md) or window:SIZE (as many pages as fill SIZE decoded, e.g. window:64MiB). Default: global, or a window filling about a quarter of --cache-limit when the set does not fit it (NodeSam indexes are then not kept)"},
}

// loaderOptions parses serve's and materialize's common flags and checks
// them with the options' own Validate: every flag has a value (its
// default is app's), so an explicit 0 is refused there, not defaulted.
func loaderOptions(c *cli.Context) (app.LoaderOptions, error) {
	mem, err := cliutil.ParseSize("memory-budget", c.String("memory-budget"))
	if err != nil {
		return app.LoaderOptions{}, err
	}
	ppr, err := cliutil.ParseSize("ppr-cache", c.String("ppr-cache"))
	if err != nil {
		return app.LoaderOptions{}, err
	}
	cache, err := cliutil.ParseSize("cache-limit", c.String("cache-limit"))
	if err != nil {
		return app.LoaderOptions{}, err
	}
	disk, err := cliutil.ParseSize("disk-cache-limit", c.String("disk-cache-limit"))
	if err != nil {
		return app.LoaderOptions{}, err
	}
	for _, f := range [][2]string{{"max-atoms", "node-budget"}, {"max-edges", "edge-budget"}} {
		if c.Int(f[0]) > 0 && c.Int(f[1]) > 0 {
			return app.LoaderOptions{}, fmt.Errorf("--%s and --%s: give one (--%s is --%s with --balanced)", f[0], f[1], f[0], f[1])
		}
	}
	lo := app.LoaderOptions{MemoryBudget: mem, PPRCache: ppr, CacheLimit: cache, Shuffle: c.String("shuffle"),
		DiskCache: c.String("disk-cache"), DiskCacheLimit: disk,
		Shards: c.String("shards"), Seed: c.Uint64("seed"), Policy: c.String("policy"),
		ScheduleFile: c.String("schedule"), Workers: c.Int("workers"), BatchSize: c.Int("batch-size"),
		SplitFile: c.String("split"), SplitSet: c.String("split-set"), Remainder: epoch.Remainder(c.String("remainder")),
		NodeBudget: c.Int("node-budget") + c.Int("max-atoms"), EdgeBudget: c.Int("edge-budget") + c.Int("max-edges"), MaxEpoch: c.Uint64("max-epoch"),
		Balanced: c.Bool("balanced") || c.Int("max-atoms") > 0 || c.Int("max-edges") > 0,
		EdgeFill: c.String("edge-fill"),
		NoIndex:  c.Bool("no-index"), AugmentTest: c.Bool("augment-test"),
		Views: c.StringSlice("view"), Folds: c.String("folds"),
		Structures: loader.StructureConfig{Rotate: c.Bool("rotate"), Noise: c.Float64("noise"), Cutoff: c.Float64("cutoff")},
	}
	if f := c.String("views"); f != "" {
		more, err := app.ReadViews(f)
		if err != nil {
			return lo, err
		}
		lo.Views = append(lo.Views, more...)
	}
	if lo.CacheLimit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		// A soft limit for the Go heap: the collector runs harder near it
		// instead of letting dropped shards' memory wait for the heap to
		// double (docs/deploy.md, "Sizing the caches"). Half the overhead
		// is left to what the runtime holds outside the heap.
		debug.SetMemoryLimit(lo.CacheLimit + lo.MemoryBudget + lo.PPRCache + ProcessOverhead/2)
	}
	return lo, lo.Validate()
}

func parseEpochs(s string) (uint64, uint64, error) {
	a, b, ok := strings.Cut(s, ":")
	from, err1 := strconv.ParseUint(a, 10, 64)
	to, err2 := strconv.ParseUint(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || to <= from {
		return 0, 0, fmt.Errorf("--epochs %q: want FROM:TO with FROM < TO (epochs FROM..TO-1)", s)
	}
	return from, to, nil
}

func materializeCmd() *cli.Command {
	return &cli.Command{
		Name:  "materialize",
		Usage: "write augmented epochs to disk as Arrow IPC stream files (crash-safe, resumable): every fold of every --view, or the one served set",
		Flags: grouped(append([]cli.Flag{
			&cli.StringFlag{Name: "shards", Usage: "shard folder written by shardconv convert (required)"},
			&cli.StringFlag{Name: "epochs", Value: "0:1", Usage: "epochs FROM:TO (TO excluded)"},
			&cli.StringFlag{Name: "out", Required: true, Usage: "output folder"},
			&cli.IntFlag{Name: "world", Value: 1, Usage: "write one file per rank for this world size (1..65536)", Action: cliutil.IntRange("world", 1, 65536)},
			&cli.BoolFlag{Name: "force", Usage: "redo an output folder made with another configuration"},
		}, loaderFlags...)),
		Action: func(c *cli.Context) error {
			from, to, err := parseEpochs(c.String("epochs"))
			if err != nil {
				return err
			}
			if c.String("shards") == "" {
				return errors.New("materialize: --shards is required")
			}
			lo, err := loaderOptions(c)
			if err != nil {
				return err
			}
			b, err := app.BuildViews(c.Context, lo)
			if err != nil {
				return err
			}
			defer b.Close()
			log := logger()
			for _, n := range b.Notes {
				log.Info(n)
			}
			return materialize.Run(c.Context, materialize.Options{
				Views: b.Views, Out: c.String("out"), From: from, To: to,
				World: c.Int("world"), Force: c.Bool("force"), Logger: log,
			})
		},
	}
}

func verifyCmd() *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "check materialized epochs: every file's SHA-256, the schema's and every batch's digest, the sealed manifests",
		ArgsUsage: "OUT",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "allow-incomplete", Usage: "exit 0 when some epochs are incomplete (a run still going, or interrupted)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return errors.New("verify: want exactly one materialized folder")
			}
			checked, incomplete, errs := materialize.Verify(c.Context, c.Args().First())
			for _, e := range errs {
				fmt.Fprintln(os.Stderr, "augloader: verify:", e)
			}
			for _, name := range incomplete {
				fmt.Fprintf(os.Stderr, "augloader: verify: %s is incomplete (no manifest): rerun materialize\n", name)
			}
			switch {
			case len(errs) > 0:
				return cli.Exit(fmt.Sprintf("augloader: verify: %d problem(s)", len(errs)), 1)
			case len(incomplete) > 0 && !c.Bool("allow-incomplete"):
				return cli.Exit(fmt.Sprintf("augloader: verify: %d incomplete epoch(s) (--allow-incomplete to accept them)", len(incomplete)), 1)
			}
			fmt.Printf("%s: ok (%d complete epochs, %d incomplete)\n", c.Args().First(), len(checked), len(incomplete))
			return nil
		},
	}
}

func splitCmd() *cli.Command {
	return &cli.Command{
		Name:  "split",
		Usage: "write stratified k-fold split files {\"training\": [...], \"test\": [...]}",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "shards", Required: true, Usage: "shard folder (labels are read from it)"},
			&cli.IntFlag{Name: "folds", Value: 10, Usage: "number of folds (≥ 2)", Action: cliutil.IntRange("folds", 2, -1)},
			&cli.Uint64Flag{Name: "seed", Usage: "shuffle seed"},
			&cli.StringFlag{Name: "out", Required: true, Usage: "folder for fold-00.json, fold-01.json, ... (numbered to sort: fold-000.json with 100 folds or more)"},
			&cli.BoolFlag{Name: "force", Usage: "replace the fold files already in --out (refused otherwise: a stale one would be served as a fold)"},
		},
		Action: func(c *cli.Context) error {
			st, err := objstore.Resolve(c.Context, c.String("shards"))
			if err != nil {
				return err
			}
			r, err := shard.OpenStore(c.Context, st)
			if err != nil {
				return err
			}
			defer r.Close()
			labels := make([]int32, r.NumGraphs())
			for i := range labels {
				g, _ := r.Graph(int64(i))
				labels[i] = g.Label
			}
			folds, err := epoch.StratifiedKFold(labels, c.Int("folds"), c.Uint64("seed"))
			if err != nil {
				return err
			}
			write := func(p string, b []byte) error { return iox.WriteFileAtomic(p, b, 0o644) }
			if err := epoch.WriteFolds(c.String("out"), folds, c.Bool("force"), write); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "wrote %d folds to %s\n", len(folds), c.String("out"))
			return nil
		},
	}
}

// Command augloader serves deterministic augmented epochs of a shard folder
// to training processes over a Unix socket, materializes them to disk,
// verifies and replays them, fetches them for inspection, and writes
// stratified k-fold split files. The work is done by the loader, server,
// materialize, client and epoch packages.
package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/augloader/augloader/app"
	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/internal/cliutil"
	"github.com/augloader/augloader/internal/iox"
	"github.com/augloader/augloader/internal/version"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/materialize"
	"github.com/augloader/augloader/server"
	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/wire"
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
	&cli.IntFlag{Name: "edge-budget", Usage: "also cap a batch's undirected edges, counted after augmentation (0: no cap; a graph larger alone is sent alone, flagged)"},
	&cli.StringFlag{Name: "edge-fill", Usage: "what an edge no input edge explains (a NodeSam split's new edge, an added edge) carries, for shards with edge features: codes=C1,C2,... (a code per categorical edge column) and/or x=V (every float column); default: each column's reserved code (its vocabulary size) and 0"},
	&cli.Uint64Flag{Name: "max-epoch", Usage: "refuse requests for epochs >= this (0: no limit)"},
	&cli.BoolFlag{Name: "no-index", Usage: "do not cache per-graph NodeSam indexes (saves up to 16 bytes per edge; NodeSam gets slower)"},
	&cli.StringFlag{Name: "memory-budget", Value: cliutil.FormatSize(app.DefaultMemoryBudget), Usage: "bytes of batches in flight across all streams, socket and Flight together, beyond each stream's next batch (e.g. 512MiB)"},
	&cli.StringSliceFlag{Name: "view", Usage: "a named view, repeatable: NAME=all[:POLICY], NAME={fold}:training|test[:POLICY] (one per --folds file) or NAME=SPLITFILE:training|valid|test[:POLICY] (an OGB split's sets: training, valid, test); a request names its view and fold (NAME: letters, digits, _ - .)"},
	&cli.StringFlag{Name: "views", Usage: "read view specs from this file (one a line, # comments)"},
	&cli.StringFlag{Name: "folds", Usage: "folder of split files fold-NN.json ({fold} views), as augloader split writes them: fold N is the file numbered N"},
	&cli.StringFlag{Name: "ppr-cache", Value: cliutil.FormatSize(app.DefaultPPRCache), Usage: "memory for SubMix's cached PageRank rankings per (graph, root): later draws skip the solve, bytes unchanged (0: no cache)"},
	&cli.StringFlag{Name: "cache-limit", Value: "0", Usage: "bytes of decoded pages and NodeSam indexes held (e.g. 1GiB; at least 16MiB and the largest page): a page, one record batch of a shard file (at most 1,024 graphs, a few MiB), is read by offset when first needed and checked, the least recently needed dropped, which changes speed, never bytes; 0 reads every shard at start. The process holds about this plus --memory-budget, --ppr-cache and 128MiB (docs/deploy.md)"},
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
	lo := app.LoaderOptions{MemoryBudget: mem, PPRCache: ppr, CacheLimit: cache, Shuffle: c.String("shuffle"),
		Shards: c.String("shards"), Seed: c.Uint64("seed"), Policy: c.String("policy"),
		ScheduleFile: c.String("schedule"), Workers: c.Int("workers"), BatchSize: c.Int("batch-size"),
		SplitFile: c.String("split"), SplitSet: c.String("split-set"), Remainder: epoch.Remainder(c.String("remainder")),
		NodeBudget: c.Int("node-budget"), EdgeBudget: c.Int("edge-budget"), MaxEpoch: c.Uint64("max-epoch"),
		EdgeFill: c.String("edge-fill"),
		NoIndex:  c.Bool("no-index"), AugmentTest: c.Bool("augment-test"),
		Views: c.StringSlice("view"), Folds: c.String("folds"),
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

// ProcessOverhead is what a daemon holds beyond --cache-limit,
// --memory-budget and --ppr-cache: the runtime, the workers' scratch,
// connection buffers, the per-graph sizes and index slots (docs/deploy.md).
const ProcessOverhead = 128 << 20

func serveCmd() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve augmented epochs on a Unix socket until SIGINT or SIGTERM",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "shards", Usage: "shard folder written by shardconv convert (required unless --materialized)"},
			&cli.StringFlag{Name: "socket", Usage: "Unix socket path to create (never replaces a non-socket file)"},
			&cli.StringFlag{Name: "flight", Usage: "also (or only) serve Arrow Flight at grpc://HOST:PORT (or plain HOST:PORT; port 0: a free one, printed on the readiness line) or grpc+unix:///PATH (loopback only unless --flight-allow-remote)"},
			&cli.BoolFlag{Name: "flight-allow-remote", Usage: "allow a non-loopback --flight address (requires --flight-token-file)"},
			&cli.StringFlag{Name: "flight-token-file", Usage: "file holding the bearer token Flight clients must present"},
			&cli.StringFlag{Name: "socket-mode", Value: "0600", Usage: "permissions of the socket file (octal)"},
			&cli.StringFlag{Name: "materialized", Usage: "replay the epochs materialized in this folder instead of augmenting"},
			&cli.DurationFlag{Name: "drain", Value: 5 * time.Second, Usage: "on shutdown, how long running streams may finish (> 0)", Action: positiveDuration("drain")},
			&cli.IntFlag{Name: "max-streams", Value: 256, Usage: "concurrent streams, socket and Flight together; more are refused as unavailable (1..65536)", Action: cliutil.IntRange("max-streams", 1, 65536)},
			&cli.IntFlag{Name: "max-streams-per-client", Value: 64, Usage: "concurrent streams per client (peer user id on Unix sockets, IP address over TCP; 1..65536)", Action: cliutil.IntRange("max-streams-per-client", 1, 65536)},
			&cli.IntFlag{Name: "max-pending", Value: 64, Usage: "connections waiting to send their request; a new one evicts the oldest (1..65536)", Action: cliutil.IntRange("max-pending", 1, 65536)},
			&cli.StringFlag{Name: "metrics", Usage: "serve Prometheus counters at http://ADDR/metrics (loopback, e.g. 127.0.0.1:9090)"},
			&cli.StringFlag{Name: "peers", Usage: "Flight URLs of every daemon serving this configuration, this one included (grpc://h1:8815,grpc://h2:8815): GetFlightInfo splits a request's batches across them"},
			&cli.StringFlag{Name: "wire-compression", Usage: "compress Flight record batch bodies: zstd or lz4 (Arrow IPC body compression; the socket is never compressed; part of the configuration identity Flight clients compare)", Action: cliutil.OneOf("wire-compression", wire.Compressions()...)},
			&cli.StringFlag{Name: "tls-cert", Usage: "serve Flight over TLS with this certificate (PEM; with --tls-key; the address is then grpc+tls://)"},
			&cli.StringFlag{Name: "tls-key", Usage: "the private key of --tls-cert (PEM)"},
			&cli.StringFlag{Name: "shm-ring-limit", Value: "64MiB", Usage: "use (and map) at most this much of a shared-memory client's ring per stream; a stream maps room for 8 of its largest batches, counted against --memory-budget (e.g. 16MiB)"},
			&cli.BoolFlag{Name: "exit-when-stdin-closes", Usage: "stop, as on SIGTERM, when standard input reaches its end: a launcher that holds a pipe to it (augloader.Daemon does) takes the daemon with it however it ends, SIGKILL included"},
			&cli.StringFlag{Name: "remove-on-exit", Usage: "remove this folder when the daemon exits: the one a launcher made for the socket and log (named augloader-*, holding the launcher's .augloader-launcher file, given by its own path; removed only if it is still that folder, never through a symlink)"},
			&cli.StringSliceFlag{Name: "twins", Usage: "a twin set, repeatable: 'A / B' (2 to 4 schedules separated by /, e.g. 'dropnode:ratio=0.2 / subgraph:ratio=0.2'): a request with twins=k gets k differently augmented, aligned copies of every graph, each graph's set drawn over the sets by the request's twin_weights (GraphCL, JOAO; docs/contrastive.md)"},
		}, loaderFlags...),
		Action: func(c *cli.Context) error {
			log := logger()
			if dir := c.String("remove-on-exit"); dir != "" {
				owned, err := iox.ClaimOwnedDir(dir)
				if err != nil {
					return fmt.Errorf("--remove-on-exit: %w", err)
				}
				defer func() {
					if err := owned.Remove(); err != nil {
						log.Warn("--remove-on-exit", "err", err)
					}
				}()
			}
			if c.Bool("exit-when-stdin-closes") {
				ctx, cancel := context.WithCancel(c.Context)
				defer cancel()
				go func() {
					io.Copy(io.Discard, os.Stdin)
					log.Info("standard input closed (the launcher ended): stopping")
					cancel()
				}()
				c.Context = ctx
			}
			mode, err := strconv.ParseUint(c.String("socket-mode"), 8, 32)
			if err != nil {
				return fmt.Errorf("--socket-mode %q: %w", c.String("socket-mode"), err)
			}
			if c.String("socket") == "" && c.String("flight") == "" {
				return errors.New("serve: give --socket, --flight or both")
			}
			var src server.Source
			var memory *loader.Memory
			metrics := server.NewMetrics()
			ringLimit, err := cliutil.ParseSize("shm-ring-limit", c.String("shm-ring-limit"))
			if err != nil {
				return err
			}
			if dir := c.String("materialized"); dir != "" {
				rp, err := server.OpenReplay(dir)
				if err != nil {
					return err
				}
				src = rp
				budget, err := cliutil.ParseSize("memory-budget", c.String("memory-budget"))
				if err != nil {
					return err
				}
				memory = loader.NewMemory(budget)
				metrics.SetMemory(memory)
				cfg := rp.Config()
				log.Info("replaying", "materialized", dir, "dataset", cfg.Dataset(), "world", cfg.World, "views", len(cfg.Views))
				for _, v := range cfg.Views {
					attrs := []any{"view", v.Name, "set", v.Set, "config", v.Folds[0].Config.ID, "schedule", v.Folds[0].Config.Schedule}
					if v.PerFold {
						attrs = append(attrs, "folds", len(v.Folds))
					}
					log.Info("materialized view", attrs...)
				}
			} else {
				if c.String("shards") == "" {
					return errors.New("serve: --shards or --materialized is required")
				}
				lo, err := loaderOptions(c)
				if err != nil {
					return err
				}
				lo.Twins = c.StringSlice("twins")
				b, err := app.BuildViews(c.Context, lo)
				if err != nil {
					return err
				}
				defer b.Close()
				src = server.Live{Views: b.Views}
				memory = b.Loader.Config().Memory
				metrics.SetMemory(memory)
				if c := b.Loader.Source().PPRCache(); c != nil {
					metrics.SetPPRCache(c)
				}
				if b.Reader.Lazy() {
					metrics.SetShardCache(func() server.CacheStats { return server.CacheStats(b.Reader.Stats()) })
				}
				// What is applied comes first: a default policy is never silent.
				for _, n := range b.Notes {
					log.Info(n)
				}
				m := b.Reader.Manifest()
				log.Info("serving", "shards", c.String("shards"), "dataset", m.Dataset, "seed", c.Uint64("seed"),
					"workers", b.Loader.Config().Workers, "views", len(b.Views.Names()))
				for _, d := range b.Views.Describe() {
					var attrs []any
					for _, k := range []string{"view", "set", "folds", "graphs", "schedule", "augments", "twins", "default"} {
						if v, ok := d[k]; ok {
							attrs = append(attrs, k, v)
						}
					}
					log.Info("view", attrs...)
				}
			}
			token, err := readToken(log, c.String("flight-token-file"))
			if err != nil {
				return err
			}
			wc, err := wire.ParseCompression(c.String("wire-compression"))
			if err != nil {
				return err
			}
			fo := server.FlightOptions{Address: c.String("flight"), AllowRemote: c.Bool("flight-allow-remote"), Token: token,
				WireCompression: wc}
			if p := c.String("peers"); p != "" {
				for _, peer := range strings.Split(p, ",") {
					if peer = strings.TrimSpace(peer); !strings.HasPrefix(peer, "grpc") {
						return fmt.Errorf("--peers: %q is not a Flight URL (grpc://HOST:PORT)", peer)
					}
					fo.Peers = append(fo.Peers, strings.TrimSpace(peer))
				}
			}
			if cert, key := c.String("tls-cert"), c.String("tls-key"); cert != "" || key != "" {
				if cert == "" || key == "" {
					return errors.New("--tls-cert and --tls-key go together")
				}
				if fo.TLS, err = server.LoadTLS(cert, key); err != nil {
					return err
				}
			}
			return server.Run(c.Context, server.DaemonOptions{
				Source: src, Logger: log, Memory: memory, ShmRingLimit: ringLimit,
				Socket: c.String("socket"), SocketMode: os.FileMode(mode),
				Flight:  fo,
				Metrics: c.String("metrics"), Counters: metrics,
				Limits: server.Limits{MaxStreams: c.Int("max-streams"), MaxStreamsPerClient: c.Int("max-streams-per-client"),
					MaxPending: c.Int("max-pending"), Drain: c.Duration("drain")},
				Ready: func(ep server.Endpoints) {
					// One JSON line on stdout once every endpoint listens:
					// what a supervisor (augloader.Daemon) waits for.
					b, _ := json.Marshal(struct {
						Ready bool `json:"ready"`
						server.Endpoints
					}{true, ep})
					fmt.Println(string(b))
				},
			})
		},
	}
}

// readToken reads a Flight bearer token, warning when the file is readable
// by other users or the token is short enough to guess.
func readToken(log *slog.Logger, path string) (string, error) {
	if path == "" {
		return "", nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	b, err := iox.ReadRegular(path, 1<<20)
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("%s: empty token", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		log.Warn("the Flight token file is readable by other users: chmod 600 it", "file", path, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()))
	}
	if len(token) < 16 {
		log.Warn("the Flight token is shorter than 16 bytes: use a long random one (e.g. openssl rand -hex 32)", "file", path, "bytes", len(token))
	}
	return token, nil
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
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "shards", Usage: "shard folder written by shardconv convert (required)"},
			&cli.StringFlag{Name: "epochs", Value: "0:1", Usage: "epochs FROM:TO (TO excluded)"},
			&cli.StringFlag{Name: "out", Required: true, Usage: "output folder"},
			&cli.IntFlag{Name: "world", Value: 1, Usage: "write one file per rank for this world size (1..65536)", Action: cliutil.IntRange("world", 1, 65536)},
			&cli.BoolFlag{Name: "force", Usage: "redo an output folder made with another configuration"},
		}, loaderFlags...),
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

func fetchCmd() *cli.Command {
	return &cli.Command{
		Name:  "fetch",
		Usage: "read one epoch from a server and print counts and the stream's digest",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "socket", Usage: "server socket (the same as --addr PATH)"},
			&cli.StringSliceFlag{Name: "addr", Usage: "a daemon to read from, repeatable: a socket path or unix:///path, or a Flight URL (grpc://, grpc+tls://, grpc+unix://); several read the epoch together, in order, failing over"},
			&cli.StringFlag{Name: "token-file", Usage: "file holding Flight's bearer token"},
			&cli.StringFlag{Name: "tls-ca", Usage: "PEM certificates to trust for grpc+tls:// (default: the system's)"},
			&cli.DurationFlag{Name: "batch-timeout", Value: 30 * time.Second, Usage: "with several --addr: how long a daemon may take to send its next batch before its share is asked of another"},
			&cli.BoolFlag{Name: "server-digest", Usage: "ask the server for the stream's SHA-256 in its trailer"},
			&cli.Uint64Flag{Name: "epoch", Usage: "epoch to read"},
			&cli.IntFlag{Name: "rank", Usage: "this reader's rank (0..world-1)", Action: cliutil.IntRange("rank", 0, -1)},
			&cli.IntFlag{Name: "world", Value: 1, Usage: "world size (≥ 1)", Action: cliutil.IntRange("world", 1, -1)},
			&cli.IntFlag{Name: "batch-size", Usage: "graphs per batch (0: the server's default; 0..65536)", Action: cliutil.IntRange("batch-size", 0, loader.MaxBatchSize)},
			&cli.IntFlag{Name: "start-batch", Usage: "resume from this batch (≥ 0)", Action: cliutil.IntRange("start-batch", 0, -1)},
			&cli.IntFlag{Name: "stride", Usage: "read batches start-batch, start-batch+stride, … (0 or 1: every batch)", Action: cliutil.IntRange("stride", 0, -1)},
			&cli.IntFlag{Name: "count", Usage: "read at most this many batches (0: to the end)", Action: cliutil.IntRange("count", 0, -1)},
			&cli.IntFlag{Name: "batches-per-epoch", Usage: "an epoch of this many batches drawn from consecutive passes (0: one pass)", Action: cliutil.IntRange("batches-per-epoch", 0, -1)},
			&cli.BoolFlag{Name: "drop-last", Usage: "drop each pass's short final batch"},
			&cli.StringFlag{Name: "view", Usage: "the daemon's view to read (default: its default view)"},
			&cli.IntFlag{Name: "fold", Usage: "the fold of a per-fold view", Action: cliutil.IntRange("fold", 0, -1)},
			&cli.StringFlag{Name: "shm-ring", Value: "0", Usage: "read Unix sockets over shared memory, through a memfd ring of this many bytes (e.g. 32MiB; 64KiB to 1GiB; 0: the socket itself)", Action: func(_ *cli.Context, v string) error {
				_, err := shmRing(v)
				return err
			}},
			&cli.StringSliceFlag{Name: "resume", Usage: "an earlier phase of an epoch resumed at another world size, repeatable, oldest first: W:G0,G1,… (rank r of W ranks received its slice's first Gr graphs); --rank and --world split what the phases left (docs/protocol.md, \"Resume\")"},
			&cli.IntFlag{Name: "twins", Usage: "read k aligned, differently augmented copies of every graph (2..4: the k of the daemon's --twins sets; docs/contrastive.md)", Action: cliutil.IntRange("twins", 0, wire.MaxTwins)},
			&cli.StringFlag{Name: "twin-weights", Usage: "with --twins: the relative probabilities of the daemon's twin sets, comma-separated, one a set (default: equal)"},
			&cli.BoolFlag{Name: "no-digest", Usage: "read without hashing: counts only, no sha256 (SHA-256 over every byte, twice, is most of what fetch costs)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object"},
		},
		Action: func(c *cli.Context) error {
			req := wire.Request{Epoch: c.Uint64("epoch"), Rank: c.Int("rank"), World: c.Int("world"),
				BatchSize: c.Int("batch-size"), StartBatch: c.Int("start-batch"), Stride: c.Int("stride"), Count: c.Int("count"),
				BatchesPerEpoch: c.Int("batches-per-epoch"), DropLast: c.Bool("drop-last"), View: c.String("view"), Fold: c.Int("fold"),
				Digest: c.Bool("server-digest")}
			req.Twins = c.Int("twins")
			if w := c.String("twin-weights"); w != "" {
				for _, f := range strings.Split(w, ",") {
					x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
					if err != nil {
						return cli.Exit(fmt.Sprintf("augloader fetch: --twin-weights %q: %q is not a number", w, f), 2)
					}
					req.TwinWeights = append(req.TwinWeights, x)
				}
			}
			if err := wire.CheckTwins(req.Twins, req.TwinWeights); err != nil {
				return cli.Exit(fmt.Sprintf("augloader fetch: --twins %d --twin-weights %q: %v", req.Twins, c.String("twin-weights"), err), 2)
			}
			for _, ph := range c.StringSlice("resume") {
				p, err := parseResumePhase(ph)
				if err != nil {
					return cli.Exit(fmt.Sprintf("augloader fetch: --resume %q: %v", ph, err), 2)
				}
				req.Resume = append(req.Resume, p)
			}
			addrs := c.StringSlice("addr")
			if s := c.String("socket"); s != "" {
				addrs = append([]string{s}, addrs...)
			}
			if len(addrs) == 0 {
				return errors.New("fetch: give --socket or --addr")
			}
			digests := !c.Bool("no-digest")
			ring, err := shmRing(c.String("shm-ring"))
			if err != nil {
				return err
			}
			o := client.Options{Digests: digests, BatchTimeout: c.Duration("batch-timeout"), Logger: logger(), ShmRing: ring}
			if tf := c.String("token-file"); tf != "" {
				b, err := iox.ReadRegular(tf, 1<<20)
				if err != nil {
					return err
				}
				o.Token = strings.TrimSpace(string(b))
			}
			if ca := c.String("tls-ca"); ca != "" {
				pem, err := iox.ReadRegular(ca, 16<<20)
				if err != nil {
					return err
				}
				pool := x509.NewCertPool()
				if !pool.AppendCertsFromPEM(pem) {
					return fmt.Errorf("--tls-ca %s: no PEM certificate", ca)
				}
				o.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
			}
			t := time.Now()
			var nodes, edges int64
			policies := map[string]int{}
			res, err := client.FetchMany(c.Context, addrs, req, o, func(rec arrowRecord) error {
				n, e, pol := countBatch(rec)
				nodes, edges = nodes+n, edges+e
				for k, v := range pol {
					policies[k] += v
				}
				return nil
			})
			if err != nil {
				return err
			}
			secs := time.Since(t).Seconds()
			out := map[string]any{
				"dataset": res.Info.Dataset, "epoch": req.Epoch, "rank": req.Rank, "world": req.World,
				"batches": res.Batches, "graphs": res.Graphs, "nodes": nodes, "directed_edges": edges,
				"policies": policies, "bytes": res.Bytes, "sha256": hex.EncodeToString(res.Digest[:]),
				"seconds": secs, "config": res.Info.Config, "batch_sha256": hexDigests(res.BatchDigests),
				"daemons": len(addrs), "server_sha256": res.Trailer.SHA256,
				// The same from one daemon or several: the batches, in order.
				"batches_sha256": digestOfDigests(res.BatchDigests),
			}
			switch {
			case !digests: // nothing was hashed
				delete(out, "sha256")
				delete(out, "batch_sha256")
				delete(out, "batches_sha256")
			case len(addrs) > 1:
				delete(out, "sha256") // computed per daemon, not over the whole stream
			}
			if c.Bool("json") {
				return json.NewEncoder(os.Stdout).Encode(out)
			}
			fmt.Printf("%s epoch %d rank %d/%d: %d batches, %d graphs, %d nodes, %d directed edges, %.1f MB in %.3fs (%.0f graphs/s)\npolicies %v\n",
				res.Info.Dataset, req.Epoch, req.Rank, req.World, res.Batches, res.Graphs, nodes, edges,
				float64(res.Bytes)/1e6, secs, float64(res.Graphs)/secs, policies)
			if digests {
				fmt.Printf("sha256 %s\n", hex.EncodeToString(res.Digest[:]))
			}
			return nil
		},
	}
}

// digestOfDigests is the SHA-256 of the batches' SHA-256s, concatenated.
func digestOfDigests(ds [][32]byte) string {
	h := sha256.New()
	for _, d := range ds {
		h.Write(d[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func hexDigests(ds [][32]byte) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = hex.EncodeToString(d[:])
	}
	return out
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
			r, err := shard.Open(c.Context, c.String("shards"))
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

// shmRing reads fetch's --shm-ring: 0, or a size in wire's ring range.
func shmRing(v string) (int, error) {
	n, err := cliutil.ParseSize("shm-ring", v)
	if err != nil {
		return 0, err
	}
	if n != 0 && (n < wire.MinShmRing || n > wire.MaxShmRing) {
		return 0, fmt.Errorf("--shm-ring %s: want 0 or %s to %s", v, cliutil.FormatSize(wire.MinShmRing), cliutil.FormatSize(wire.MaxShmRing))
	}
	return int(n), nil
}

// parseResumePhase reads fetch's --resume W:G0,G1,…: a world of W ranks,
// rank r of which received the first Gr graphs of its slice; what the
// numbers must be is wire.CheckResume's, the server's own check.
func parseResumePhase(s string) (wire.ResumePhase, error) {
	w, gs, ok := strings.Cut(s, ":")
	world, err := strconv.Atoi(w)
	if !ok || err != nil {
		return wire.ResumePhase{}, errors.New("want W:G0,G1,…: a world size, a colon and a graph count per rank")
	}
	ph := wire.ResumePhase{World: world}
	for _, g := range strings.Split(gs, ",") {
		n, err := strconv.Atoi(g)
		if err != nil {
			return wire.ResumePhase{}, fmt.Errorf("graph count %q is not an integer", g)
		}
		ph.Graphs = append(ph.Graphs, n)
	}
	return ph, wire.CheckResume([]wire.ResumePhase{ph})
}

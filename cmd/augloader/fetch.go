package main

// augloader fetch: one request read from a running daemon, with its
// digests; and the flag parsers it shares with serve.

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/internal/cliutil"
	"github.com/augloader/augloader/internal/iox"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/wire"
	"github.com/urfave/cli/v2"
)

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
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object: the epoch's summary (counts, the stream's sha256, batches_sha256 over the batches' own)"},
			&cli.BoolFlag{Name: "batch-hashes", Usage: "with --json, also list every batch's SHA-256 (batch_sha256)"},
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
			if !c.Bool("batch-hashes") {
				delete(out, "batch_sha256") // one a batch: a list, where a summary is wanted
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

package main

// augloader serve: the daemon's flags and its start.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/augloader/augloader/app"
	"github.com/augloader/augloader/internal/cliutil"
	"github.com/augloader/augloader/internal/iox"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/objstore"
	"github.com/augloader/augloader/server"
	"github.com/augloader/augloader/wire"
	"github.com/urfave/cli/v2"
)

// ProcessOverhead is what a daemon holds beyond --cache-limit,
// --memory-budget and --ppr-cache: the runtime, the workers' scratch,
// connection buffers, the per-graph sizes and index slots (docs/deploy.md).
const ProcessOverhead = 128 << 20

func serveCmd() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve augmented epochs on a Unix socket until SIGINT or SIGTERM",
		Description: `Examples:
     augloader serve --shards demo/shards --socket /tmp/aug.sock --policy nodesam
     augloader serve --shards demo/mutag --folds demo/folds --socket /tmp/aug.sock \
         --view 'train={fold}:training:nodesam' --view 'test={fold}:test'
     augloader serve --shards s3://bucket/collab --disk-cache /var/cache/augloader \
         --cache-limit 2GiB --socket /run/aug.sock --metrics 127.0.0.1:9090`,
		Flags: grouped(append([]cli.Flag{
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
			&cli.StringFlag{Name: "metrics", Usage: "serve Prometheus counters at http://ADDR/metrics, and the probes /livez and /readyz (200 once serving, 503 while starting or draining), from before the shards load (loopback, e.g. 127.0.0.1:9090, unless --metrics-allow-remote)"},
			&cli.BoolFlag{Name: "metrics-allow-remote", Usage: "allow a non-loopback --metrics address (a kubelet probes the pod's own address; the endpoint shows counters, no data)"},
			&cli.StringFlag{Name: "peers", Usage: "Flight URLs of every daemon serving this configuration, this one included (grpc://h1:8815,grpc://h2:8815): GetFlightInfo splits a request's batches across them"},
			&cli.StringFlag{Name: "wire-compression", Usage: "compress Flight record batch bodies: zstd or lz4 (Arrow IPC body compression; the socket is never compressed; part of the configuration identity Flight clients compare)", Action: cliutil.OneOf("wire-compression", wire.Compressions()...)},
			&cli.StringFlag{Name: "tls-cert", Usage: "serve Flight over TLS with this certificate (PEM; with --tls-key; the address is then grpc+tls://)"},
			&cli.StringFlag{Name: "tls-key", Usage: "the private key of --tls-cert (PEM)"},
			&cli.IntFlag{Name: "procs", Usage: "once the shards are loaded, run the daemon's Go code on at most N cores at once (GOMAXPROCS; 0: the runtime's choice, every core or $GOMAXPROCS): beside its trainer on a machine of few cores, a daemon that leaves the trainer's loop a core is faster, and augloader.Daemon starts it so (docs/deploy.md)", Action: cliutil.IntRange("procs", 0, 1024)},
			&cli.StringFlag{Name: "shm-ring-limit", Value: "64MiB", Usage: "use (and map) at most this much of a shared-memory client's ring per stream; a stream maps room for 8 of its largest batches, counted against --memory-budget (e.g. 16MiB)"},
			&cli.BoolFlag{Name: "exit-when-stdin-closes", Usage: "stop, as on SIGTERM, when standard input reaches its end: a launcher that holds a pipe to it (augloader.Daemon does) takes the daemon with it however it ends, SIGKILL included"},
			&cli.IntFlag{Name: "exit-with-pid", Usage: "stop, as on SIGTERM, once process PID has ended (checked twice a second): a node's daemon that one of torchrun's workers started ends with the torchrun agent, the workers' parent, not with that worker (augloader.node_daemon does)"},
			&cli.StringFlag{Name: "remove-on-exit", Usage: "remove this folder when the daemon exits: the one a launcher made for the socket and log (named augloader-*, holding the launcher's .augloader-launcher file, given by its own path; removed only if it is still that folder, never through a symlink)"},
			&cli.StringSliceFlag{Name: "twins", Usage: "a twin set, repeatable: 'A / B' (2 to 4 schedules separated by /, e.g. 'dropnode:ratio=0.2 / subgraph:ratio=0.2'): a request with twins=k gets k differently augmented, aligned copies of every graph, each graph's set drawn over the sets by the request's twin_weights (GraphCL, JOAO; docs/contrastive.md)"},
		}, loaderFlags...)),
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
			if pid := c.Int("exit-with-pid"); pid != 0 {
				// The process is known by its id and its start time: an id
				// the kernel gave again to another process after the first
				// ended is not the process the daemon is tied to.
				start, ok := processStart(pid)
				if !ok {
					return fmt.Errorf("--exit-with-pid %d: no such process", pid)
				}
				ctx, cancel := context.WithCancel(c.Context)
				defer cancel()
				go func() {
					for ctx.Err() == nil {
						if now, ok := processStart(pid); !ok || now != start {
							break
						}
						time.Sleep(500 * time.Millisecond)
					}
					if ctx.Err() == nil {
						log.Info("the process it was tied to ended: stopping", "pid", pid)
						cancel()
					}
				}()
				c.Context = ctx
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
			// The probes answer from now on, "starting" while the shards
			// load (minutes from object storage): alive, not yet ready.
			var probes *server.Probes
			if addr := c.String("metrics"); addr != "" {
				if probes, err = server.ListenProbes(addr, c.Bool("metrics-allow-remote"), metrics); err != nil {
					return err
				}
				defer probes.Close()
			}
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
				if err != nil && c.Context.Err() != nil {
					// SIGTERM or SIGINT before the daemon was ready: every read at
					// start takes its context, so it ends at once, and cleanly.
					log.Info("stopped before it was ready (signalled while opening the shards)", "shards", c.String("shards"))
					return nil
				}
				if err != nil {
					return err
				}
				defer b.Close()
				// No read outlives shutdown: once the running streams have had
				// their drain, the store's requests end (a stalled store would
				// otherwise hold the exit for its timeouts).
				b.WatchFolder(c.Context, watchInterval(), func(opened, now string) {
					log.Warn("the shard folder was replaced since this daemon opened it: it serves the version it opened "+
						"(the identity's manifest digest names it) while that version's objects are there, and a page it must "+
						"read again from one the replacement deleted fails naming it; restart the daemon to serve the new folder",
						"shards", c.String("shards"), "opened", opened, "now", now)
				})
				drain := server.Limits{Drain: c.Duration("drain")}.EnsureDefaults().Drain
				defer context.AfterFunc(c.Context, func() { time.AfterFunc(drain, b.StopReads) })()
				src = server.Live{Views: b.Views}
				memory = b.Loader.Config().Memory
				metrics.SetMemory(memory)
				if c := b.Loader.Source().PPRCache(); c != nil {
					metrics.SetPPRCache(c)
				}
				if b.Reader.Lazy() {
					metrics.SetShardCache(func() server.CacheStats { return server.CacheStats(b.Reader.Stats()) })
				}
				if s3 := app.ObjectStore(b.Store); s3 != nil {
					metrics.SetObjectStore(func() server.StoreStats {
						st := s3.Stats()
						return server.StoreStats{Gets: st.Gets.Load(), Heads: st.Heads.Load(), Retries: st.Retries.Load(),
							Bytes: st.Bytes.Load(), Seconds: time.Duration(st.Nanos.Load()).Seconds()}
					})
				}
				if dc, ok := b.Store.(*objstore.DiskCache); ok {
					metrics.SetDiskCache(func() server.DiskCacheStats {
						st := dc.Stats()
						return server.DiskCacheStats{Hits: st.Hits.Load(), Misses: st.Misses.Load(), Bad: st.Bad.Load(),
							Evictions: st.Evictions.Load(), WriteErrors: st.WriteErrors.Load(), Written: st.Written.Load(), Stale: st.Stale.Load(),
							Used: dc.Used(), Limit: dc.Limit()}
					})
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
			if n := c.Int("procs"); n > 0 {
				// After the load, which decodes shards on every core while
				// the trainer waits for readiness: from now on the trainer
				// runs beside the daemon, and a core of its own spares it
				// the runtime's idle threads spinning where it would run.
				runtime.GOMAXPROCS(n)
				log.Info("cores", "procs", n)
			}
			return server.Run(c.Context, server.DaemonOptions{
				// The ranks of one job (a request's job) must ask for the
				// same epochs: one a peek ahead is refused, not served
				// another epoch's partition.
				Source: server.RankChecked{Source: src, Ranks: server.NewRankEpochs()}, Logger: log, Memory: memory, ShmRingLimit: ringLimit,
				Socket: c.String("socket"), SocketMode: os.FileMode(mode),
				Flight: fo,
				Probes: probes, Counters: metrics,
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

// watchInterval is how often a daemon asks whether its folder in object
// storage was replaced (AUGLOADER_S3_WATCH, a duration; default a minute:
// one HEAD).
func watchInterval() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("AUGLOADER_S3_WATCH")); err == nil && d > 0 {
		return d
	}
	return time.Minute
}

// processStart is process pid's start time (clock ticks after boot, the
// 22nd field of /proc/PID/stat) and whether it runs: it exists and has not
// ended (a zombie, ended but not yet reaped by its parent, has). Without
// /proc the start time is 0 and the signal's answer stands.
func processStart(pid int) (uint64, bool) {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return 0, false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, true
	}
	// The command name, in parentheses, may hold spaces and ')': the
	// fields start after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, true
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 || fields[0] == "Z" || fields[0] == "X" {
		return 0, false
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, true
	}
	return start, true
}

package server

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/augloader/augloader/loader"
)

// DaemonOptions configure Run: which endpoints serve Source, and the
// limits they share.
type DaemonOptions struct {
	Source Source
	Logger *slog.Logger // nil: discard
	// Socket, when set, is the Unix socket to create (SocketMode, 0600 by
	// default).
	Socket     string
	SocketMode fs.FileMode
	// Flight, when Flight.Address is set, serves Arrow Flight too.
	Flight FlightOptions
	// Metrics, when set, is the loopback address of the Prometheus
	// endpoint (http://ADDR/metrics) and its probes; MetricsAllowRemote
	// allows any address (a kubelet probes the pod's own). Probes, when
	// set instead, is that endpoint already open (ListenProbes: serving
	// "starting" while the source loaded); Run takes it over and closes it.
	Metrics            string
	MetricsAllowRemote bool
	Probes             *Probes
	// Limits bound both transports together; FitFDs is applied.
	Limits Limits
	// Counters are the metrics the daemon updates; default a fresh set.
	Counters *Metrics
	// Memory is the budget the socket's shared-memory rings count against
	// (the loaders' own, so batches and rings share one budget).
	Memory *loader.Memory
	// ShmRingLimit caps how much of a client's ring a stream uses (see
	// Options.ShmRingLimit).
	ShmRingLimit int64
	// Ready, when set, is called once every endpoint listens.
	Ready func(Endpoints)
}

// Endpoints are the addresses a running daemon listens on (a port asked
// as 0 is the one the kernel chose).
type Endpoints struct {
	Socket  string `json:"socket,omitempty"`
	Flight  string `json:"flight,omitempty"`
	Metrics string `json:"metrics,omitempty"`
}

// Run serves until ctx is cancelled, then shuts every endpoint down (each
// drains for Limits.Drain) and returns nil; or returns the first error of
// any endpoint, having stopped the others. Nothing is served unless every
// endpoint could listen.
func Run(ctx context.Context, o DaemonOptions) error { return o.Run(ctx) }

// Run runs the daemon these options describe (server.Run).
func (o DaemonOptions) Run(ctx context.Context) error {
	if o.Source == nil {
		return errors.New("server: a source is required")
	}
	if o.Socket == "" && o.Flight.Address == "" {
		return errors.New("server: give a socket, a Flight address or both")
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lim, note := o.Limits.FitFDs()
	if note != "" {
		log.Warn("limits lowered to fit the open-file limit", "detail", note)
	}
	metrics := o.Counters
	if metrics == nil {
		metrics = NewMetrics()
	}
	adm := newAdmission(lim)
	served := new(atomic.Int64)

	var closers []func()
	fail := func(err error) error {
		for _, c := range closers {
			c()
		}
		return err
	}
	var ep Endpoints
	var sln, fln net.Listener
	var err error
	probes := o.Probes
	if probes == nil && o.Metrics != "" {
		if probes, err = ListenProbes(o.Metrics, o.MetricsAllowRemote, metrics); err != nil {
			return fail(err)
		}
	}
	if probes != nil {
		closers = append(closers, func() { probes.Close() })
		ep.Metrics = probes.URL()
	}
	if o.Socket != "" {
		if sln, err = Listen(o.Socket, o.SocketMode|fsDefault(o.SocketMode)); err != nil {
			return fail(err)
		}
		closers = append(closers, func() { sln.Close() })
		ep.Socket = o.Socket
	}
	if o.Flight.Address != "" {
		fo := o.Flight
		if fo.MaxConnections == 0 {
			fo.MaxConnections = lim.MaxConnections
		}
		if fln, err = ListenFlight(fo); err != nil {
			return fail(err)
		}
		closers = append(closers, func() { fln.Close() })
		ep.Flight = o.Flight.Address
		if ta, ok := fln.Addr().(*net.TCPAddr); ok {
			scheme := "grpc://"
			if o.Flight.TLS != nil {
				scheme = "grpc+tls://"
			}
			ep.Flight = scheme + ta.String()
		}
	}

	g, gctx := errgroup.WithContext(ctx)
	// /readyz: "starting" until every listener serves (Ready is called),
	// "draining" once the context ends. The metrics listener outlives the
	// drain (it closes once the socket and Flight servers have returned),
	// so /readyz says "draining" to a probe while running streams finish.
	setState := func(string) {}
	var serving sync.WaitGroup
	servedAll := make(chan struct{})
	if probes != nil {
		setState = probes.set
		g.Go(func() error {
			<-servedAll
			return probes.Close()
		})
		log.Info("listening", "metrics", ep.Metrics)
	}
	if sln != nil {
		srv, err := New(Options{Source: o.Source, Logger: log, Mode: o.SocketMode, Limits: lim, Metrics: metrics,
			Memory: o.Memory, ShmRingLimit: o.ShmRingLimit, admission: adm, served: served})
		if err != nil {
			return fail(err)
		}
		serving.Add(1)
		g.Go(func() error { defer serving.Done(); return srv.Serve(gctx, sln) })
		log.Info("listening", "socket", ep.Socket)
	}
	if fln != nil {
		fs := &Flight{Source: o.Source, Logger: log, Metrics: metrics, Limits: lim, admission: adm, served: served,
			Peers: o.Flight.Peers, WireCompression: o.Flight.WireCompression}
		gs := NewFlightServer(fs, o.Flight)
		serving.Add(1)
		g.Go(func() error { defer serving.Done(); return ServeFlight(gctx, gs, fln, lim.Drain) })
		log.Info("listening", "flight", ep.Flight, "token", o.Flight.Token != "")
	}
	// Ready before the readiness line: a supervisor that reads the line
	// and asks /readyz at once is told "ready" (it was told "starting").
	setState("ready")
	if o.Ready != nil {
		o.Ready(ep)
	}
	go func() { <-gctx.Done(); setState("draining") }()
	go func() { serving.Wait(); close(servedAll) }()
	err = g.Wait()
	log.Info("stopped", "streams_served", served.Load())
	return err
}

func fsDefault(m fs.FileMode) fs.FileMode {
	if m == 0 {
		return 0o600
	}
	return 0
}

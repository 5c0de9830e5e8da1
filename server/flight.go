package server

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/augloader/augloader/internal/ipcframe"
	"github.com/augloader/augloader/wire"
)

// Flight serves the same streams over Arrow Flight (gRPC), as
// docs/protocol.md ("Arrow Flight") specifies. A DoGet ticket is the
// request frame's JSON body; each FlightData carries exactly one message
// of the socket stream (metadata and body unchanged, unless
// WireCompression re-encodes the bodies), so a Flight client reads the
// same record batches byte for byte. The first FlightData (the schema)
// carries the response in its app_metadata; a last FlightData with no data
// carries the trailer, so a cut stream is told from a complete one (a
// gRPC error ends a stream that fails). GetFlightInfo splits a rank's
// batches across Peers: a plain Flight client that follows the endpoints
// in order reads exactly what one daemon would send. Streams count
// against the same Limits as the socket's when both run in one daemon.
type Flight struct {
	flight.BaseFlightServer
	Source  Source
	Logger  *slog.Logger
	Metrics *Metrics
	// Peers are the Flight URIs (grpc://HOST:PORT, this daemon included)
	// GetFlightInfo splits a request's batches across, one contiguous
	// chunk each; none: one endpoint, this daemon.
	Peers []string
	// WireCompression compresses record batch bodies of live streams
	// (Arrow IPC body compression; replays are sent as stored).
	WireCompression wire.Compression
	// Limits apply when the Flight endpoint runs alone; Run shares the
	// socket's instead.
	Limits    Limits
	admission *admission
	served    *atomic.Int64
	once      sync.Once
	sess      *session
}

// grpcCodes maps the protocol's error codes to gRPC's (docs/protocol.md).
var grpcCodes = map[string]codes.Code{
	wire.CodeBadRequest:  codes.InvalidArgument,
	wire.CodeOutOfRange:  codes.OutOfRange,
	wire.CodeUnavailable: codes.Unavailable,
	wire.CodeInternal:    codes.Internal,
}

// statusOf is err as a gRPC status error with the protocol code's mapping.
func statusOf(code string, err error) error {
	c, ok := grpcCodes[code]
	if !ok {
		c = codes.Internal
	}
	msg := err.Error()
	var we *wire.Error
	if errors.As(err, &we) {
		msg = we.Message
	}
	return status.Error(c, msg)
}

// ParseTicket decodes a ticket: the JSON body of a request frame, with the
// same checks as the socket's; the shared-memory transport is the Unix
// socket's alone.
func ParseTicket(t []byte) (wire.Request, error) {
	req, err := wire.DecodeRequest(t)
	if err == nil && req.Shm {
		err = fmt.Errorf("%w: shm is for the Unix socket only", wire.ErrProtocol)
	}
	return req, err
}

func (f *Flight) log() *slog.Logger {
	if f.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return f.Logger
}

func (f *Flight) session() *session {
	f.once.Do(func() {
		if f.admission == nil {
			f.admission = newAdmission(f.Limits)
		}
		if f.served == nil {
			f.served = new(atomic.Int64)
		}
		f.sess = &session{src: f.Source, adm: f.admission, metrics: f.Metrics, log: f.log(),
			compress: f.WireCompression, served: f.served}
	})
	return f.sess
}

// DoGet streams one request.
func (f *Flight) DoGet(t *flight.Ticket, fs flight.FlightService_DoGetServer) error {
	ff := &flightFramer{fs: fs}
	req, err := ParseTicket(t.GetTicket())
	if err != nil {
		return f.session().refuse(ff, wire.CodeBadRequest, err)
	}
	ctx := fs.Context()
	return f.session().serve(ctx, req, flightClient(ctx), ff)
}

// flightFramer frames a stream as FlightData: one message of the Arrow
// IPC stream each, the response on the first (the schema), the trailer on
// a last one without data; a stream that fails ends with a gRPC error.
type flightFramer struct {
	fs   flight.FlightService_DoGetServer
	pw   *io.PipeWriter
	done chan error // the sender's end: nil, or why sending failed
}

func (f *flightFramer) name() string { return "flight" }

func (f *flightFramer) refuse(code string, err error) error { return statusOf(code, err) }

func (f *flightFramer) open(_ context.Context, _ context.CancelFunc, _ Stream, info wire.Response) (io.Writer, error) {
	pr, pw := io.Pipe()
	f.pw, f.done = pw, make(chan error, 1)
	appMeta, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	go func() {
		mr := ipcframe.NewReader(pr)
		first := true
		var err error
		for {
			meta, body, rerr := mr.Next()
			if rerr != nil {
				if !errors.Is(rerr, io.EOF) {
					err = rerr
				}
				break
			}
			fd := &flight.FlightData{DataHeader: meta, DataBody: body}
			if first { // the schema message carries the response
				fd.AppMetadata, first = appMeta, false
			}
			if err = f.fs.Send(fd); err != nil {
				break
			}
		}
		// Unblocks the stream's writer when sending stopped early.
		pr.CloseWithError(errors.New("flight: stream abandoned"))
		f.done <- err
	}()
	return pw, nil
}

func (f *flightFramer) close(ctx context.Context, tr wire.Trailer, err error) error {
	f.pw.CloseWithError(err)
	if serr := <-f.done; err == nil && serr != nil {
		err = serr
	}
	if err != nil {
		code := tr.Code
		if code == "" || ctx.Err() != nil {
			code = wire.CodeUnavailable
		}
		return statusOf(code, err)
	}
	meta, _ := json.Marshal(tr)
	if err := f.fs.Send(&flight.FlightData{AppMetadata: meta}); err != nil {
		return statusOf(wire.CodeUnavailable, err)
	}
	f.fs.SetTrailer(metadata.Pairs("augloader-batches", strconv.Itoa(tr.Batches), "augloader-graphs", strconv.Itoa(tr.Graphs)))
	return nil
}

func (f *flightFramer) attrs() []any { return nil }

// GetFlightInfo describes the request in a CMD descriptor (its JSON).
func (f *Flight) GetFlightInfo(_ context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if d.GetType() != flight.DescriptorCMD {
		return nil, status.Error(codes.InvalidArgument, "augloader: descriptor must be a CMD holding a request's JSON")
	}
	req, err := ParseTicket(d.GetCmd())
	if err != nil {
		return nil, statusOf(wire.CodeBadRequest, err)
	}
	return f.info(req)
}

func (f *Flight) info(req wire.Request) (*flight.FlightInfo, error) {
	st, err := f.Source.Open(req)
	if err != nil {
		return nil, statusOf(codeOf(err), err)
	}
	in := st.Info()
	tkt, _ := json.Marshal(req)
	fi := &flight.FlightInfo{
		FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: tkt},
		Endpoint:         f.endpoints(req, in.Batches),
		TotalRecords:     int64(in.Graphs),
		TotalBytes:       -1,
		Ordered:          true,
	}
	meta, _ := json.Marshal(in)
	fi.AppMetadata = meta
	fi.Schema = flight.SerializeSchema(st.Schema(), memory.DefaultAllocator)
	return fi, nil
}

// endpoints splits a request's n batches into contiguous chunks, one per
// peer: endpoint i asks peer i for batches ⌊i·n/P⌋ … ⌊(i+1)·n/P⌋ − 1 of
// the request's (start_batch + ⌊i·n/P⌋·stride, the same stride, that
// many). Followed in order they give the request's batches in order.
// No peers: one endpoint, here.
func (f *Flight) endpoints(req wire.Request, n int) []*flight.FlightEndpoint {
	if len(f.Peers) == 0 || n == 0 {
		tkt, _ := json.Marshal(req)
		return []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tkt}}}
	}
	var eps []*flight.FlightEndpoint
	p := len(f.Peers)
	stride := max(req.Stride, 1)
	for i, peer := range f.Peers {
		lo, hi := i*n/p, (i+1)*n/p
		if hi == lo {
			continue
		}
		sub := req
		sub.StartBatch, sub.Count = req.StartBatch+lo*stride, hi-lo
		tkt, _ := json.Marshal(sub)
		eps = append(eps, &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: tkt},
			Location: []*flight.Location{{Uri: flightURI(peer)}}})
	}
	return eps
}

// flightURI spells a peer the way Flight clients expect (grpc+tcp, grpc+tls).
func flightURI(peer string) string {
	if rest, ok := strings.CutPrefix(peer, "grpc://"); ok {
		return "grpc+tcp://" + rest
	}
	return peer
}

// ListFlights lists epoch 0 for world size 1; any epoch, rank and world
// size the server offers can be asked for with the same ticket form.
func (f *Flight) ListFlights(_ *flight.Criteria, fs flight.FlightService_ListFlightsServer) error {
	fi, err := f.info(wire.Request{Epoch: 0, World: 1})
	if err != nil {
		return err
	}
	return fs.Send(fi)
}

// FlightOptions configure the Flight endpoint's listener and gRPC server.
type FlightOptions struct {
	// Address: grpc://HOST:PORT or grpc+unix:///PATH.
	Address string
	// AllowRemote permits a non-loopback TCP address; Token is then required.
	AllowRemote bool
	// Token, when set, must be presented as "authorization: Bearer TOKEN"
	// on every call (compared in constant time).
	Token string
	// MaxConnections caps open connections; beyond it a new one is closed
	// at once (the client sees unavailable). 0: no cap.
	MaxConnections int
	// TLS, when set, serves gRPC over TLS (clients use grpc+tls://).
	TLS *tls.Config
	// Peers and WireCompression: see Flight.
	Peers           []string
	WireCompression wire.Compression
}

// LoadTLS reads a certificate and its key for FlightOptions.TLS.
func LoadTLS(certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("server: TLS certificate %s, key %s: %w", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// ListenFlight checks the address policy and opens the listener.
func ListenFlight(o FlightOptions) (net.Listener, error) {
	if !strings.Contains(o.Address, "://") {
		o.Address = "grpc://" + o.Address // HOST:PORT, as users write it
	}
	u, err := url.Parse(o.Address)
	if err != nil {
		return nil, fmt.Errorf("server: --flight %q: %w", o.Address, err)
	}
	var ln net.Listener
	switch u.Scheme {
	case "grpc+unix":
		if ln, err = Listen(u.Path, 0o600); err != nil {
			return nil, err
		}
	case "grpc", "grpc+tcp", "grpc+tls":
		if (u.Scheme == "grpc+tls") != (o.TLS != nil) {
			return nil, fmt.Errorf("server: --flight %s: grpc+tls:// goes with --tls-cert and --tls-key, grpc:// without", o.Address)
		}
		host := u.Hostname()
		ip := net.ParseIP(host)
		loopback := host == "localhost" || (ip != nil && ip.IsLoopback())
		if !loopback {
			if !o.AllowRemote {
				return nil, fmt.Errorf("server: --flight %s is not a loopback address: pass --flight-allow-remote (and a token) to bind it", o.Address)
			}
			if o.Token == "" {
				return nil, errors.New("server: a remote Flight bind needs a token (--flight-token-file)")
			}
		}
		if ln, err = net.Listen("tcp", u.Host); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
	default:
		return nil, fmt.Errorf("server: --flight %q: want grpc://HOST:PORT or grpc+unix:///PATH", o.Address)
	}
	if o.MaxConnections > 0 {
		ln = &capListener{Listener: ln, slots: make(chan struct{}, o.MaxConnections)}
	}
	return ln, nil
}

// capListener closes connections beyond its cap as soon as they are
// accepted, and keeps accepting after a passing error (no descriptors
// left) instead of failing: gRPC would otherwise stop serving.
type capListener struct {
	net.Listener
	slots chan struct{}
}

func (l *capListener) Accept() (net.Conn, error) {
	var backoff time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if retryable(err) && !errors.Is(err, net.ErrClosed) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &slotConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			c.Close()
		}
	}
}

type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// peerCreds records the peer's user id on Unix-socket connections, so the
// per-client stream limit counts Flight clients by user as the socket does.
type peerCreds struct {
	credentials.TransportCredentials
}

type peerInfo struct {
	credentials.AuthInfo
	uid uint32
}

func (p peerCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	uid, ok := peerUID(unwrapConn(c))
	conn, ai, err := p.TransportCredentials.ServerHandshake(c)
	if err == nil && ok {
		ai = peerInfo{AuthInfo: ai, uid: uid}
	}
	return conn, ai, err
}

func (p peerCreds) Clone() credentials.TransportCredentials {
	return peerCreds{p.TransportCredentials.Clone()}
}

func unwrapConn(c net.Conn) net.Conn {
	if sc, ok := c.(*slotConn); ok {
		return sc.Conn
	}
	return c
}

// flightClient names the peer of a call for the per-client limit.
func flightClient(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	if pi, ok := p.AuthInfo.(peerInfo); ok {
		return fmt.Sprintf("uid %d", pi.uid)
	}
	if ta, ok := p.Addr.(*net.TCPAddr); ok {
		return "ip " + ta.IP.String()
	}
	return ""
}

// NewFlightServer builds the gRPC server: the token check on every call,
// peer user ids on Unix sockets, idle connections closed after 5 minutes.
func NewFlightServer(f *Flight, o FlightOptions) *grpc.Server {
	token := o.Token
	check := func(ctx context.Context) error {
		if token == "" {
			return nil
		}
		md, _ := metadata.FromIncomingContext(ctx)
		for _, v := range md.Get("authorization") {
			if subtle.ConstantTimeCompare([]byte(v), []byte("Bearer "+token)) == 1 {
				return nil
			}
		}
		return status.Error(codes.Unauthenticated, "augloader: missing or wrong bearer token")
	}
	creds := insecure.NewCredentials()
	if o.TLS != nil {
		creds = credentials.NewTLS(o.TLS)
	}
	gs := grpc.NewServer(
		grpc.Creds(peerCreds{creds}),
		// Stop waits for the handlers to return (grpc-go's default does
		// not): the daemon closes its reader and page cache after the
		// Flight server stops, and a stream still pinning pages then
		// landed a page in the closed cache and read a closed shard file.
		grpc.WaitForHandlers(true),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 5 * time.Minute}),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := check(ctx); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := check(ss.Context()); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	)
	flight.RegisterFlightServiceServer(gs, f)
	return gs
}

// ServeFlight serves until ctx is cancelled, then stops gracefully within
// drain.
func ServeFlight(ctx context.Context, gs *grpc.Server, ln net.Listener, drain time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- gs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(drain):
		gs.Stop()
	}
	if ua, ok := ln.Addr().(*net.UnixAddr); ok {
		os.Remove(ua.Name)
	}
	return nil
}

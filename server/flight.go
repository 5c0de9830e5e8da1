package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
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
	// WireCompression, "zstd" or "lz4", compresses record batch bodies of
	// live streams (Arrow IPC body compression; replays are sent as
	// stored).
	WireCompression string
	// Limits apply when the Flight endpoint runs alone; Run shares the
	// socket's instead.
	Limits    Limits
	admission *admission
	once      sync.Once
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

func (f *Flight) adm() *admission {
	f.once.Do(func() {
		if f.admission == nil {
			f.admission = newAdmission(f.Limits)
		}
	})
	return f.admission
}

func (f *Flight) reject(code string, err error) error {
	f.Metrics.reject(code)
	f.log().Warn("request rejected", "transport", "flight", "code", code, "err", err)
	return statusOf(code, err)
}

// DoGet streams one request.
func (f *Flight) DoGet(t *flight.Ticket, fs flight.FlightService_DoGetServer) error {
	start := time.Now()
	req, err := ParseTicket(t.GetTicket())
	if err != nil {
		return f.reject(wire.CodeBadRequest, err)
	}
	ctx := fs.Context()
	release, err := f.adm().acquire(flightClient(ctx))
	if err != nil {
		return f.reject(wire.CodeUnavailable, err)
	}
	defer release()
	st, err := f.Source.Open(req)
	if err != nil {
		return f.reject(codeOf(err), err)
	}
	f.Metrics.start()
	info := st.Info()
	f.Metrics.overBudgetBatches(len(info.OverBudget))
	if f.WireCompression != "" {
		if cs, ok := st.(interface{ SetCompression(string) error }); ok {
			if err := cs.SetCompression(f.WireCompression); err != nil {
				return f.reject(wire.CodeInternal, err)
			}
		}
	}
	pr, pw := io.Pipe()
	type result struct {
		batches, graphs int
		err             error
	}
	done := make(chan result, 1)
	var digest hash.Hash
	go func() {
		var w io.Writer = pw
		if req.Digest {
			digest = sha256.New()
			w = io.MultiWriter(pw, digest)
		}
		b, g, err := st.WriteTo(ctx, w)
		pw.CloseWithError(err)
		done <- result{b, g, err}
	}()
	mr := ipcframe.NewReader(pr)
	var sent int64
	var sendErr error
	first := true
	for {
		meta, body, err := mr.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				sendErr = err
			}
			break
		}
		fd := &flight.FlightData{DataHeader: meta, DataBody: body}
		if first { // the schema message carries the response
			fd.AppMetadata, _ = json.Marshal(info)
			first = false
		}
		if sendErr = fs.Send(fd); sendErr != nil {
			break
		}
		sent += int64(len(meta) + len(body))
	}
	pr.CloseWithError(errors.New("flight: stream abandoned"))
	res := <-done
	if res.err == nil {
		res.err = sendErr
	}
	times, _ := streamTimes(st)
	f.Metrics.done(res.batches, res.graphs, sent, times, res.err)
	secs := time.Since(start).Seconds()
	attrs := []any{"transport", "flight", "epoch", req.Epoch, "rank", req.Rank, "world", req.World,
		"graphs", res.graphs, "batches", res.batches, "MB", float64(sent) / 1e6, "seconds", secs}
	if res.err != nil {
		f.log().Warn("stream cut", append(attrs, "err", res.err)...)
		code := codeOf(res.err)
		if ctx.Err() != nil {
			code = wire.CodeUnavailable
		}
		return statusOf(code, res.err)
	}
	tr := wire.Trailer{Batches: res.batches, Graphs: res.graphs}
	if digest != nil {
		tr.SHA256 = hex.EncodeToString(digest.Sum(nil))
	}
	meta, _ := json.Marshal(tr)
	if err := fs.Send(&flight.FlightData{AppMetadata: meta}); err != nil {
		f.log().Warn("trailer not delivered", append(attrs, "err", err)...)
		return statusOf(wire.CodeUnavailable, err)
	}
	fs.SetTrailer(metadata.Pairs("augloader-batches", strconv.Itoa(res.batches), "augloader-graphs", strconv.Itoa(res.graphs)))
	f.log().Info("epoch served", attrs...)
	return nil
}

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
// peer: endpoint i is start_batch + ⌊i·n/P⌋ with count ⌊(i+1)·n/P⌋ − ⌊i·n/P⌋,
// at peer i. Followed in order they give the request's batches in order.
// A strided or counted request, or no peers: one endpoint, here.
func (f *Flight) endpoints(req wire.Request, n int) []*flight.FlightEndpoint {
	if len(f.Peers) == 0 || req.Stride > 1 || req.Count > 0 || n == 0 {
		tkt, _ := json.Marshal(req)
		return []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tkt}}}
	}
	var eps []*flight.FlightEndpoint
	p := len(f.Peers)
	for i, peer := range f.Peers {
		lo, hi := i*n/p, (i+1)*n/p
		if hi == lo {
			continue
		}
		sub := req
		sub.StartBatch, sub.Count = req.StartBatch+lo, hi-lo
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
	WireCompression string
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

package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/internal/ipcframe"
	"github.com/augloader/augloader/wire"
)

// Flight serves the same streams over Arrow Flight (gRPC). A DoGet ticket
// is the request frame's JSON body; each FlightData carries exactly one
// message of the socket stream (metadata and body unchanged), so a Flight
// client reads the same record batches byte for byte. The gRPC trailer
// carries augloader-batches and augloader-graphs; a cut stream ends with a
// gRPC error instead.
type Flight struct {
	flight.BaseFlightServer
	Source  Source
	Dataset string
	Logger  *slog.Logger
	// Describe, when set, is the FlightInfo of a request (schema, counts);
	// ListFlights lists epoch 0 for world size 1.
	Describe func(req wire.Request) (*flight.FlightInfo, error)
	// Metrics, when set, counts Flight streams with the socket's.
	Metrics *Metrics
}

func grpcCode(err error) codes.Code {
	var we *wire.Error
	switch {
	case errors.Is(err, wire.ErrProtocol):
		return codes.InvalidArgument
	case errors.Is(err, epoch.ErrRange):
		return codes.OutOfRange
	case errors.As(err, &we) && we.Code == wire.CodeUnavailable, errors.Is(err, context.Canceled):
		return codes.Unavailable
	}
	return codes.Internal
}

// ParseTicket decodes a ticket: the JSON body of a request frame, with the
// same checks as the socket's.
func ParseTicket(t []byte) (wire.Request, error) { return wire.DecodeRequest(t) }

// DoGet streams one request.
func (f *Flight) DoGet(t *flight.Ticket, fs flight.FlightService_DoGetServer) error {
	log := f.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	req, err := ParseTicket(t.GetTicket())
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	st, err := f.Source.Open(req)
	if err != nil {
		f.Metrics.reject(wire.CodeOutOfRange)
		return status.Error(grpcCode(err), err.Error())
	}
	f.Metrics.start()
	ctx := fs.Context()
	pr, pw := io.Pipe()
	type result struct {
		batches, graphs int
		err             error
	}
	done := make(chan result, 1)
	go func() {
		b, g, err := st.WriteTo(ctx, pw)
		pw.CloseWithError(err)
		done <- result{b, g, err}
	}()
	mr := ipcframe.NewReader(pr)
	var sent int64
	var sendErr error
	for {
		meta, body, err := mr.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				sendErr = err
			}
			break
		}
		if sendErr = fs.Send(&flight.FlightData{DataHeader: meta, DataBody: body}); sendErr != nil {
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
		log.Warn("stream cut", append(attrs, "err", res.err)...)
		return status.Error(grpcCode(res.err), res.err.Error())
	}
	fs.SetTrailer(metadata.Pairs("augloader-batches", strconv.Itoa(res.batches), "augloader-graphs", strconv.Itoa(res.graphs)))
	log.Info("epoch served", attrs...)
	return nil
}

// GetFlightInfo describes the request in a CMD descriptor (its JSON).
func (f *Flight) GetFlightInfo(_ context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if d.GetType() != flight.DescriptorCMD {
		return nil, status.Error(codes.InvalidArgument, "augloader: descriptor must be a CMD holding a request's JSON")
	}
	req, err := ParseTicket(d.GetCmd())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return f.info(req)
}

func (f *Flight) info(req wire.Request) (*flight.FlightInfo, error) {
	st, err := f.Source.Open(req)
	if err != nil {
		return nil, status.Error(grpcCode(err), err.Error())
	}
	in := st.Info()
	tkt, _ := json.Marshal(req)
	fi := &flight.FlightInfo{
		FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: tkt},
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tkt}}},
		TotalRecords:     int64(in.Graphs),
		TotalBytes:       -1,
		Ordered:          true,
	}
	meta, _ := json.Marshal(in)
	fi.AppMetadata = meta
	if f.Describe != nil {
		if extra, err := f.Describe(req); err == nil && extra != nil {
			fi.Schema = extra.Schema
		}
	}
	return fi, nil
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

// FlightOptions configure ServeFlight.
type FlightOptions struct {
	// Address: grpc://HOST:PORT or grpc+unix:///PATH.
	Address string
	// AllowRemote permits a non-loopback TCP address; Token is then required.
	AllowRemote bool
	// Token, when set, must be presented as "authorization: Bearer TOKEN"
	// on every call (compared in constant time).
	Token string
}

// ListenFlight checks the address policy and opens the listener.
func ListenFlight(o FlightOptions) (net.Listener, error) {
	u, err := url.Parse(o.Address)
	if err != nil {
		return nil, fmt.Errorf("server: --flight %q: %w", o.Address, err)
	}
	switch u.Scheme {
	case "grpc+unix":
		return Listen(u.Path, 0o600)
	case "grpc", "grpc+tcp":
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
		ln, err := net.Listen("tcp", u.Host)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		return ln, nil
	}
	return nil, fmt.Errorf("server: --flight %q: want grpc://HOST:PORT or grpc+unix:///PATH", o.Address)
}

// NewFlightServer builds the gRPC server with the token check.
func NewFlightServer(f *Flight, token string) *grpc.Server {
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
	gs := grpc.NewServer(
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

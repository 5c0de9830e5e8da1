package client

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/augloader/augloader/internal/ipcframe"
	"github.com/augloader/augloader/wire"
)

// FetchFlight reads req from an augloader Flight endpoint (grpc://HOST:PORT,
// grpc+tls://HOST:PORT or grpc+unix:///PATH). It rebuilds the Arrow IPC
// stream from the FlightData messages, so Result.Digest equals the
// socket's for the same request. The response comes with the schema
// message; a stream is complete only with its trailer message, whose
// counts must match what was read. A server error is a *wire.Error.
func FetchFlight(ctx context.Context, addr, token string, req wire.Request, o Options, fn func(arrow.RecordBatch) error) (*Result, error) {
	target, tlsOn, err := flightTarget(addr)
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if tlsOn {
		cfg := o.TLS
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		creds = credentials.NewTLS(cfg)
	}
	cl, err := flight.NewClientWithMiddleware(target, nil, nil, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	defer cl.Close()
	if token == "" {
		token = o.Token
	}
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tkt, _ := json.Marshal(req)
	stream, err := cl.DoGet(ctx, &flight.Ticket{Ticket: tkt})
	if err != nil {
		return nil, noDaemon(addr, fromStatus(err))
	}
	fr := &flightReader{stream: stream, onInfo: o.onInfo}
	res := &Result{}
	if err := readArrow(fr, o, fn, res); err != nil {
		if fr.err != nil {
			return res, fromStatus(fr.err)
		}
		return res, err
	}
	res.Info = fr.info
	if fr.trailer == nil {
		return res, fmt.Errorf("client: %s: the stream ended without its trailer after %d batches: cut", addr, res.Batches)
	}
	res.Trailer = *fr.trailer
	if res.Trailer.Batches != res.Batches || res.Trailer.Graphs != res.Graphs || res.Batches != res.Info.Batches {
		return res, fmt.Errorf("client: %s: received %d batches and %d graphs, the trailer says %d and %d, the response promised %d batches",
			addr, res.Batches, res.Graphs, res.Trailer.Batches, res.Trailer.Graphs, res.Info.Batches)
	}
	return res, nil
}

// flightTarget turns a Flight URL into a gRPC target and whether it uses TLS.
func flightTarget(addr string) (string, bool, error) {
	u, err := url.Parse(addr)
	if err != nil {
		return "", false, fmt.Errorf("client: %q: %w", addr, err)
	}
	switch u.Scheme {
	case "grpc", "grpc+tcp":
		return u.Host, false, nil
	case "grpc+tls":
		return u.Host, true, nil
	case "grpc+unix":
		return "unix://" + u.Path, false, nil
	}
	return "", false, fmt.Errorf("client: %q: want grpc://HOST:PORT, grpc+tls://HOST:PORT or grpc+unix:///PATH", addr)
}

// fromStatus maps a gRPC status to the socket protocol's error codes.
// noDaemon rewrites an unavailable error whose cause is a refused or
// failed dial to say what to start; its code stays unavailable (FetchMany
// asks another daemon on it).
func noDaemon(addr string, err error) error {
	var we *wire.Error
	if errors.As(err, &we) && we.Code == wire.CodeUnavailable &&
		(strings.Contains(we.Message, "connection refused") || strings.Contains(we.Message, "while dialing")) {
		return &wire.Error{Code: we.Code, Message: fmt.Sprintf("no daemon answers at %s (start one: augloader serve --shards DIR --flight %s): %s", addr, addr, we.Message)}
	}
	return err
}

func fromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	code := wire.CodeInternal
	switch st.Code() {
	case codes.InvalidArgument:
		code = wire.CodeBadRequest
	case codes.OutOfRange:
		code = wire.CodeOutOfRange
	case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded:
		code = wire.CodeUnavailable
	case codes.Unauthenticated, codes.PermissionDenied:
		code = "unauthenticated"
	}
	return &wire.Error{Code: code, Message: st.Message()}
}

// flightReader yields the framed IPC stream rebuilt from FlightData,
// taking the response from the first message's app_metadata and the
// trailer from the data-less last message.
type flightReader struct {
	stream  flight.FlightService_DoGetClient
	buf     []byte
	off     int
	eos     bool
	err     error // a gRPC error ended the stream
	first   bool
	info    wire.Response
	trailer *wire.Trailer
	onInfo  func(wire.Response) error
}

func (f *flightReader) Read(p []byte) (int, error) {
	for f.off == len(f.buf) {
		if f.eos {
			return 0, io.EOF
		}
		fd, err := f.stream.Recv()
		switch {
		case errors.Is(err, io.EOF):
			f.buf, f.off, f.eos = append(f.buf[:0], ipcframe.EOS...), 0, true
		case err != nil:
			f.err = err
			return 0, err
		case len(fd.DataHeader) == 0:
			// The trailer: the stream is complete.
			var tr wire.Trailer
			if err := json.Unmarshal(fd.AppMetadata, &tr); err != nil {
				return 0, fmt.Errorf("client: unreadable Flight trailer: %w", err)
			}
			f.trailer = &tr
		default:
			if !f.first {
				f.first = true
				if len(fd.AppMetadata) > 0 {
					if err := json.Unmarshal(fd.AppMetadata, &f.info); err != nil {
						return 0, fmt.Errorf("client: unreadable Flight response: %w", err)
					}
				}
				if f.onInfo != nil {
					if err := f.onInfo(f.info); err != nil {
						return 0, err
					}
				}
			}
			if f.trailer != nil {
				return 0, errors.New("client: data after the Flight trailer")
			}
			f.buf, f.off = ipcframe.Append(f.buf[:0], fd.DataHeader, fd.DataBody), 0
		}
	}
	n := copy(p, f.buf[f.off:])
	f.off += n
	return n, nil
}

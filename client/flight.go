package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/augloader/augloader/internal/ipcframe"
	"github.com/augloader/augloader/wire"
)

// FetchFlight reads req from an augloader Flight endpoint (grpc://HOST:PORT
// or grpc+unix:///PATH). It rebuilds the Arrow IPC stream from the
// FlightData messages, so Result.Digest equals the socket's for the same
// request. A server error is a *wire.Error.
func FetchFlight(ctx context.Context, addr, token string, req wire.Request, o Options, fn func(arrow.RecordBatch) error) (*Result, error) {
	target, err := flightTarget(addr)
	if err != nil {
		return nil, err
	}
	cl, err := flight.NewClientWithMiddleware(target, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	defer cl.Close()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tkt, _ := json.Marshal(req)
	stream, err := cl.DoGet(ctx, &flight.Ticket{Ticket: tkt})
	if err != nil {
		return nil, fromStatus(err)
	}
	fr := &flightReader{stream: stream}
	res := &Result{}
	if err := readArrow(fr, o, fn, res); err != nil {
		if fr.err != nil {
			return res, fromStatus(fr.err)
		}
		return res, err
	}
	tr := stream.Trailer()
	b, _ := strconv.Atoi(first(tr.Get("augloader-batches")))
	g, _ := strconv.Atoi(first(tr.Get("augloader-graphs")))
	res.Trailer = wire.Trailer{Batches: b, Graphs: g}
	res.Info = wire.Response{Batches: res.Batches, Graphs: res.Graphs, Epoch: req.Epoch}
	if b != res.Batches || g != res.Graphs {
		return res, fmt.Errorf("client: received %d batches and %d graphs, the server's trailer says %d and %d", res.Batches, res.Graphs, b, g)
	}
	return res, nil
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func flightTarget(addr string) (string, error) {
	u, err := url.Parse(addr)
	if err != nil {
		return "", fmt.Errorf("client: %q: %w", addr, err)
	}
	switch u.Scheme {
	case "grpc", "grpc+tcp":
		return u.Host, nil
	case "grpc+unix":
		return "unix://" + u.Path, nil
	}
	return "", fmt.Errorf("client: %q: want grpc://HOST:PORT or grpc+unix:///PATH", addr)
}

// fromStatus maps a gRPC status to the socket protocol's error codes.
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
	case codes.Unavailable:
		code = wire.CodeUnavailable
	case codes.Unauthenticated, codes.PermissionDenied:
		code = "unauthenticated"
	}
	return &wire.Error{Code: code, Message: st.Message()}
}

// flightReader yields the framed IPC stream rebuilt from FlightData.
type flightReader struct {
	stream flight.FlightService_DoGetClient
	buf    []byte
	off    int
	eos    bool
	err    error // a gRPC error ended the stream
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
		default:
			f.buf, f.off = ipcframe.Append(f.buf[:0], fd.DataHeader, fd.DataBody), 0
		}
	}
	n := copy(p, f.buf[f.off:])
	f.off += n
	return n, nil
}

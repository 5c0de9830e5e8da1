package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/materialize"
	"github.com/augloader/augloader/server"
	"github.com/augloader/augloader/wire"
)

// serveFlight starts a Flight endpoint on a loopback port (or a Unix
// socket) and returns its address.
func serveFlight(t *testing.T, src server.Source, unix bool, token string) string {
	t.Helper()
	addr := "grpc://127.0.0.1:0"
	if unix {
		addr = "grpc+unix://" + filepath.Join(t.TempDir(), "f.sock")
	}
	ln, err := server.ListenFlight(server.FlightOptions{Address: addr, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	gs := server.NewFlightServer(&server.Flight{Source: src}, server.FlightOptions{Token: token})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.ServeFlight(ctx, gs, ln, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	if unix {
		return addr
	}
	return "grpc://" + ln.Addr().String()
}

// Flight carries the socket's messages unchanged: the rebuilt stream has
// the same digest, for live and replayed epochs, over TCP and Unix sockets.
func TestFlightEqualsSocket(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	l := newLoader(t, dir, policy, 2)
	out := t.TempDir()
	if err := materialize.Run(context.Background(), materialize.Options{Loader: l, Out: out, From: 0, To: 2, World: 2}); err != nil {
		t.Fatal(err)
	}
	rp, _ := server.OpenReplay(out)
	sock := serve(t, server.Live{L: l})
	for name, src := range map[string]server.Source{"live": server.Live{L: l}, "replay": rp} {
		for _, unix := range []bool{false, true} {
			addr := serveFlight(t, src, unix, "")
			reqs := []wire.Request{{Epoch: 1, Rank: 1, World: 2}, {Epoch: 0, Rank: 0, World: 2, StartBatch: 1}}
			if name == "live" { // an elastic resume: what 2 ranks left, over 3
				reqs = append(reqs, wire.Request{Epoch: 1, Rank: 2, World: 3, Resume: []wire.ResumePhase{{World: 2, Graphs: []int{17, 9}}}})
			}
			for _, req := range reqs {
				want := fetch(t, sock, req, nil)
				got, err := client.FetchFlight(context.Background(), addr, "", req, client.Options{Digests: true}, nil)
				if err != nil {
					t.Fatalf("%s %s %+v: %v", name, addr, req, err)
				}
				if got.Digest != want.Digest || got.Batches != want.Batches || got.Graphs != want.Graphs {
					t.Fatalf("%s %s %+v: flight %d batches %x, socket %d batches %x", name, addr, req, got.Batches, got.Digest[:4], want.Batches, want.Digest[:4])
				}
			}
			_, err := client.FetchFlight(context.Background(), addr, "", wire.Request{Epoch: 0, Rank: 5, World: 2}, client.Options{}, nil)
			var we *wire.Error
			if !errors.As(err, &we) || we.Code != wire.CodeOutOfRange {
				t.Fatalf("%s: out-of-range request over Flight: %v", name, err)
			}
		}
	}
}

func TestFlightAuthAndBind(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	src := server.Live{L: newLoader(t, dir, policy, 2)}
	addr := serveFlight(t, src, false, "s3cret")
	req := wire.Request{Epoch: 0, World: 1}
	for _, tok := range []string{"", "wrong", "s3cret-but-longer"} {
		_, err := client.FetchFlight(context.Background(), addr, tok, req, client.Options{}, nil)
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != "unauthenticated" {
			t.Fatalf("token %q: %v", tok, err)
		}
	}
	if _, err := client.FetchFlight(context.Background(), addr, "s3cret", req, client.Options{}, nil); err != nil {
		t.Fatal(err)
	}
	// Binding beyond loopback needs the flag and a token.
	if _, err := server.ListenFlight(server.FlightOptions{Address: "grpc://0.0.0.0:0"}); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("remote bind without the flag: %v", err)
	}
	if _, err := server.ListenFlight(server.FlightOptions{Address: "grpc://0.0.0.0:0", AllowRemote: true}); err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("remote bind without a token: %v", err)
	}
	ln, err := server.ListenFlight(server.FlightOptions{Address: "grpc://0.0.0.0:0", AllowRemote: true, Token: "x"})
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	// HOST:PORT without a scheme is grpc://HOST:PORT, policy included.
	if ln, err = server.ListenFlight(server.FlightOptions{Address: "127.0.0.1:0"}); err != nil {
		t.Fatalf("127.0.0.1:0: %v", err)
	}
	ln.Close()
	if _, err := server.ListenFlight(server.FlightOptions{Address: "0.0.0.0:0"}); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("0.0.0.0:0 without the flag: %v", err)
	}
}

// FuzzParseTicket: a Flight ticket gets the socket request's checks.
func FuzzParseTicket(f *testing.F) {
	f.Add([]byte(`{"epoch":1,"rank":0,"world":2}`))
	f.Add([]byte(`{"epoch":-1}`))
	f.Add([]byte(`{"path":"/etc/passwd"}`))
	f.Fuzz(func(t *testing.T, tkt []byte) {
		req, err := server.ParseTicket(tkt)
		if err != nil {
			return
		}
		if req.Rank < 0 || req.World < 0 || req.BatchSize < 0 || req.StartBatch < 0 {
			t.Fatalf("accepted %+v", req)
		}
	})
}

// ListFlights and GetFlightInfo describe the dataset and a request, with a
// ticket that DoGet accepts.
func TestFlightInfo(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	addr := serveFlight(t, server.Live{L: newLoader(t, dir, policy, 2)}, false, "")
	cl, err := flight.NewClientWithMiddleware(strings.TrimPrefix(addr, "grpc://"), nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	list, err := cl.ListFlights(ctx, &flight.Criteria{})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := list.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if fi.TotalRecords != 60 || len(fi.Endpoint) != 1 || !fi.Ordered {
		t.Fatalf("ListFlights: %+v", fi)
	}
	var info wire.Response
	if err := json.Unmarshal(fi.AppMetadata, &info); err != nil || info.Batches != 4 {
		t.Fatalf("app metadata %s: %v", fi.AppMetadata, err)
	}
	req, _ := json.Marshal(wire.Request{Epoch: 2, Rank: 1, World: 3})
	fi, err = cl.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: req})
	if err != nil || fi.TotalRecords != 20 {
		t.Fatalf("GetFlightInfo: %+v %v", fi, err)
	}
	var got wire.Request
	json.Unmarshal(fi.Endpoint[0].Ticket.Ticket, &got)
	res, err := client.FetchFlight(ctx, addr, "", got, client.Options{}, nil)
	if err != nil || res.Graphs != 20 {
		t.Fatalf("DoGet with the info's ticket: %v %+v", err, res)
	}
	if _, err := cl.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"x"}}); err == nil {
		t.Fatal("PATH descriptor accepted")
	}
}

package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/internal/fixture"
	"github.com/augloader/augloader/server"
	"github.com/augloader/augloader/wire"
)

func TestMetrics(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	m := server.NewMetrics()
	sock := serveWith(t, server.Options{Source: server.Live{L: newLoader(t, dir, policy, 2)}, Metrics: m, Drain: time.Second})
	var bytes int64
	for e := range uint64(3) {
		bytes += fetch(t, sock, wire.Request{Epoch: e, World: 1}, nil).Bytes
	}
	client.Fetch(context.Background(), sock, wire.Request{Epoch: 0, Rank: 9, World: 2}, client.Options{}, nil)
	hs := httptest.NewServer(server.MetricsHandler(m))
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		"augloader_server_streams_total 3\n",
		"augloader_server_streams_active 0\n",
		"augloader_server_graphs_total 180\n",
		"augloader_server_batches_total 12\n",
		`augloader_server_rejected_total{code="out_of_range"} 1`,
		"# TYPE augloader_loader_worker_busy_seconds_total counter",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
	if want := fmt.Sprintf("augloader_server_sent_bytes_total %d\n", bytes); !strings.Contains(text, want) {
		t.Errorf("metrics lack %q (what the client read)", want)
	}
}

// A live epoch served over Flight counts its workers' busy time in the
// same counters as the socket (it was left at zero before).
func TestMetricsFlightWorkerTime(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	m := server.NewMetrics()
	ln, err := server.ListenFlight(server.FlightOptions{Address: "grpc://127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	gs := server.NewFlightServer(&server.Flight{Source: server.Live{L: newLoader(t, dir, policy, 2)}, Metrics: m}, "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.ServeFlight(ctx, gs, ln, time.Second) }()
	defer func() { cancel(); <-done }()
	if _, err := client.FetchFlight(context.Background(), "grpc://"+ln.Addr().String(), "", wire.Request{Epoch: 1, World: 1}, client.Options{}, nil); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	m.WriteText(&text)
	for _, line := range strings.Split(text.String(), "\n") {
		if v, ok := strings.CutPrefix(line, "augloader_loader_worker_busy_seconds_total "); ok {
			if v == "0" || strings.HasPrefix(v, "0 ") {
				t.Fatalf("worker busy after a Flight epoch: %q", line)
			}
			return
		}
	}
	t.Fatalf("no worker busy counter:\n%s", text.String())
}

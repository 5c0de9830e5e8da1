package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/server"
	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/wire"
)

func TestMetrics(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	m := server.NewMetrics()
	sock := serveWith(t, server.Options{Source: server.Live{L: newLoader(t, dir, policy, 2)}, Metrics: m, Limits: server.Limits{Drain: time.Second}})
	var bytes int64
	for e := range uint64(3) {
		bytes += fetch(t, sock, wire.Request{Epoch: e, World: 1}, nil).Bytes
	}
	client.Fetch(context.Background(), sock, wire.Request{Epoch: 0, Rank: 9, World: 2}, client.Options{}, nil)
	hs := httptest.NewServer(server.MetricsHandler(m, nil))
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
		"# TYPE augloader_loader_worker_idle_seconds_total counter",
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
	gs := server.NewFlightServer(&server.Flight{Source: server.Live{L: newLoader(t, dir, policy, 2)}, Metrics: m}, server.FlightOptions{})
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

// Workers waiting on a slow client count as idle, and a worker's busy and
// idle time together never exceed the stream's duration.
func TestWorkerIdle(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	const workers = 2
	l := newLoader(t, dir, "nodesam", workers)
	p, err := l.Plan(wire.Request{Epoch: 1, World: 1, BatchSize: 2}) // 30 batches: more than the window
	if err != nil {
		t.Fatal(err)
	}
	const nap = 10 * time.Millisecond
	st, err := l.Stream(context.Background(), p, func(arrow.RecordBatch) error { time.Sleep(nap); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if st.Batches != 30 {
		t.Fatalf("%d batches", st.Batches)
	}
	// The window fills at once; from then on each worker waits about a
	// nap for room for its next batch, until the last is handed out.
	if st.WorkerIdle < 10*nap {
		t.Errorf("idle %v with a sink sleeping %v per batch (busy %v, elapsed %v)", st.WorkerIdle, nap, st.WorkerBusy, st.Elapsed)
	}
	if total := st.WorkerBusy + st.WorkerIdle; total > workers*st.Elapsed {
		t.Errorf("busy %v + idle %v > %d workers × %v", st.WorkerBusy, st.WorkerIdle, workers, st.Elapsed)
	}
}

// SubMix sends a graph unchanged, with its hard label, when the mix would
// have no edge (docs/schedule.md): /metrics counts those graphs. Here every
// graph is edgeless, so every SubMix draw is one.
func TestMetricsSubMixUnchanged(t *testing.T) {
	out := filepath.Join(t.TempDir(), "edgeless")
	w, err := shard.NewWriter(out, shard.WriterOptions{Dataset: "EDGELESS", FeatureKind: shard.FeatureLabels, FeatureDim: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(6) {
		if err := w.Append(&shard.Graph{ID: i, Label: int32(i % 2), NumNodes: 3, Codes: []int32{0, 1, 0}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Finish(shard.Manifest{Classes: 2, LabelMap: []string{"0", "1"}}); err != nil {
		t.Fatal(err)
	}
	m := server.NewMetrics()
	sock := serveWith(t, server.Options{Source: server.Live{L: newLoader(t, out, "submix", 2)}, Metrics: m, Limits: server.Limits{Drain: time.Second}})
	fetch(t, sock, wire.Request{Epoch: 0, World: 1}, nil)
	var b strings.Builder
	m.WriteText(&b)
	if !strings.Contains(b.String(), "augloader_aug_submix_unchanged_total 6\n") {
		t.Fatalf("metrics:\n%s", b.String())
	}
}

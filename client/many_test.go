package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/server"
	"github.com/augloader/augloader/wire"
)

func TestMain(m *testing.M) { fixture.Main(m) }

func newLoader(t *testing.T, dir, policy string, seed uint64) *loader.Loader {
	t.Helper()
	return fixture.Loader(t, dir, nil, policy, loader.Config{Seed: seed, Workers: 2, BatchSize: 4})
}

// daemon runs a socket server for src and returns its address.
func daemon(t *testing.T, src server.Source) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "d.sock")
	ctx, stop := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.DaemonOptions{Source: src, Socket: sock, Limits: server.Limits{Drain: 100 * time.Millisecond},
			Ready: func(server.Endpoints) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(); <-done })
	return "unix://" + sock
}

// dying serves its source's streams but cuts each after limit bytes, as a
// daemon killed mid-epoch does; stalling hangs instead.
type dying struct {
	src   server.Source
	limit int64
	stall bool
	hits  atomic.Int64
}

type dyingStream struct {
	server.Stream
	d *dying
}

func (d *dying) Open(req wire.Request) (server.Stream, error) {
	st, err := d.src.Open(req)
	if err != nil {
		return nil, err
	}
	return dyingStream{st, d}, nil
}

type cutWriter struct {
	w     io.Writer
	left  int64
	stall bool
	ctx   context.Context
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		if c.stall {
			<-c.ctx.Done()
			return 0, c.ctx.Err()
		}
		return 0, errors.New("killed")
	}
	c.left -= int64(len(p))
	return c.w.Write(p)
}

func (s dyingStream) WriteTo(ctx context.Context, w io.Writer) (int, int, error) {
	s.d.hits.Add(1)
	return s.Stream.WriteTo(ctx, &cutWriter{w: w, left: s.d.limit, stall: s.d.stall, ctx: ctx})
}

// Three daemons serve one epoch together, byte for byte what one sends;
// with one of them cut mid-epoch (or stalled) the epoch still arrives
// whole and in order; a daemon with another seed is refused.
func TestFetchMany(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 90, 5)
	const pol = "submix:p=0.4,nodesam"
	l := newLoader(t, dir, pol, 3)
	a, b, c := daemon(t, server.Live{L: l}), daemon(t, server.Live{L: newLoader(t, dir, pol, 3)}), daemon(t, server.Live{L: newLoader(t, dir, pol, 3)})
	ctx := context.Background()
	digests := func(res *client.Result, err error) [][32]byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return res.BatchDigests
	}
	for _, req := range []wire.Request{{Epoch: 2, World: 1}, {Epoch: 5, Rank: 1, World: 2, StartBatch: 1}, {Epoch: 1, World: 1, Count: 7}, {Epoch: 1, World: 1, Stride: 2}} {
		oneRes, err := client.FetchAddr(ctx, a, req, client.Options{Digests: true}, nil)
		one := digests(oneRes, err)
		var order []int64
		res, err := client.FetchMany(ctx, []string{a, b, c}, req, client.Options{Digests: true}, func(rec arrow.RecordBatch) error {
			order = append(order, rec.Column(0).(interface{ Value(int) int64 }).Value(0))
			return nil
		})
		three := digests(res, err)
		if len(three) != len(one) || len(one) == 0 {
			t.Fatalf("%+v: %d batches from three daemons, %d from one", req, len(three), len(one))
		}
		for i := range one {
			if one[i] != three[i] {
				t.Fatalf("%+v: batch %d differs", req, i)
			}
		}
		// Bytes: the batches' own, so less than one stream's (which also
		// holds the schema and end marker), by at most a few KiB.
		if res.Bytes <= 0 || res.Bytes > oneRes.Bytes || oneRes.Bytes-res.Bytes > 4<<10 {
			t.Fatalf("%+v: %d batch bytes from three daemons, a %d-byte stream from one", req, res.Bytes, oneRes.Bytes)
		}
	}
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	whole := digests(client.FetchAddr(ctx, a, wire.Request{Epoch: 4, World: 1}, client.Options{Digests: true}, nil))
	for _, stall := range []bool{false, true} {
		logs.Reset()
		d := &dying{src: server.Live{L: newLoader(t, dir, pol, 3)}, limit: 200 << 10, stall: stall}
		bad := daemon(t, d)
		got := digests(client.FetchMany(ctx, []string{a, bad, c}, wire.Request{Epoch: 4, World: 1},
			client.Options{Digests: true, BatchTimeout: time.Second, Logger: logger}, nil))
		if len(got) != len(whole) {
			t.Fatalf("stall %v: %d batches, want %d", stall, len(got), len(whole))
		}
		for i := range whole {
			if got[i] != whole[i] {
				t.Fatalf("stall %v: batch %d differs after failover", stall, i)
			}
		}
		if !strings.Contains(logs.String(), "daemon failed") || !strings.Contains(logs.String(), strings.TrimPrefix(bad, "unix://")) {
			t.Fatalf("stall %v: the failed daemon is not named:\n%s", stall, logs.String())
		}
	}
	other := daemon(t, server.Live{L: newLoader(t, dir, pol, 4)})
	_, err := client.FetchMany(ctx, []string{a, other}, wire.Request{Epoch: 4, World: 1}, client.Options{}, nil)
	if err == nil || !strings.Contains(err.Error(), "refusing to mix") || !(strings.Contains(err.Error(), "seed 3 vs 4") || strings.Contains(err.Error(), "seed 4 vs 3")) {
		t.Fatalf("a daemon with another seed: %v", err)
	}
}

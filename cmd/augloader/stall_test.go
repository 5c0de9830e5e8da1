package main

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/s3test"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/wire"
)

// stallProxy passes requests to the S3 server until stalling is set; from
// then on a GET of an object whose path holds match (default a shard's,
// "/shard-") gets the store's headers and then not a byte; stalled counts
// them.
type stallProxy struct {
	target   *url.URL
	match    string
	stalling atomic.Bool
	stalled  atomic.Int64
	open     atomic.Int64 // stalled GETs whose request has not ended
}

func (s *stallProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := httputil.NewSingleHostReverseProxy(s.target)
	match := s.match
	if match == "" {
		match = "/shard-"
	}
	if s.stalling.Load() && r.Method == http.MethodGet && strings.Contains(r.URL.Path, match) {
		s.stalled.Add(1)
		s.open.Add(1)
		defer s.open.Add(-1)
		p.FlushInterval = -1
		p.ModifyResponse = func(resp *http.Response) error {
			resp.Body = stalledBody{r.Context()}
			return nil
		}
	}
	p.ServeHTTP(w, r)
}

type stalledBody struct{ ctx context.Context }

func (b stalledBody) Read([]byte) (int, error) {
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

func (stalledBody) Close() error { return nil }

// A daemon whose store stalls mid-epoch (headers, then nothing): the
// stream ends with an error naming the object within the request
// timeout, and SIGTERM ends the daemon within its drain and a little,
// not after the store's timeouts.
func TestServeStalledStore(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 600, 5, 1<<20)
	srv := s3test.Shared(t)
	loc := srv.Upload(t, "data", "collab", dir)
	target, _ := url.Parse(srv.Endpoint)
	proxy := &stallProxy{target: target}
	srv.Env(t, testutil.ServeHTTP(t, proxy))
	args := []string{"--shards", loc, "--policy", "nodesam", "--seed", "7", "--cache-limit", "16MiB", "--drain", "1s"}

	t.Run("time-to-error", func(t *testing.T) {
		proxy.stalling.Store(false)
		d := startDaemon(t, "AUGLOADER_S3_IDLE_TIMEOUT=300ms AUGLOADER_S3_REQUEST_TIMEOUT=3s", args...)
		proxy.stalling.Store(true)
		t0 := time.Now()
		_, err := client.Fetch(context.Background(), d.sock, wire.Request{Epoch: 1, World: 1}, client.Options{Digests: true}, nil)
		took := time.Since(t0)
		if err == nil || !strings.Contains(err.Error(), "shard-") {
			t.Fatalf("a stalled store: want the stream's error naming the object, got %v\n%s", err, d.logs)
		}
		if took > 60*time.Second {
			t.Fatalf("the error came after %s, against a request timeout of 3 s", took)
		}
		t.Logf("error after %s: %v", took.Round(time.Millisecond), err)
		d.stop(t)
	})
	t.Run("sigterm", func(t *testing.T) {
		proxy.stalling.Store(false)
		d := startDaemon(t, "", args...) // the defaults: 15 s idle, 2 minutes a request
		proxy.stalling.Store(true)
		fetched := make(chan error, 1)
		go func() {
			_, err := client.Fetch(context.Background(), d.sock, wire.Request{Epoch: 1, World: 1}, client.Options{Digests: true}, nil)
			fetched <- err
		}()
		time.Sleep(2 * time.Second) // the stream waits on a stalled read
		if took := d.stop(t); took > 15*time.Second {
			t.Fatalf("SIGTERM with a read stalled: exit after %s (drain 1 s)", took)
		} else {
			t.Logf("exit %s after SIGTERM", took.Round(time.Millisecond))
		}
		select {
		case err := <-fetched:
			if err == nil {
				t.Fatal("the stream over a stalled store ended without an error")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the client still waits after the daemon exited")
		}
	})
}

// A client that goes away while its stream's reads stall ends them all,
// SubMix's partners' included (they read under context.Background(), so
// each waited out the request timeout, 2 minutes by default, holding its
// worker). Under the smallest cache limit most graphs read a page, the
// target's and its partner's.
func TestClientGoneEndsPartnerReads(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 1200, 5, 256<<10)
	srv := s3test.Shared(t)
	loc := srv.Upload(t, "data", "collab", dir)
	target, _ := url.Parse(srv.Endpoint)
	proxy := &stallProxy{target: target}
	srv.Env(t, testutil.ServeHTTP(t, proxy))
	d := startDaemon(t, "", "--shards", loc, "--policy", "submix", "--seed", "7", "--cache-limit", "16MiB", "--workers", "8", "--drain", "1s")
	proxy.stalling.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	fetched := make(chan error, 1)
	go func() {
		_, err := client.Fetch(ctx, d.sock, wire.Request{Epoch: 1, World: 1, BatchSize: 8}, client.Options{}, nil)
		fetched <- err
	}()
	// The 8 workers wait on stalled reads (some on one page's).
	for deadline := time.Now().Add(30 * time.Second); proxy.open.Load() < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d stalled reads after 30 s, want the workers'\n%s", proxy.open.Load(), d.logs)
		}
	}
	time.Sleep(time.Second)
	cancel()
	<-fetched
	t0 := time.Now()
	for proxy.open.Load() > 0 {
		if time.Since(t0) > 10*time.Second {
			t.Fatalf("%d reads still wait on the store 10 s after their client went away (a request timeout is 2 minutes)\n%s", proxy.open.Load(), d.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the stalled reads (%d asked) ended %s after the client went away", proxy.stalled.Load(), time.Since(t0).Round(time.Millisecond))
	d.stop(t)
}

// A start stalled on the graph-size index (the store sends its headers,
// then nothing): SIGTERM ends the daemon at once, and unsignalled the
// start fails naming the object after one request timeout, not three
// (the index was read three times at start, each without the daemon's
// context: 340 s after SIGTERM, 362 s to the error with the defaults).
func TestStartStalledOnGraphSizes(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 200, 5, 1<<20)
	srv := s3test.Shared(t)
	loc := srv.Upload(t, "data", "collab", dir)
	target, _ := url.Parse(srv.Endpoint)
	proxy := &stallProxy{target: target, match: "graph-sizes"}
	proxy.stalling.Store(true)
	srv.Env(t, testutil.ServeHTTP(t, proxy))
	args := []string{bin, "serve", "--socket", filepath.Join(t.TempDir(), "aug.sock"), "--shards", loc, "--policy", "nodesam", "--cache-limit", "16MiB"}
	start := func(env ...string) (*exec.Cmd, *testutil.SyncBuffer) {
		logs := &testutil.SyncBuffer{}
		cmd := testutil.DieWithTest(exec.Command(args[0], args[1:]...))
		cmd.Env, cmd.Stderr = append(os.Environ(), env...), logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
		return cmd, logs
	}
	waitStalled := func(logs *testutil.SyncBuffer) {
		for deadline := time.Now().Add(30 * time.Second); proxy.stalled.Load() == 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the daemon never asked for the graph-size index:\n%s", logs)
			}
		}
		time.Sleep(300 * time.Millisecond) // its read waits on the stalled body
	}

	t.Run("sigterm", func(t *testing.T) {
		proxy.stalled.Store(0)
		cmd, logs := start() // the defaults: 15 s idle, 2 minutes a request
		waitStalled(logs)
		t0 := time.Now()
		cmd.Process.Signal(syscall.SIGTERM)
		if !exitWithin(cmd, 10*time.Second) {
			t.Fatalf("SIGTERM at a start stalled on the graph-size index: still running after 10 s\n%s", logs)
		}
		if !cmd.ProcessState.Success() || !strings.Contains(logs.String(), "stopped before it was ready") {
			t.Errorf("SIGTERM at start: want a clean exit saying so, got %v:\n%s", cmd.ProcessState, logs)
		}
		t.Logf("exit %s after SIGTERM (%v): %s", time.Since(t0).Round(time.Millisecond), cmd.ProcessState, strings.TrimSpace(logs.String()))
		if n := proxy.stalled.Load(); n != 1 {
			t.Errorf("the index was asked for %d times before the exit, want once", n)
		}
	})
	t.Run("time-to-error", func(t *testing.T) {
		proxy.stalled.Store(0)
		t0 := time.Now()
		cmd, logs := start("AUGLOADER_S3_IDLE_TIMEOUT=300ms", "AUGLOADER_S3_REQUEST_TIMEOUT=3s")
		err := cmd.Wait()
		took := time.Since(t0)
		if err == nil || !strings.Contains(logs.String(), "graph-sizes") {
			t.Fatalf("a start stalled on the graph-size index: want a failure naming it, got %v:\n%s", err, logs)
		}
		t.Logf("failed after %s, %d reads of the index: %s", took.Round(time.Millisecond), proxy.stalled.Load(), strings.TrimSpace(logs.String()))
		if took > 30*time.Second {
			t.Errorf("the start failed after %s, against a request timeout of 3 s", took)
		}
	})
}

// exitWithin waits for cmd to exit, at most d; false: it still runs.
func exitWithin(cmd *exec.Cmd, d time.Duration) bool {
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

package main

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/s3test"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/wire"
)

// stallProxy passes requests to the S3 server until stalling is set; from
// then on a shard's GET gets the store's headers and then not a byte.
type stallProxy struct {
	target   *url.URL
	stalling atomic.Bool
}

func (s *stallProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := httputil.NewSingleHostReverseProxy(s.target)
	if s.stalling.Load() && r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/shard-") {
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
	srv := s3test.Start(t)
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

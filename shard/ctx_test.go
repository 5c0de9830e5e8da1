package shard_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/shard"
)

// stallStore's reads of shard files wait for their ctx to end while
// stalled is set, and say so on stalling.
type stallStore struct {
	shard.Store
	stalled  atomic.Bool
	stalling chan struct{}
}

type stallFile struct {
	shard.StoreFile
	s *stallStore
}

func (s *stallStore) Open(ctx context.Context, name string) (shard.StoreFile, error) {
	f, err := s.Store.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return stallFile{f, s}, nil
}

func (f stallFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if f.s.stalled.Load() {
		f.s.stalling <- struct{}{}
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return f.StoreFile.ReadAt(ctx, p, off)
}

// A pin gives up with its ctx on a stalled store; a pin that waited for
// that one's read of the shard (its index) is not failed by it, and
// reads the shard itself once the store answers again.
func TestPinContext(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 200, 2, 128<<10)
	st := &stallStore{Store: shard.DirStore(dir), stalling: make(chan struct{}, 4)}
	r, err := shard.OpenStore(context.Background(), st, shard.WithCacheLimit(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Graph 0's page and another page of its shard.
	if r.NumPages() < 2 || r.ShardOf(r.Manifest().IDAt(0)) != r.ShardOf(r.Manifest().IDAt(mustFirst(r, 1))) {
		t.Fatalf("want two pages in the first shard: %d pages", r.NumPages())
	}
	other := r.Manifest().IDAt(mustFirst(r, 1))
	st.stalled.Store(true)
	first, cancel := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() {
		_, _, err := r.Pin(first, r.Manifest().IDAt(0))
		firstErr <- err
	}()
	<-st.stalling
	waiter := make(chan error, 1)
	go func() {
		_, release, err := r.Pin(context.Background(), other)
		if err == nil {
			release()
		}
		waiter <- err
	}()
	time.Sleep(50 * time.Millisecond) // the waiter waits for the shard's index
	st.stalled.Store(false)
	cancel()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("a pin whose ctx ended on a stalled store: %v, want context.Canceled", err)
	}
	select {
	case err := <-waiter:
		if err != nil {
			t.Fatalf("the waiting pin failed with the other's ended ctx: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting pin never ended")
	}
}

// mustFirst is page p's first position.
func mustFirst(r *shard.Reader, p int) int64 {
	first, _ := r.PageGraphs(p)
	return first
}

package shard_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/shard"
)

// panicStore panics in the ReadAt of its armed-th read (a bug below the
// reader, not bad bytes).
type panicStore struct {
	shard.Store
	armed atomic.Int64
}

type panicFile struct {
	shard.StoreFile
	s *panicStore
}

func (s *panicStore) Open(ctx context.Context, name string) (shard.StoreFile, error) {
	f, err := s.Store.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return panicFile{f, s}, nil
}

func (f panicFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if f.s.armed.Add(-1) == 0 {
		panic("panicStore: the armed read")
	}
	return f.StoreFile.ReadAt(ctx, p, off)
}

// A panic while a page loads, recovered by the caller (as a worker does),
// leaves the reader usable: the next Pin of that page loads it, and no
// goroutine waits forever on a lock or on the failed load.
func TestPanicDuringLoadLeavesReaderUsable(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 60, 2, 64<<10)
	st := &panicStore{Store: shard.DirStore(dir)}
	st.armed.Store(1 << 40)
	r, err := shard.OpenStore(context.Background(), st, shard.WithCacheLimit(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st.armed.Store(1) // the next read panics
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the armed read did not panic through Pin")
			}
		}()
		_, rel, err := r.Pin(context.Background(), 0)
		if err == nil {
			rel()
		}
		t.Fatalf("Pin returned (%v) where the store panicked", err)
	}()
	done := make(chan error, 1)
	go func() {
		_, rel, err := r.Pin(context.Background(), 0)
		if err == nil {
			rel()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Pin after a recovered panic hangs")
	}
}

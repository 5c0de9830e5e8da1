package server

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/augloader/augloader/loader"
)

// ringFD makes a client's ring as checkRing takes it: a memfd of size
// bytes, sealed against shrinking.
func ringFD(t *testing.T, size int64) int { return Memfd(t, size, unix.F_SEAL_SHRINK) }

// dupFD is another descriptor of fd's file, as a client's next request
// passes it.
func dupFD(t *testing.T, fd int) int {
	t.Helper()
	d, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(d) })
	return d
}

func mustGet(t *testing.T, c *ringCache, fd int, n int64) *cachedRing {
	t.Helper()
	r, err := c.get(fd, n)
	if err != nil || r == nil {
		t.Fatalf("get(%d bytes): %v, %v", n, r, err)
	}
	return r
}

// A ring comes back mapped for the next stream over the same file, by any
// descriptor of it, while its share of the ring stays within 2x; a busy
// mapping is never shared, and a larger share maps anew. Every mapping
// holds its bytes of the budget until it is unmapped.
func TestRingCacheReuse(t *testing.T) {
	const n = 256 << 10
	budget := loader.NewMemory(8 << 20)
	c := newRingCache(budget, NewMetrics())
	a := ringFD(t, 4<<20)
	steps := []struct {
		name     string
		fd       int
		n        int64
		same     bool // the first stream's mapping
		maps     int
		heldWant int64
	}{
		{"first stream maps", a, n, true, 1, n},
		{"the next, by another descriptor, reuses it", dupFD(t, a), n, true, 1, n},
		{"a smaller share reuses it", a, n * 3 / 4, true, 1, n},
		{"a share over 2x maps anew", a, 3 * n, false, 2, 4 * n},
		{"another ring maps its own", ringFD(t, 4<<20), n, false, 3, 5 * n},
	}
	var first *cachedRing
	for _, s := range steps {
		r := mustGet(t, c, s.fd, s.n)
		if first == nil {
			first = r
		}
		if (r == first) != s.same || int(c.metrics.ringMaps.Load()) != s.maps || budget.Held() != s.heldWant || int64(len(r.mem)) < s.n {
			t.Fatalf("%s: same mapping %v, %d maps, %d bytes held, %d mapped; want %v, %d, %d, >= %d",
				s.name, r == first, c.metrics.ringMaps.Load(), budget.Held(), len(r.mem), s.same, s.maps, s.heldWant, s.n)
		}
		c.put(r)
	}
	r1 := mustGet(t, c, a, n)
	r2 := mustGet(t, c, a, n)
	if r1 == r2 {
		t.Fatal("two streams at once over one ring share a mapping")
	}
	c.put(r1)
	c.put(r2)
	c.close()
	if len(c.rings) != 0 || budget.Held() != 0 {
		t.Fatalf("closed: %d rings kept, %d bytes held", len(c.rings), budget.Held())
	}
}

// Idle mappings give way: to a take of the budget that lacks room, past
// maxIdleRings, after ringIdleTTL, at close (a busy one once its stream
// gives it back).
func TestRingCacheGivesWay(t *testing.T) {
	const n = 256 << 10
	t.Run("budget", func(t *testing.T) {
		budget := loader.NewMemory(3 * n)
		c := newRingCache(budget, NewMetrics())
		c.put(mustGet(t, c, ringFD(t, 1<<20), 2*n))
		if budget.Held() != 2*n {
			t.Fatalf("idle ring holds %d bytes, want %d", budget.Held(), 2*n)
		}
		if !budget.TryAcquire(2 * n) {
			t.Fatal("a take that needs an idle ring's bytes was refused")
		}
		if len(c.rings) != 0 || budget.Held() != 2*n {
			t.Fatalf("after the take: %d rings kept, %d bytes held", len(c.rings), budget.Held())
		}
		// A new ring the budget has no room for: no mapping, no error
		// (the stream goes inline).
		if r, err := c.get(ringFD(t, 1<<20), 2*n); r != nil || err != nil {
			t.Fatalf("get beyond the budget: %v, %v", r, err)
		}
		budget.Release(2 * n)
	})
	t.Run("count", func(t *testing.T) {
		budget := loader.NewMemory(64 << 20)
		c := newRingCache(budget, NewMetrics())
		for range maxIdleRings + 2 {
			c.put(mustGet(t, c, ringFD(t, 1<<20), n))
		}
		if len(c.rings) != maxIdleRings || budget.Held() != maxIdleRings*n {
			t.Fatalf("%d rings kept, %d bytes held; want %d, %d", len(c.rings), budget.Held(), maxIdleRings, maxIdleRings*n)
		}
		c.close()
	})
	t.Run("ttl and close", func(t *testing.T) {
		budget := loader.NewMemory(64 << 20)
		c := newRingCache(budget, NewMetrics())
		old, recent := mustGet(t, c, ringFD(t, 1<<20), n), mustGet(t, c, ringFD(t, 1<<20), n)
		busy := mustGet(t, c, ringFD(t, 1<<20), n)
		c.put(old)
		c.put(recent)
		c.mu.Lock()
		old.idle = time.Now().Add(-ringIdleTTL - time.Second)
		c.mu.Unlock()
		c.expire()
		if len(c.rings) != 2 || c.index(old) >= 0 || budget.Held() != 2*n {
			t.Fatalf("after expiry: %d rings kept (the old one: %v), %d bytes held", len(c.rings), c.index(old) >= 0, budget.Held())
		}
		c.close()
		if len(c.rings) != 1 || budget.Held() != n {
			t.Fatalf("closed with a stream running: %d rings kept, %d bytes held; want its 1, %d", len(c.rings), budget.Held(), n)
		}
		c.put(busy)
		c.put(mustGet(t, c, ringFD(t, 1<<20), n)) // a stream after close maps its own
		if len(c.rings) != 0 || budget.Held() != 0 {
			t.Fatalf("after the last stream: %d rings kept, %d bytes held", len(c.rings), budget.Held())
		}
	})
}

package ordered_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/augloader/augloader/internal/ordered"
)

type item struct {
	in, out int
	buf     []int
}

// square runs n items through Run, each item's work taking a random few
// microseconds, and returns what consume saw.
func square(t *testing.T, ctx context.Context, n, workers, failAt int, produceErr error) ([]int, error) {
	t.Helper()
	var got []int
	err := ordered.Run(ctx, workers, func(p *ordered.Producer[item]) error {
		for i := range n {
			it := p.Next()
			it.in = i
			it.buf = append(it.buf[:0], i)
			if err := p.Send(); err != nil {
				return err
			}
		}
		return produceErr
	}, func() func(*item) {
		r := rand.New(rand.NewPCG(uint64(workers), 1))
		return func(it *item) {
			time.Sleep(time.Duration(r.IntN(50)) * time.Microsecond)
			it.out = it.in * it.in
		}
	}, func(it *item) error {
		if len(it.buf) != 1 || it.buf[0] != it.in {
			t.Fatalf("item %d carries %v: the producer's fill was not its own", it.in, it.buf)
		}
		if it.in == failAt {
			return errFail
		}
		got = append(got, it.out)
		return nil
	})
	return got, err
}

var errFail = errors.New("consume failed")

func TestRunKeepsOrder(t *testing.T) {
	errProduce := errors.New("produce failed")
	for _, tc := range []struct {
		name       string
		n, workers int
		failAt     int
		produceErr error
		want       int // items consumed
		wantErr    error
	}{
		{"empty", 0, 4, -1, nil, 0, nil},
		{"one worker", 200, 1, -1, nil, 200, nil},
		{"many workers", 2000, 8, -1, nil, 2000, nil},
		{"zero workers means one", 50, 0, -1, nil, 50, nil},
		{"consume fails", 2000, 4, 700, nil, 700, errFail},
		{"consume fails at the first", 2000, 4, 0, nil, 0, errFail},
		{"produce fails after its items", 100, 4, -1, errProduce, 100, errProduce},
		{"consume's error wins over produce's", 100, 4, 10, errProduce, 10, errFail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := square(t, context.Background(), tc.n, tc.workers, tc.failAt, tc.produceErr)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if len(got) != tc.want {
				t.Fatalf("%d items consumed, want %d", len(got), tc.want)
			}
			for i, v := range got {
				if v != i*i {
					t.Fatalf("item %d: %d, want %d (out of order)", i, v, i*i)
				}
			}
		})
	}
}

func TestRunStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := square(t, ctx, 1_000_000, 2, -1, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled from a cancelled run", err)
	}
}

// BenchmarkRun is the pool's own cost an item (work that does nothing).
func BenchmarkRun(b *testing.B) {
	b.ReportAllocs()
	err := ordered.Run(context.Background(), 2, func(p *ordered.Producer[item]) error {
		for i := range b.N {
			p.Next().in = i
			if err := p.Send(); err != nil {
				return err
			}
		}
		return nil
	}, func() func(*item) { return func(it *item) { it.out = it.in } }, func(*item) error { return nil })
	if err != nil {
		b.Fatal(err)
	}
}

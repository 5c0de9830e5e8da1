// Package ordered runs work on a pool of goroutines over a stream of items
// and hands the items back in the order they came: the shape of every
// stage here that parses or computes side by side but must write in input
// order (an extended XYZ file's frames, a set's neighbour lists on their
// way into shards).
//
// Contract:
//   - Run calls produce once, on a goroutine of its own. produce takes an
//     item with Producer.Next, fills it, and hands it on with
//     Producer.Send; each item sent is passed to the work function of one
//     of the pool's goroutines, then to consume on Run's caller's
//     goroutine, in the order sent, once its work is done.
//   - Items are reused: once consume returns, an item may come back from
//     Next with whatever its last use left in it (its slices' capacity is
//     the point), so produce overwrites every field it reads.
//   - The first error of consume stops the run: Send then returns the
//     context's error, the items already under way are waited for (not
//     consumed), and Run returns consume's error. Otherwise Run returns
//     produce's error, or nil. An error found by work is the item's to
//     carry (a field consume looks at), so that it is reported in order.
//   - About 8 × workers items are under way at once, at most: memory is
//     bounded by the items' size, not by the stream's length.
package ordered

import (
	"context"
	"sync"
)

// slot is an item on its way with the signal that its work is done.
type slot[T any] struct {
	v    T
	done chan struct{}
}

// Producer is produce's end of a Run: Next, fill, Send, in turn.
type Producer[T any] struct {
	ctx     context.Context
	work    chan *slot[T] // to the pool
	pending chan *slot[T] // in order, to consume
	free    chan *slot[T] // consumed, to be reused
	cur     *slot[T]
}

// Context is the run's context: done once consume failed or Run's context
// ended. produce passes it to what it reads with.
func (p *Producer[T]) Context() context.Context { return p.ctx }

// Next returns an item to fill (a consumed one when there is one) and makes
// it the one Send hands on.
func (p *Producer[T]) Next() *T {
	select {
	case s := <-p.free:
		p.cur = s
	default:
		p.cur = &slot[T]{done: make(chan struct{}, 1)}
	}
	return &p.cur.v
}

// Send hands the item Next returned on to the pool and then, in order, to
// consume. It returns the context's error once the run stops.
func (p *Producer[T]) Send() error {
	s := p.cur
	p.cur = nil
	// To the pool first: an item consume waits for is always worked on.
	select {
	case p.work <- s:
	case <-p.ctx.Done():
		return p.ctx.Err()
	}
	select {
	case p.pending <- s:
	case <-p.ctx.Done():
		return p.ctx.Err()
	}
	return nil
}

// Run runs produce, work on workers goroutines (newWorker makes each one's
// function on its goroutine, so it may keep buffers of its own) and consume,
// as the package's contract says.
func Run[T any](ctx context.Context, workers int, produce func(*Producer[T]) error, newWorker func() func(*T), consume func(*T) error) error {
	workers = max(workers, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	depth := 4 * workers
	p := &Producer[T]{ctx: ctx, work: make(chan *slot[T], depth), pending: make(chan *slot[T], depth),
		free: make(chan *slot[T], 2*depth+workers+2)}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work := newWorker()
			for s := range p.work {
				work(&s.v)
				s.done <- struct{}{}
			}
		}()
	}
	produced := make(chan error, 1)
	go func() {
		defer close(p.pending)
		defer close(p.work)
		produced <- produce(p)
	}()
	var err error
	for s := range p.pending {
		<-s.done
		if err == nil {
			if err = consume(&s.v); err != nil {
				cancel()
			}
		}
		select {
		case p.free <- s:
		default:
		}
	}
	wg.Wait()
	if perr := <-produced; err == nil {
		err = perr
	}
	return err
}

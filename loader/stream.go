package loader

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/shard"
	"golang.org/x/sync/errgroup"
)

// Stats describe one streamed request.
type Stats struct {
	Batches, Graphs int
	Elapsed         time.Duration
	// WaitWorkers is time the sender waited for the next batch to be built;
	// WaitSink is time spent handing batches to the sink (the client).
	WaitWorkers, WaitSink time.Duration
	// WorkerBusy sums the workers' time building batches; WorkerIdle their
	// time waiting, for a batch to build or for room in the window (the
	// sink is behind).
	WorkerBusy, WorkerIdle time.Duration
	MaxInFlight            int
	// SubMixUnchanged counts graphs of the batches sent that SubMix left
	// unchanged, with their hard label, because the mix had no edge.
	SubMixUnchanged int
}

// GraphError names the graph whose augmentation failed (or panicked).
type GraphError struct {
	Graph  int64
	Policy string
	Err    error
}

func (e *GraphError) Error() string {
	return fmt.Sprintf("loader: graph %d, policy %s: %v", e.Graph, e.Policy, e.Err)
}

func (e *GraphError) Unwrap() error { return e.Err }

// result is one built batch on its way from a worker to the sender.
type result struct {
	rec       arrow.RecordBatch
	col       *collator // backs rec; reusable once the sink has returned
	err       error
	unchanged int // SubMix fallbacks in the batch
}

// Stream builds the plan's batches with the worker pool and hands them to
// sink strictly in order. The sink must not keep the record after it
// returns: its buffers are reused for later batches. The first error
// (worker, sink or ctx) stops everything.
//
// Three roles share one stream: a dispatcher hands batch numbers to the
// workers once the window has room and the batch's Memory is held, the
// workers build batches into slots by number, and the sender hands slot
// after slot to the sink, then retires the batch (its Memory, its pages,
// its place in the window).
func (l *Loader) Stream(ctx context.Context, p *Plan, sink func(arrow.RecordBatch) error) (Stats, error) {
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	s := newStream(l, p, gctx)
	g.Go(s.dispatch)
	for range min(l.cfg.Workers, max(s.nb, 1)) {
		g.Go(s.work)
	}
	g.Go(func() error { return s.send(sink) })
	err := g.Wait()
	s.drain()
	s.pages.Close()
	s.st.Elapsed = time.Since(start)
	s.st.WorkerBusy, s.st.WorkerIdle = time.Duration(s.busy.Load()), time.Duration(s.idle.Load())
	return s.st, err
}

// stream is one Stream call's shared state.
type stream struct {
	l   *Loader
	p   *Plan
	ctx context.Context // done once any role fails
	nb  int
	// slots[b%len(slots)] carries batch b from its worker to the sender.
	slots []chan result
	// loans[b%len(loans)] is the transport's room lent to batch b
	// (Plan.Lender), written by the dispatcher before b is dispatched.
	loans []loan
	// tokens holds one token per batch in flight (dispatched, not yet
	// retired): at most the window.
	tokens chan struct{}
	jobs   chan int
	// held[b] is the Memory batch b holds, written by the dispatcher before
	// b is dispatched, released by the sender once b is sent.
	held []int64
	// wake ends a dispatcher's wait for Memory once the stream has nothing
	// in flight: a stream may then always build its next batch, whatever
	// other streams' clients hold.
	wake atomic.Pointer[context.CancelFunc]
	// pages is the stream's schedule of the reader's pages: the workers
	// pin through it, the sender releases each batch sent.
	pages      *shard.Schedule
	busy, idle atomic.Int64
	st         Stats // the sender's
}

func newStream(l *Loader, p *Plan, ctx context.Context) *stream {
	window := l.cfg.Window
	s := &stream{l: l, p: p, ctx: ctx, nb: len(p.Batches),
		slots: make([]chan result, window), loans: make([]loan, window), tokens: make(chan struct{}, window), jobs: make(chan int),
		held: make([]int64, len(p.Batches))}
	for i := range s.slots {
		s.slots[i] = make(chan result, 1)
	}
	// A worker pins each graph of its batch once a twin, so the
	// schedule's batch b visits them so many times; the first pin of b
	// reads ahead the pages of b+2·window.
	// A SubMix partner is pinned outside the plan, from its target's
	// window: the window's pages are held while it is open.
	k := max(p.Twins, 1)
	var mayPin func(b int, visit func(page int))
	if len(p.passPolicies) > 0 && slices.ContainsFunc(l.cfg.schedules(), (*epoch.Schedule).Mixes) {
		mayPin = func(b int, visit func(int)) { p.partnerPages(l.cfg.Seed, b, visit) }
	}
	s.pages = l.src.ds.r.Schedule(s.nb, func(b int, visit func(int64)) {
		for range k {
			for _, it := range p.Batches[b] {
				visit(it.Graph)
			}
		}
	}, mayPin, 2*window)
	return s
}

// dispatch hands batch numbers to the workers in order, each once the
// window has room and its Memory is held.
func (s *stream) dispatch() error {
	defer close(s.jobs)
	for b := range s.nb {
		select {
		case s.tokens <- struct{}{}:
		case <-s.ctx.Done():
			return nil
		}
		if !s.reserve(b) {
			return nil
		}
		s.loans[b%len(s.loans)] = s.lend(b)
		select {
		case s.jobs <- b:
		case <-s.ctx.Done():
			return nil
		}
	}
	return nil
}

// reserve holds batch b's bytes of the shared Memory, waiting for them,
// unless b is the only batch in flight (then it goes without: a stream
// always progresses). False: the stream is stopping.
func (s *stream) reserve(b int) bool {
	if len(s.tokens) <= 1 || b >= len(s.p.Bytes) {
		return true
	}
	actx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	s.wake.Store(&cancel)
	defer s.wake.Store(nil)
	if len(s.tokens) > 1 { // checked again: the sender may have emptied it meanwhile
		if n, err := s.l.cfg.Memory.acquire(actx, s.p.Bytes[b]); err == nil {
			s.held[b] = n
		} else if s.ctx.Err() != nil {
			return false
		}
	}
	return true
}

// work is one worker: it builds the batches dispatched to it into their
// slots.
func (s *stream) work() error {
	w := newWorker(s.l, s.p, s.pages)
	defer w.done()
	waiting := time.Now()
	defer func() { s.idle.Add(int64(time.Since(waiting))) }()
	for b := range s.jobs {
		t0 := time.Now()
		s.idle.Add(int64(t0.Sub(waiting)))
		res := w.batch(s.ctx, b, s.loans[b%len(s.loans)])
		waiting = time.Now()
		s.busy.Add(int64(waiting.Sub(t0)))
		select {
		case s.slots[b%len(s.slots)] <- res:
		case <-s.ctx.Done():
			if res.rec != nil {
				res.rec.Release()
			}
			return nil
		}
	}
	return nil
}

// send hands the batches to sink strictly in order, retiring each.
func (s *stream) send(sink func(arrow.RecordBatch) error) error {
	for b := range s.nb {
		t0 := time.Now()
		var r result
		select {
		case r = <-s.slots[b%len(s.slots)]:
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
		s.st.MaxInFlight = max(s.st.MaxInFlight, len(s.tokens))
		t1 := time.Now()
		s.st.WaitWorkers += t1.Sub(t0)
		if r.err != nil {
			return r.err
		}
		err := sink(r.rec)
		s.st.WaitSink += time.Since(t1)
		s.st.Graphs += int(r.rec.NumRows()) / max(s.p.Twins, 1)
		s.st.SubMixUnchanged += r.unchanged
		r.rec.Release()
		if err != nil {
			return err
		}
		r.col.giveBack()
		s.l.collators.Put(r.col) // the sink is done with its buffers
		s.retire(b)
	}
	return nil
}

// retire frees what sent batch b held: the pages no later batch reads,
// its Memory, its place in the window (waking a dispatcher waiting for
// Memory once nothing else is in flight).
func (s *stream) retire(b int) {
	s.pages.ReleaseBatch(b)
	s.l.cfg.Memory.release(s.held[b])
	s.held[b] = 0
	s.st.Batches++
	<-s.tokens
	if len(s.tokens) <= 1 {
		if c := s.wake.Load(); c != nil {
			(*c)()
		}
	}
}

// drain, once every role has returned, releases the Memory of batches
// dispatched but never sent and the records built after a failure.
func (s *stream) drain() {
	for _, n := range s.held {
		s.l.cfg.Memory.release(n)
	}
	for _, slot := range s.slots {
		select {
		case r := <-slot:
			if r.rec != nil {
				r.rec.Release()
			}
		default:
		}
	}
}

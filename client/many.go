package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/augloader/augloader/wire"
)

// FetchMany reads req's batches from several daemons at once and hands fn
// every batch in order, as one daemon would send them: the request's
// batches j = 0, 1, 2, … go to lane j mod D, and lane d starts at daemon d
// (a request with start_batch + j·stride, stride D·stride). Every daemon
// must serve the same configuration: the identity in each response
// (wire.Config.ID) is compared on first contact, and a daemon serving
// another is refused with an error naming both. A daemon that fails — its
// stream cut, an error, or no batch within Options.BatchTimeout — has the
// rest of its lane asked of the next daemon still alive, from the first
// batch not yet handed to fn; the epoch still arrives whole and in order,
// and Options.Logger is told which daemon failed. Result.BatchDigests (with
// Options.Digests) equal a single daemon's; Result.Digest is not computed.
func FetchMany(ctx context.Context, addrs []string, req wire.Request, o Options, fn func(arrow.RecordBatch) error) (*Result, error) {
	if len(addrs) == 0 {
		return nil, errors.New("client: no daemon address")
	}
	if len(addrs) == 1 {
		return FetchAddr(ctx, addrs[0], req, o, fn)
	}
	m := &many{addrs: addrs, req: req, o: o, dead: make([]bool, len(addrs))}
	if m.o.BatchTimeout <= 0 {
		m.o.BatchTimeout = 30 * time.Second
	}
	if m.o.Logger == nil {
		m.o.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return m.run(ctx, fn)
}

type many struct {
	addrs []string
	req   wire.Request
	o     Options

	mu      sync.Mutex
	dead    []bool
	first   *wire.Config
	firstAt string
}

// item is one batch a lane hands over; ack returns it.
type item struct {
	rec    arrow.RecordBatch
	digest [32]byte
	bytes  int64 // the batch's message bytes as received
	ack    chan struct{}
}

// lane streams one subsequence of the request from one daemon.
type lane struct {
	addr   string
	daemon int
	items  chan item
	done   chan error // the fetch's end: nil when its trailer arrived
	info   chan wire.Response
	cancel context.CancelFunc
}

func (m *many) stride() int { return max(m.req.Stride, 1) }

// start asks daemon d for the batches j ≡ d0 (mod D) from j on (j the
// request's batch index), count of them when known.
func (m *many) start(ctx context.Context, daemon, j, count int) *lane {
	D := len(m.addrs)
	sub := m.req
	sub.StartBatch = m.req.StartBatch + j*m.stride()
	sub.Stride = D * m.stride()
	sub.Count = count
	lctx, cancel := context.WithCancel(ctx)
	l := &lane{addr: m.addrs[daemon], daemon: daemon, items: make(chan item), done: make(chan error, 1),
		info: make(chan wire.Response, 1), cancel: cancel}
	o := m.o
	var (
		digest [32]byte
		nbytes int64
	)
	o.onBatch = func(d [32]byte, n int64) { digest, nbytes = d, n }
	o.onInfo = func(info wire.Response) error {
		if err := m.check(l.addr, info); err != nil {
			return err
		}
		l.info <- info
		return nil
	}
	go func() {
		_, err := FetchAddr(lctx, l.addr, sub, o, func(rec arrow.RecordBatch) error {
			it := item{rec: rec, digest: digest, bytes: nbytes, ack: make(chan struct{})}
			select {
			case l.items <- it:
			case <-lctx.Done():
				return lctx.Err()
			}
			select {
			case <-it.ack:
				return nil
			case <-lctx.Done():
				return lctx.Err()
			}
		})
		l.done <- err
	}()
	return l
}

// identityError: a daemon serves another configuration; never failed over.
type identityError struct{ error }

func (m *many) check(addr string, info wire.Response) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if info.Config == nil {
		return identityError{fmt.Errorf("client: %s sent no configuration identity: refusing to mix it with other daemons", addr)}
	}
	if m.first == nil {
		c := *info.Config
		m.first, m.firstAt = &c, addr
		return nil
	}
	if diff := m.first.Diff(*info.Config); len(diff) > 0 {
		return identityError{fmt.Errorf("client: %s serves configuration %s, %s serves %s (%s vs %s): %s; refusing to mix them",
			m.firstAt, m.first.ID, addr, info.Config.ID, m.firstAt, addr, strings.Join(diff, ", "))}
	}
	return nil
}

// next picks the daemon after d still alive.
func (m *many) next(d int) (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := 1; k <= len(m.addrs); k++ {
		if e := (d + k) % len(m.addrs); !m.dead[e] {
			return e, true
		}
	}
	return 0, false
}

func (m *many) run(ctx context.Context, fn func(arrow.RecordBatch) error) (*Result, error) {
	D := len(m.addrs)
	lanes := make([]*lane, D)
	left := make([]int, D) // batches each lane still owes
	for d := range D {
		if m.req.Count > 0 {
			left[d] = max(0, (m.req.Count-d+D-1)/D)
		}
		lanes[d] = m.start(ctx, d, d, left[d])
	}
	defer func() {
		for _, l := range lanes {
			l.cancel()
		}
	}()
	// failover restarts lane d, at the request's batch j, on the next
	// daemon still alive.
	failover := func(d, j int, why error) error {
		var ie identityError
		if errors.As(why, &ie) {
			return ie.error
		}
		old := lanes[d]
		old.cancel()
		m.mu.Lock()
		m.dead[old.daemon] = true
		m.mu.Unlock()
		e, ok := m.next(old.daemon)
		if !ok {
			return fmt.Errorf("client: every daemon failed; the last, %s, at batch %d: %w", old.addr, j, why)
		}
		m.o.Logger.Warn("daemon failed: its batches now come from another", "daemon", old.addr, "batch", j, "err", why, "now", m.addrs[e])
		lanes[d] = m.start(ctx, e, j, left[d])
		return nil
	}
	res := &Result{}
	// First contact: every lane's response, its identity checked.
	total := 0
	for d := 0; d < D; {
		l := lanes[d]
		timer := time.NewTimer(m.o.BatchTimeout)
		select {
		case info := <-l.info:
			timer.Stop()
			left[d] = info.Batches
			total += info.Batches
			if d == 0 {
				res.Info = info
			}
			d++
		case err := <-l.done:
			timer.Stop()
			if err == nil {
				err = errors.New("the stream ended before its response")
			}
			if ferr := failover(d, d, err); ferr != nil {
				return res, ferr
			}
		case <-timer.C:
			if ferr := failover(d, d, fmt.Errorf("no response within %s", m.o.BatchTimeout)); ferr != nil {
				return res, ferr
			}
		case <-ctx.Done():
			timer.Stop()
			return res, ctx.Err()
		}
	}
	for j := 0; j < total; {
		d := j % D
		l := lanes[d]
		timer := time.NewTimer(m.o.BatchTimeout)
		select {
		case <-l.info: // a replacement lane's response: its count is left[d]
			timer.Stop()
		case it := <-l.items:
			timer.Stop()
			var err error
			if fn != nil {
				err = fn(it.rec)
			}
			if m.o.Digests {
				res.BatchDigests = append(res.BatchDigests, it.digest)
			}
			res.Batches++
			res.Graphs += int(it.rec.NumRows()) / wire.Copies(it.rec.Schema())
			res.Bytes += it.bytes
			close(it.ack)
			if err != nil {
				return res, err
			}
			left[d]--
			j++
		case err := <-l.done:
			timer.Stop()
			if err == nil {
				err = fmt.Errorf("the stream ended with %d of its batches unsent", left[d])
			}
			if ferr := failover(d, j, err); ferr != nil {
				return res, ferr
			}
		case <-timer.C:
			if ferr := failover(d, j, fmt.Errorf("no batch within %s", m.o.BatchTimeout)); ferr != nil {
				return res, ferr
			}
		case <-ctx.Done():
			timer.Stop()
			return res, ctx.Err()
		}
	}
	res.Info.Batches, res.Info.Graphs = res.Batches, res.Graphs
	res.Trailer = wire.Trailer{Batches: res.Batches, Graphs: res.Graphs}
	return res, nil
}

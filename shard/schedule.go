package shard

import (
	"context"

	"github.com/augloader/augloader/shard/internal/pagecache"
)

// A Schedule is one stream's use of a Reader: the graphs each of its
// batches pins, handed over once. From then on the stream only pins and
// releases, and the cache derives the rest (shard/internal/pagecache):
// the first pin of batch b reads ahead the pages of batch b+ahead; the
// release of b's last planned pin ends the use of the graphs b was the
// last to need; ReleaseBatch(b), b sent, cools the pages whose last batch b was. Without a
// cache limit a Schedule only serves Graph.
type Schedule struct {
	r      *Reader
	stream *pagecache.Stream // nil without a cache limit
}

// Schedule hands over the future of a stream of batches batches whose
// batch b pins the graphs graphsOf(b) visits, once per pin (a graph
// pinned twice by a batch is visited twice). graphsOf is called again as
// batches are built. mayPin (nil: none) visits the pages batch b may
// pin beyond those (pagecache.NewFuture: SubMix's partners, drawn from the
// batch's window). Close hands it back.
func (r *Reader) Schedule(batches int, graphsOf func(b int, visit func(id int64)), mayPin func(b int, visit func(page int)), ahead int) *Schedule {
	s := &Schedule{r: r}
	if r.lazy == nil {
		return s
	}
	f := pagecache.NewFuture(r.NumPages(), r.man.Stats.Graphs, batches, func(b int, visit func(page int, pos int64)) {
		graphsOf(b, func(id int64) {
			pos := r.man.PositionOf(id)
			visit(r.pages.pageOf(pos), pos)
		})
	}, mayPin)
	s.stream = r.lazy.cache.Foresee(f, ahead)
	return s
}

// A Pinned is one graph pinned for a batch of a Schedule.
type Pinned struct {
	h  pagecache.StreamHandle
	ok bool // false: nothing to release (no cache limit)
}

// A Charge is what a user keeps beside a pinned graph, derived from it and
// rebuilt at will (the loader's NodeSam index): its bytes count in the
// cache's limit with the graph's page until the cache forgets it, under
// pressure or when the page goes. Forget runs under the cache's lock and
// must not call into the Reader.
type Charge = pagecache.Charge

// Release lets the graph go; ch (nil: none) is charged to its page. Its
// slices must not be read after.
func (p Pinned) Release(ch Charge) {
	if p.ok {
		p.h.Release(ch)
	}
}

// Pin pins graph id for batch b: the Graph's slices stay valid until the
// Pinned's Release. A read of its page, or a wait for another's, gives
// up once ctx ends.
func (s *Schedule) Pin(ctx context.Context, b int, id int64) (Graph, Pinned, error) {
	if s.stream == nil {
		g, err := s.r.Graph(id)
		return g, Pinned{}, err
	}
	p, row, err := s.r.locate(id)
	if err != nil {
		return Graph{}, Pinned{}, err
	}
	pg, at, h, err := s.stream.Pin(ctx, b, p, row)
	if err != nil {
		return Graph{}, Pinned{}, err
	}
	return s.r.graphOf(&pg.(*page).batch, at), Pinned{h, true}, nil
}

// ReleaseBatch says batch b was sent: no use before b+1 is ahead.
func (s *Schedule) ReleaseBatch(b int) {
	if s.stream != nil {
		s.stream.ReleaseBatch(b)
	}
}

// Close hands the stream's future back; its pins must be released.
func (s *Schedule) Close() {
	if s.stream != nil {
		s.stream.Close()
	}
}

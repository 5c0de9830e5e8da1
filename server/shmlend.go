package server

// Lending a batch's edge columns room in the client's ring (the
// shmWriter's loader.EdgeLender side): a region reserved before the batch
// is built, the workers' edge columns written into it, and the batch's
// message placed around them when it comes (stageBody), or written
// elsewhere in full when its layout misses them.

import (
	"context"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/augloader/augloader/loader"
)

// shmLoan is the region lent to batch b: [start, end) of the ring, the
// edge_src values' room ending at src, the edge_dst values' starting at
// dst.
type shmLoan struct {
	b            int
	start, end   int64
	srcFrom, src int64
	dst          int64
}

// loanHead is the room a loan keeps before edge_src's values for the
// message's prefix, metadata and first buffers (ids, node counts, the
// edge offsets): the metadata of a batch's dozen columns is about 1 KiB.
func loanHead(rows int) int64 { return 16<<10 + 24*int64(rows) }

// LendEdges implements loader.EdgeLender: a region of the ring for the
// whole message, laid out [head | edge_src's values | edge_dst's offsets |
// edge_dst's values | the other columns], edge_src's values ending where
// edge_dst's offsets start whatever the batch's edge count, so that its
// offsets and values are at a fixed place. None when lendRoom finds no
// room (the batch is then copied as any other).
func (w *shmWriter) LendEdges(ctx context.Context, b, rows, edges int, rest int64) (src, dst []int32, ok bool) {
	if rows <= 0 || edges < 0 || rest < 0 {
		return nil, nil, false
	}
	head := loanHead(rows)
	srcBytes := 4 * int64(loader.EdgeSrcSlots(edges))
	offBytes := pad8(4 * int64(rows+1))
	dstBytes := pad8(4 * int64(edges+1)) // mergeRun's slack slot
	n := pad8(head + srcBytes + offBytes + dstBytes + rest + 8<<10)
	at := w.lendRoom(ctx, b, n)
	if at < 0 {
		return nil, nil, false
	}
	l := shmLoan{b: b, start: at, end: at + n, srcFrom: at + head, src: at + head + srcBytes}
	l.dst = l.src + offBytes
	w.mu.Lock()
	w.loans = append(w.loans, l)
	w.mu.Unlock()
	src = arrow.Int32Traits.CastFromBytes(w.ring[l.srcFrom:l.src])
	dst = arrow.Int32Traits.CastFromBytes(w.ring[l.dst : l.dst+dstBytes])[:0]
	return src, dst, true
}

// lendRoom reserves n bytes for batch b's loan, waiting for releases
// while the client has ring messages left to read (a training loop
// holds the batches it has not reached: they come back), as place waits
// for a message's; -1 when it cannot have them: the client holds the
// ring full, the loans would pass half the ring, or a batch refused one
// is not written yet. A refusal is remembered (refused).
func (w *shmWriter) lendRoom(ctx context.Context, b int, n int64) int64 {
	for {
		w.mu.Lock()
		if w.refused >= 0 && w.refused < w.written {
			w.refused = -1 // written since
		}
		may := w.refused < 0 && w.lentBytes+n <= int64(len(w.ring))/2
		if may {
			if at := w.roomLocked(n); at >= 0 {
				w.lentBytes += n
				w.mu.Unlock()
				return at
			}
		}
		if !may || w.read >= w.announced { // nothing to wait for
			w.refused = b
			w.mu.Unlock()
			return -1
		}
		w.mu.Unlock()
		select {
		case <-w.lendChanged:
		case <-ctx.Done():
			return -1
		case <-w.ctx.Done():
			return -1
		}
	}
}

func pad8(n int64) int64 { return (n + 7) &^ 7 }

// loanFor takes the loan of batch b off the queue: nil when it has none
// (loans of batches before it, never written, are released).
func (w *shmWriter) loanFor(b int) *shmLoan {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.loans) > 0 && w.loans[0].b <= b {
		l := w.loans[0]
		w.loans = w.loans[1:]
		w.lentBytes -= l.end - l.start
		if l.b == b {
			return &l
		}
		w.releaseRegion(l.start)
		w.signal()
	}
	return nil
}

// dropLoan gives up the current message's loan: the message goes
// elsewhere. Its region is released once the message is written
// (finish), as the message's bytes may still be read from it: released
// now, it could be lent again and written into meanwhile.
func (w *shmWriter) dropLoan() {
	if w.loan == nil {
		return
	}
	w.spent, w.loan = w.loan, nil
}

// releaseRegion marks the region starting at start reclaimable (w.mu held).
func (w *shmWriter) releaseRegion(start int64) {
	for i := range w.inflight {
		if r := &w.inflight[i]; r.start == start && !r.announced {
			r.released = true
			return
		}
	}
}

// stageBody takes a lent batch's next body bytes while its place is not
// known. A write that lies in the loan's edge_src room fixes it: the
// message then starts so that this write is where the message has it,
// which places edge_dst's values where the workers wrote them too when
// the metadata agrees (checked: a buffer of edge_src's length at the
// loan's edge_dst place). Anything else is kept, up to the loan's head;
// past it, or where the metadata disagrees, the message is placed as any
// other.
func (w *shmWriter) stageBody(b []byte) error {
	l := w.loan
	if a := w.ringOffset(b); a >= l.srcFrom && a < l.src {
		pos := int64(len(w.stage))
		bodyStart := a - pos
		start := bodyStart - int64(len(w.hdr))
		if start >= l.start && bodyStart+w.left+pos <= l.end && w.fits(bodyStart, pos, int64(len(b)), l) {
			w.start, w.at, w.region = start, start, l.start
			w.staging, w.loan = false, nil
			w.lent++
			if err := w.put(w.hdr); err != nil {
				return err
			}
			w.hdr = w.hdr[:0]
			if err := w.put(w.stage); err != nil {
				return err
			}
			return w.put(b)
		}
	} else if int64(len(w.stage)+len(b)) <= l.srcFrom-l.start { // the loan's head
		w.stage = append(w.stage, b...)
		return nil
	}
	if err := w.unstage(); err != nil {
		return err
	}
	return w.put(b)
}

// fits reports whether the message, its body starting at bodyStart, has
// a buffer at body offset pos of at least n bytes (edge_src's values,
// being written), and one of the same length starting at the loan's
// edge_dst place, after it: every byte written before edge_dst's values
// is then before them, and they are never overwritten before they are
// taken.
func (w *shmWriter) fits(bodyStart, pos, n int64, l *shmLoan) bool {
	src := -1
	for i, b := range w.bufs {
		if b.Offset == pos && b.Length >= n {
			src = i
			break
		}
	}
	if src < 0 {
		return false
	}
	for _, b := range w.bufs[src+1:] {
		if b.Length == 0 {
			continue // nothing written (a validity bitmap without nulls)
		}
		if bodyStart+b.Offset == l.dst {
			return b.Length == w.bufs[src].Length
		}
		if bodyStart+b.Offset+b.Length > l.dst {
			return false
		}
	}
	return false
}

// unstage places a staged message as any other (its loan given back) and
// writes what was staged.
func (w *shmWriter) unstage() error {
	w.staging = false
	w.dropLoan()
	if err := w.place(w.length); err != nil {
		return err
	}
	err := w.put(w.hdr)
	w.hdr = w.hdr[:0]
	if err == nil {
		err = w.put(w.stage)
	}
	return err
}

// ringOffset is where b lies in the ring, or -1 when it is not there.
func (w *shmWriter) ringOffset(b []byte) int64 {
	if len(b) == 0 || len(w.ring) == 0 {
		return -1
	}
	d := uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(unsafe.Pointer(unsafe.SliceData(w.ring)))
	if d >= uintptr(len(w.ring)) || d+uintptr(len(b)) > uintptr(len(w.ring)) {
		return -1
	}
	return int64(d)
}

package server

import (
	"fmt"
	"sync"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/wire"
)

// ErrEpochsApart is a rank of a job asking for an older epoch than
// another rank of that job already asked: the ranks count epochs apart
// (one iterated the dataset once more: a peek, a pass on one rank only),
// and would train on different epochs' partitions with no error.
var ErrEpochsApart = fmt.Errorf("%w: the ranks of one job ask for different epochs", epoch.ErrRange)

// maxJobs bounds the jobs RankEpochs remembers: the oldest is forgotten.
const maxJobs = 1024

// RankEpochs refuses the ranks of one job whose epochs drift apart. Ranks
// that train together (one DDP step needs every rank's) cannot begin
// epoch e+1 before every rank began e, so a rank asking for e once
// another rank of its job, view, fold and world asked for a later epoch
// is out of step. A rank asking for an older epoch itself (a resume, a
// replayed epoch) is not; nor is a request without a job (wire.Request.Job:
// the Python client names torchrun's run id, restart and agent). Safe for
// concurrent use; nil checks nothing.
type RankEpochs struct {
	mu    sync.Mutex
	jobs  map[jobKey]*jobEpoch
	order []jobKey // oldest first
}

type jobKey struct {
	job, view   string
	fold, world int
}

// jobEpoch is the latest epoch a job's ranks asked for, and the first
// rank that asked it.
type jobEpoch struct {
	epoch uint64
	rank  int
}

// NewRankEpochs returns an empty RankEpochs.
func NewRankEpochs() *RankEpochs { return &RankEpochs{jobs: map[jobKey]*jobEpoch{}} }

// Check records req's epoch for its rank's job, or refuses it with
// ErrEpochsApart naming both ranks and epochs.
func (g *RankEpochs) Check(req wire.Request) error {
	if g == nil || req.Job == "" || req.World < 2 {
		return nil
	}
	k := jobKey{req.Job, req.View, req.Fold, req.World}
	g.mu.Lock()
	defer g.mu.Unlock()
	j := g.jobs[k]
	if j == nil {
		if len(g.order) == maxJobs {
			delete(g.jobs, g.order[0])
			g.order = g.order[1:]
		}
		g.jobs[k] = &jobEpoch{epoch: req.Epoch, rank: req.Rank}
		g.order = append(g.order, k)
		return nil
	}
	switch {
	case req.Epoch > j.epoch:
		j.epoch, j.rank = req.Epoch, req.Rank
	case req.Epoch < j.epoch && req.Rank != j.rank:
		return fmt.Errorf("%w: rank %d of %d asks for epoch %d, rank %d of its job (%s) already asked for epoch %d: one rank "+
			"iterated the dataset more often than another (a peek such as next(iter(ds)), a pass on one rank only); call "+
			"set_epoch(e) on every rank before each epoch, or iterate every rank alike", ErrEpochsApart, req.Rank, req.World,
			req.Epoch, j.rank, req.Job, j.epoch)
	}
	return nil
}

// RankChecked is a Source whose requests RankEpochs checks first.
type RankChecked struct {
	Source
	Ranks *RankEpochs
}

// Open implements Source.
func (s RankChecked) Open(req wire.Request) (Stream, error) {
	if err := s.Ranks.Check(req); err != nil {
		return nil, err
	}
	return s.Source.Open(req)
}

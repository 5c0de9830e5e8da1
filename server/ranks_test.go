package server_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/augloader/augloader/server"
	"github.com/augloader/augloader/wire"
)

// The ranks of one job ask for the same epochs: a rank asking for an
// older epoch than another rank of its job, view, fold and world already
// asked is refused naming both; a rank's own older epoch, another job,
// view, fold or world, a request without a job, and a world of one are
// not checked against it.
func TestRankEpochs(t *testing.T) {
	req := func(job string, rank, world int, e uint64) wire.Request {
		return wire.Request{Job: job, Rank: rank, World: world, Epoch: e}
	}
	type step struct {
		req     wire.Request
		refused bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"in step", []step{{req("j", 0, 2, 0), false}, {req("j", 1, 2, 0), false}, {req("j", 0, 2, 1), false}, {req("j", 1, 2, 1), false}}},
		{"a peek on rank 0", []step{{req("j", 0, 2, 0), false}, {req("j", 0, 2, 1), false}, {req("j", 1, 2, 0), true}}},
		{"rank 1 ahead", []step{{req("j", 1, 2, 3), false}, {req("j", 0, 2, 2), true}}},
		{"a rank's own older epoch", []step{{req("j", 0, 2, 5), false}, {req("j", 0, 2, 4), false}}},
		{"another job", []step{{req("j", 0, 2, 5), false}, {req("k", 1, 2, 0), false}}},
		{"another world", []step{{req("j", 0, 2, 5), false}, {req("j", 1, 4, 0), false}}},
		{"no job", []step{{req("j", 0, 2, 5), false}, {req("", 1, 2, 0), false}}},
		{"a world of one", []step{{req("j", 0, 1, 5), false}, {req("j", 0, 1, 0), false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := server.NewRankEpochs()
			for i, s := range tc.steps {
				err := g.Check(s.req)
				if got := err != nil; got != s.refused {
					t.Fatalf("step %d %+v: refused %v, want %v (%v)", i, s.req, got, s.refused, err)
				}
				if err != nil && (!errors.Is(err, server.ErrEpochsApart) || !strings.Contains(err.Error(), "set_epoch")) {
					t.Fatalf("step %d: %v, want ErrEpochsApart saying what to do", i, err)
				}
			}
		})
	}
	var nilGuard *server.RankEpochs
	if err := nilGuard.Check(req("j", 0, 2, 0)); err != nil {
		t.Fatal(err)
	}
}

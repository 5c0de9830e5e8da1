package shard_test

import (
	"context"
	"testing"

	"github.com/augloader/augloader/shard"
)

// biggestPage is the largest estimated decoded page of the folder dir,
// and its page count.
func biggestPage(t *testing.T, dir string) (int64, int) {
	t.Helper()
	r, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var biggest int64
	for _, b := range r.PageBytes() {
		biggest = max(biggest, b)
	}
	return biggest, r.NumPages()
}

// Command shuffle measures how well the windowed shuffle mixes an epoch
// against the global permutation (docs/bench.md, "Shuffle quality"): for
// each order, over several epochs, the mean number of distinct shards a
// batch draws its graphs from, and the mean total variation distance
// between a batch's class mix and the whole set's (0: a batch looks like
// the dataset; 1: it holds classes the dataset barely has).
//
//	go run ./bench/shuffle --shards COLLAB.shards --batch-size 32 --windows 1,2,4,8,16,32
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/shard"
)

func main() {
	shards := flag.String("shards", "", "shard folder")
	bs := flag.Int("batch-size", 32, "graphs per batch")
	windows := flag.String("windows", "1,2,4,8,16,32", "window sizes, in shards")
	epochs := flag.Int("epochs", 5, "epochs averaged")
	flag.Parse()
	if err := run(*shards, *bs, *windows, *epochs); err != nil {
		fmt.Fprintln(os.Stderr, "shuffle:", err)
		os.Exit(1)
	}
}

func run(dir string, bs int, windows string, epochs int) error {
	r, err := shard.Open(context.Background(), dir)
	if err != nil {
		return err
	}
	defer r.Close()
	man := r.Manifest()
	n := r.NumGraphs()
	if man.Classes < 1 {
		return fmt.Errorf("%s has no classes", dir)
	}
	labels := make([]int32, n)
	served := make([]int64, n)
	whole := make([]float64, man.Classes)
	for id := range n {
		g, err := r.Graph(int64(id))
		if err != nil {
			return err
		}
		labels[id], served[id] = g.Label, int64(id)
		whole[g.Label] += 1 / float64(n)
	}
	orders := []epoch.Shuffle{{}}
	for _, w := range strings.Split(windows, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || v < 1 {
			return fmt.Errorf("--windows %q", windows)
		}
		orders = append(orders, epoch.Shuffle{Window: v})
	}
	fmt.Printf("%s: %d graphs in %d shards, %d classes, batches of %d, %d epochs\n\n", man.Dataset, n, r.NumShards(), man.Classes, bs, epochs)
	fmt.Println("| order | shards a batch draws from (mean) | class-mix distance to the dataset (mean TV) |")
	fmt.Println("|---|---:|---:|")
	for _, sh := range orders {
		var shardsSum, tvSum float64
		var batches int
		for e := range uint64(epochs) {
			var perm []int64
			if sh.Window == 0 {
				perm = epoch.Permutation(0, e, served)
			} else {
				w, err := epoch.WindowPermutation(0, e, served, r.NumShards(), sh.Window, r.ShardOf)
				if err != nil {
					return err
				}
				perm = w.Perm
			}
			mix := make([]float64, man.Classes)
			seen := map[int]bool{}
			for lo := 0; lo+bs <= len(perm); lo += bs {
				clear(mix)
				clear(seen)
				for _, id := range perm[lo : lo+bs] {
					mix[labels[id]] += 1 / float64(bs)
					seen[r.ShardOf(id)] = true
				}
				tv := 0.0
				for c := range mix {
					tv += math.Abs(mix[c] - whole[c])
				}
				tvSum += tv / 2
				shardsSum += float64(len(seen))
				batches++
			}
		}
		fmt.Printf("| `%s` | %.1f | %.3f |\n", sh, shardsSum/float64(batches), tvSum/float64(batches))
		fmt.Fprintf(os.Stderr, "RESULT kind=shuffle order=%s shards_per_batch=%.3f tv=%.4f batches=%d graphs=%d total_shards=%d\n",
			sh, shardsSum/float64(batches), tvSum/float64(batches), batches, n, r.NumShards())
	}
	return nil
}

// Command shuffle measures how well the windowed shuffle mixes an epoch
// against the global permutation (docs/bench.md, "Shuffle quality"): for
// each order, over several epochs, the mean number of distinct pages (a
// shard file's record batches, the window's blocks) a batch draws its
// graphs from, and the mean total variation distance between a batch's
// class mix and the whole set's (0: a batch looks like the dataset; 1: it
// holds classes the dataset barely has). Windows are given as augloader's
// --shuffle takes them (window:N pages, window:SIZE); --limits adds the
// order a daemon draws by default under each cache limit.
//
//	go run ./bench/shuffle --shards COLLAB.shards --batch-size 32 --windows 1,2,4,16MiB --limits 64MiB
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/augloader/augloader/app"
	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/internal/bytesize"
	"github.com/augloader/augloader/shard"
)

func main() {
	shards := flag.String("shards", "", "shard folder")
	bs := flag.Int("batch-size", 32, "graphs per batch")
	windows := flag.String("windows", "1,2,4,8,16,32", "windows: a page count, or a size such as 16MiB")
	limits := flag.String("limits", "", "cache limits whose default shuffle to add, e.g. 64MiB,16MiB")
	label := flag.String("label", "", "a name for the folder's layout in the RESULT lines (no spaces)")
	epochs := flag.Int("epochs", 5, "epochs averaged")
	flag.Parse()
	if err := run(*shards, *label, *bs, *windows, *limits, *epochs); err != nil {
		fmt.Fprintln(os.Stderr, "shuffle:", err)
		os.Exit(1)
	}
}

// order is one shuffle measured, how it was asked for (augloader's
// --shuffle, or default:LIMIT) and how the table says it.
type order struct {
	asked, said string
	sh          epoch.Shuffle
}

func run(dir, label string, bs int, windows, limits string, epochs int) error {
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
	pages := r.PageBytes()
	_, largest, _ := app.PageTotals(pages)
	orders := []order{{"global", "global", epoch.Shuffle{}}}
	for _, w := range strings.Split(windows, ",") {
		sh, err := epoch.ParseShuffle("window:" + strings.TrimSpace(w))
		if err != nil {
			return fmt.Errorf("--windows %q: %w", windows, err)
		}
		sh = app.ResolveShuffle(sh, pages)
		asked := "window:" + strings.TrimSpace(w)
		orders = append(orders, order{asked, asked, sh})
	}
	for _, l := range strings.Split(limits, ",") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		b, err := bytesize.Parse(l)
		if err != nil {
			return fmt.Errorf("--limits %q: %w", limits, err)
		}
		l = strings.TrimSpace(l)
		orders = append(orders, order{"default:" + l, "default under --cache-limit " + l, app.DefaultShuffle(pages, b)})
	}
	fmt.Printf("%s: %d graphs in %d shards, %d pages (the largest about %.1f MiB decoded), %d classes, batches of %d, %d epochs\n\n",
		man.Dataset, n, r.NumShards(), r.NumPages(), float64(largest)/(1<<20), man.Classes, bs, epochs)
	fmt.Println("| order | drawn as | pages a batch draws from (mean) | class-mix distance to the dataset (mean TV) |")
	fmt.Println("|---|---|---:|---:|")
	for _, o := range orders {
		sh := o.sh
		var pagesSum, tvSum float64
		var batches int
		for e := range uint64(epochs) {
			var perm []int64
			if sh.Window == 0 {
				perm = epoch.Permutation(0, e, served)
			} else {
				w, err := epoch.WindowPermutation(0, e, served, r.NumPages(), sh.Window, r.PageOf)
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
					seen[r.PageOf(id)] = true
				}
				tv := 0.0
				for c := range mix {
					tv += math.Abs(mix[c] - whole[c])
				}
				tvSum += tv / 2
				pagesSum += float64(len(seen))
				batches++
			}
		}
		fmt.Printf("| %s | `%s` | %.1f | %.3f |\n", o.said, sh, pagesSum/float64(batches), tvSum/float64(batches))
		fmt.Fprintf(os.Stderr, "RESULT kind=shuffle layout=%s asked=%s order=%s pages_per_batch=%.3f tv=%.4f batches=%d graphs=%d total_pages=%d total_shards=%d largest_page_bytes=%d\n",
			label, o.asked, sh, pagesSum/float64(batches), tvSum/float64(batches), batches, n, r.NumPages(), r.NumShards(), largest)
	}
	return nil
}

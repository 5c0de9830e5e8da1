package main

import (
	"bytes"
	"fmt"
)

// writeShuffle: how well each order mixes an epoch (step shuffle).
func (pg *page) writeShuffle(w *bytes.Buffer) {
	if !section(w, "Shuffle quality (`bench/shuffle`)", "shuffle.txt", pg.shuffle) {
		return
	}
	first := pg.shuffle[0]
	fmt.Fprintf(w, "Command: %s (step `shuffle`). The real COLLAB (%s graphs, stored in class order as TU lists them) cut into %s "+
		"shards of about 256 KiB; batches of 32, five epochs. Per order: the mean number of distinct shards a batch draws from, "+
		"and the mean total variation distance between a batch's class mix and the dataset's (0: the dataset's mix; the "+
		"global permutation's value is what batches of 32 drawn uniformly give). `--shuffle window:N` needs N shards (and "+
		"their indexes) in the cache at once. %s\n\n", pg.command("shuffle"), fnum(num(first, "graphs")), fnum(num(first, "total_shards")), pg.machineLine())
	fmt.Fprintf(w, "| order | shards a batch draws from | class-mix distance to the dataset |\n|---|---:|---:|\n")
	for _, m := range pg.shuffle {
		fmt.Fprintf(w, "| `%s` | %.1f | %.3f |\n", m["order"], num(m, "shards_per_batch"), num(m, "tv"))
	}
	fmt.Fprintf(w, "\nA set stored sorted by class (COLLAB is) needs wide windows to mix classes as the global permutation does; "+
		"one stored in random order mixes well with a few shards a window.\n\n")
}

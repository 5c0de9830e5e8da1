package main

// Scaling sections: workers, graph size, the epoch's stages, scale-out.

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
)

// writeScaleOut: wire compression and daemons (step scaleout).
func (pg *page) writeScaleOut(w *bytes.Buffer) {
	fmt.Fprintf(w, "## Several daemons and the wire (`bench/scaleout.sh`)\n\n")
	if pg.scaleout == nil {
		w.WriteString("Not run.\n\n")
		return
	}
	fmt.Fprintf(w, "Command: %s (step `scaleout`). Data: the **real** COLLAB, converted by the script; every row a fresh daemon, "+
		"its epoch 0 read first and not counted (it builds the indexes), then the median of the next epochs as `augloader fetch` "+
		"(the Go client, decoding every batch) reads them over Arrow Flight. %s\n\n", pg.command("scaleout"), pg.machineLine())
	w.WriteString("**Wire compression** (`serve --wire-compression`, Arrow IPC body compression of the Flight stream; NodeSam, " +
		"2 workers). `loopback`: client and daemon on 127.0.0.1. `1 Gbit/s`: the daemon in one network namespace, the client in " +
		"another, joined by a veth pair whose daemon end is throttled by `tc qdisc add dev … root tbf rate 1gbit burst 256kb latency 50ms` " +
		"(the script makes and removes them; root only).\n\n")
	w.WriteString("| link | compression | MB on the wire per epoch | ÷ uncompressed | median s/epoch | ÷ uncompressed |\n|---|---|---:|---:|---:|---:|\n")
	for _, link := range []string{"loopback", "1gbit"} {
		base, okBase := rowWith(pg.scaleout, "kind", "compression", "link", link, "comp", "none")
		label := map[string]string{"loopback": "loopback", "1gbit": "1 Gbit/s (tbf)"}[link]
		if m, ok := rowWith(pg.scaleout, "kind", "compression", "link", link); ok && m["skipped"] == "1" {
			fmt.Fprintf(w, "| %s | — | not measured: %s | | | |\n", label, strings.ReplaceAll(m["why"], "-", " "))
			continue
		}
		for _, comp := range []string{"none", "lz4", "zstd"} {
			m, ok := rowWith(pg.scaleout, "kind", "compression", "link", link, "comp", comp)
			if !ok {
				continue
			}
			rb, rt := "—", "—"
			if okBase {
				rb = fx(num(m, "bytes") / num(base, "bytes"))
				rt = fx(num(m, "median_s") / num(base, "median_s"))
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", label, comp, fnum(num(m, "bytes")/1e6), rb, fs(num(m, "median_s")), rt)
		}
	}
	w.WriteString("\nThe epoch's batches hold int32 edge columns whose values repeat and climb slowly, so both codecs shrink them " +
		"more than tenfold. On this machine the daemon's two cores are the limit: zstd's compression costs more time than its " +
		"smaller stream saves, lz4 costs less than gRPC moving the uncompressed bytes even on loopback, and on the throttled link the " +
		"uncompressed epoch is held to the link's rate while both codecs are not. Compression is the daemon's choice, applies to " +
		"Flight only (the Unix socket never compresses), and the client needs nothing to read it.\n\n")
	one, ok1 := rowWith(pg.scaleout, "kind", "scaling", "daemons", "1")
	two, ok2 := rowWith(pg.scaleout, "kind", "scaling", "daemons", "2")
	if m, ok := rowWith(pg.scaleout, "kind", "scaling"); ok && m["skipped"] == "1" {
		fmt.Fprintf(w, "**Scaling**: not measured (%s).\n\n", strings.ReplaceAll(m["why"], "-", " "))
		return
	}
	if !ok1 || !ok2 {
		return
	}
	same := one["sha256"] == two["sha256"]
	verdict := "**equal**"
	if !same {
		verdict = "**different** (a defect)"
	}
	fmt.Fprintf(w, "**Scaling** (SubMix p = 0.4, lz4 on the wire): one daemon pinned to core 0 (`taskset -c 0`, 1 worker), then two "+
		"daemons pinned to cores 0 and 1 (1 worker each, `--peers` naming both), the client reading the epoch from both together "+
		"(`fetch --addr A --addr B`: batch i from daemon i mod 2, in order).\n\n"+
		"| daemons | median s/epoch | best | speed-up |\n|---:|---:|---:|---:|\n| 1 | %s | %s | 1× |\n| 2 | %s | %s | %s |\n\n",
		fs(num(one, "median_s")), fs(num(one, "best_s")), fs(num(two, "median_s")), fs(num(two, "best_s")), fx(num(one, "median_s")/num(two, "median_s")))
	fmt.Fprintf(w, "The batches' digests (SHA-256 of each batch's bytes, then of those in order: `fetch --json`'s `batches_sha256`) "+
		"from one daemon and from two are %s for every epoch measured. The machine has %d cores, so the client (gRPC, lz4 "+
		"decompression, Arrow decoding) shares them with the two daemons: the speed-up is what is left of the second core, not "+
		"what two hosts give.\n\n", verdict, pg.machine.cores)
}

func (pg *page) scaleSeries() (map[string][]scalePoint, []string) {
	series := map[string][]scalePoint{}
	var names []string
	for _, name := range pg.scaling.names {
		rest, ok := strings.CutPrefix(name, "BenchmarkScaling/")
		if !ok {
			continue
		}
		pol := splitKV(rest, "policy")
		if _, seen := series[pol]; !seen {
			names = append(names, pol)
		}
		series[pol] = append(series[pol], scalePoint{
			edges: pg.scaling.med(name, "edges"), ns: pg.scaling.med(name, "ns/op"), nsPerEdge: pg.scaling.med(name, "ns/edge")})
	}
	for _, n := range names {
		slices.SortFunc(series[n], func(a, b scalePoint) int { return int(a.edges - b.edges) })
	}
	return series, names
}

func (pg *page) writeScaling(w *bytes.Buffer) error {
	fmt.Fprintf(w, "## Linear scalability (NodeSam, SubMix)\n\n")
	if pg.scaling == nil {
		w.WriteString("Not run.\n\n")
		return nil
	}
	series, names := pg.scaleSeries()
	sub := fmt.Sprintf("%d cores, %.0f GiB; synthetic reddit (seed 0); %s", pg.machine.cores, pg.machine.memGiB, pg.machine.date)
	if err := plotScaling(series, names, sub, pg.fig("scaling-time.png"), pg.fig("scaling-ns-per-edge.png")); err != nil {
		return err
	}
	fmt.Fprintf(w, "Command: %s, drawn by bench/report. Data: **synthetic** Reddit-scale graph (`shardconv synth --like reddit "+
		"--seed 0`: 232,965 nodes, 11,606,919 edges, Chung–Lu power-law degrees; no copy of the real Reddit graph is at hand), "+
		"nine connected subgraphs induced by BFS prefixes from a random node, 10³ to 10⁷ edges, unindexed. SubMix's partner is a "+
		"second subgraph of the same size; its ns/edge counts both graphs' edges. %s\n\n", pg.command("scaling"), pg.machineLine())
	w.WriteString("![time per draw](scaling-time.png)\n![ns per edge](scaling-ns-per-edge.png)\n\n")
	memNs := 8 / pg.memcpyMBs() * 1e3
	peer, hasPeer := pg.py.get("pyg/dropout_edge/transform-only")
	peerNs := math.NaN()
	if hasPeer {
		peerNs = peer.Median * 1e9 / (peer.Bytes / 2) // per undirected edge
	}
	fmt.Fprintf(w, "| edges |")
	for _, n := range names {
		fmt.Fprintf(w, " %s ms | %s ns/edge | × memcpy |", n, n)
	}
	w.WriteString("\n|---:|")
	w.WriteString(strings.Repeat("---:|---:|---:|", len(names)))
	w.WriteString("\n")
	for i := range series[names[0]] {
		fmt.Fprintf(w, "| %s |", fnum(series[names[0]][i].edges))
		for _, n := range names {
			q := series[n][i]
			fmt.Fprintf(w, " %s | %.1f | %s |", fms(q.ns/1e6), q.nsPerEdge, fx(q.nsPerEdge/memNs))
		}
		w.WriteString("\n")
	}
	fmt.Fprintf(w, "\nLimit: memcpy of 8 bytes per edge, %.2f ns. ", memNs)
	if hasPeer {
		fmt.Fprintf(w, "Peer: PyG's `dropout_edge` on the real COLLAB in one process costs %.1f ns per undirected edge (step `python`); ", peerNs)
		for i, n := range names {
			pts := series[n]
			if i > 0 {
				w.WriteString("; ")
			}
			fmt.Fprintf(w, "%s's time per edge at 10⁷ edges is %s PyG's", n, fx(pts[len(pts)-1].nsPerEdge/peerNs))
		}
		w.WriteString(". ")
	}
	for _, n := range names {
		pts := series[n]
		lo, hi := math.Inf(1), 0.0
		for _, q := range pts {
			lo, hi = math.Min(lo, q.nsPerEdge), math.Max(hi, q.nsPerEdge)
		}
		fmt.Fprintf(w, "%s: largest ÷ smallest ns/edge %.2f, max ÷ min over the nine sizes %.2f. ", n, pts[len(pts)-1].nsPerEdge/pts[0].nsPerEdge, hi/lo)
	}
	w.WriteString("The small subgraphs are dense BFS balls around a hub (the 10³-edge one has 68 nodes): NodeSam's work on the edges " +
		"it touches (about twice the split node's degree) is a larger share of them, so its per-edge time falls as the subgraphs grow; " +
		"it also varies with the drawn node's neighbourhood, so expect ±30% per size between runs. From about 10⁵ edges SubMix's " +
		"personalized-PageRank vectors no longer fit in L2, while conjugate gradient's iteration count stays bounded by the system's " +
		"condition number whatever the size.\n\n")
	return nil
}

// stage names of BenchmarkXEpoch, each a prefix of the daemon's pipeline.
var epochStages = []string{"decode", "augment", "loader", "encode", "socket", "shm", "flight"}

func (pg *page) writeEpoch(w *bytes.Buffer, dataset string) error {
	fmt.Fprintf(w, "## An epoch of the real %s, stage by stage (`loader`, `server`, `client`)\n\n", dataset)
	bn := "Benchmark" + strings.ReplaceAll(dataset, "-", "") + "Epoch/"
	if pg.epoch == nil || pg.epoch.count(bn+"policy=none/workers=1/stage=decode") == 0 {
		w.WriteString("Not run.\n\n")
		return nil
	}
	e := pg.epoch
	mbEpoch := e.med(bn+"policy=none/workers=1/stage=socket", "MB/epoch")
	floor := mbEpoch / pg.socketMBs()
	memFloor := mbEpoch / pg.memcpyMBs()
	fmt.Fprintf(w, "Command: %s (step `epoch`). Data: the **real** %s from `../shared/datasets`, converted by the benchmark; "+
		"batch size 32; %s MB per epoch on the wire (both directions of every edge as int32, features, labels). %s\n\n",
		pg.command("epoch"), dataset, fnum(mbEpoch), pg.machineLine())
	fmt.Fprintf(w, "Each stage is a prefix of the daemon's pipeline, so each column adds one step to the one before: "+
		"`decode` (every graph from the shard's Arrow columns into an `aug.Graph`), `augment` (+ the policy; NodeSam, as in the "+
		"loader, writes its edges straight into the batch's coalesced edge columns, so its augmentation includes the edges' "+
		"collation), `loader` (+ collation into PyG-ready Arrow batches), `encode` (+ Arrow IPC encoding), `socket` (+ the Unix socket and the Go "+
		"client decoding every batch: the whole path), `shm` (the same socket with the shared-memory transport: each batch written once "+
		"into the client's 32 MiB memfd ring, its edge columns by the workers where the message has them, the rest copied there, "+
		"which the Go client decodes from), `flight` (the same over Arrow Flight on loopback TCP). "+
		"With 2 cores and 2 workers the stages overlap, so a difference is the wall time a step adds, not its CPU time. "+
		"Floor: the epoch's bytes at the raw socket bandwidth, %s s (memcpy alone: %s s).\n\n", fs(floor), fs(memFloor))
	fmt.Fprintf(w, "| policy | workers | decode | augment | loader | encode | socket | shm | flight | socket graphs/s | socket MB/s | socket ÷ floor |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var bars []stageBar
	parts := []string{"decode", "augmentation", "collation", "IPC encoding", "socket + client decode"}
	for _, pol := range []string{"none", "nodesam", "submix"} {
		for _, wk := range []string{"1", "2"} {
			pre := bn + "policy=" + pol + "/workers=" + wk + "/stage="
			v := make([]float64, len(epochStages))
			for i, st := range epochStages {
				v[i] = e.med(pre+st, "s/epoch")
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | **%s** | %s | %s | %s | %s | %s |\n", pol, wk, fs(v[0]), fs(v[1]), fs(v[2]), fs(v[3]), fs(v[4]), fs(v[5]), fs(v[6]),
				fnum(e.med(pre+"socket", "graphs/s")), fnum(e.med(pre+"socket", "MB/s")), fx(v[4]/floor))
			bars = append(bars, stageBar{label: pol + "\n" + wk + " worker(s)", parts: []float64{v[0], v[1] - v[0], v[2] - v[1], v[3] - v[2], v[4] - v[3]}})
		}
	}
	fmt.Fprintf(w, "\nOne-off costs and the client alone (same run):\n\n| | seconds | |\n|---|---:|---|\n")
	fmt.Fprintf(w, "| open: `shard.Open` (size, CRC-32C, footer and structure of every shard) + `loader.NewSource` | %s | once per daemon start |\n", fs(e.med(bn+"stage=open", "s/epoch")))
	fmt.Fprintf(w, "| index: decode every graph and build its NodeSam index, one goroutine | %s | once, during the first NodeSam epoch |\n", fs(e.med(bn+"stage=index", "s/epoch")))
	for _, pol := range []string{"none", "nodesam", "submix"} {
		name := bn + "policy=" + pol + "/stage=client-decode"
		fmt.Fprintf(w, "| client decode: the Go client decoding a recorded %s epoch from memory | %s | %s |\n", pol, fs(e.med(name, "s/epoch")), gbs(e.med(name, "MB/s")))
	}
	prefix := ""
	if dataset != "COLLAB" {
		prefix = dataset + "/"
	}
	if r, ok := pg.py.get(prefix + "pyg/collate/workers=0"); ok {
		sock := e.med(bn+"policy=nodesam/workers=2/stage=socket", "s/epoch")
		fmt.Fprintf(w, "\nPeers in the same run (step `python`, the same graphs as PyG `Data` with one-hot degree `x`, PyG's DataLoader, batch size 32, "+
			"medians): collating the unaugmented %s in-process takes %s s per epoch", dataset, fs(r.Median))
		if d, ok := pg.py.fastest(prefix, "dropout_edge"); ok {
			fmt.Fprintf(w, ", and applying `dropout_edge` at its fastest configuration (%s) %s s", configName(d.Name), fs(d.Median))
		}
		fmt.Fprintf(w, ". The NodeSam-augmented epoch through the daemon, the socket and the Go client's decoding takes %s s with 2 workers: "+
			"%s faster than PyG's collation alone", fs(sock), fx(r.Median/sock))
		if d, ok := pg.py.fastest(prefix, "dropout_edge"); ok {
			fmt.Fprintf(w, ", %s faster than its fastest `dropout_edge` loader", fx(d.Median/sock))
		}
		w.WriteString(".\n")
	}
	png := "stages-" + strings.ReplaceAll(dataset, "-", "") + ".png"
	sub := fmt.Sprintf("%d cores, %.0f GiB; real %s; %s", pg.machine.cores, pg.machine.memGiB, dataset, pg.machine.date)
	if err := plotStages(dataset, bars, parts, floor, fmt.Sprintf("floor: %s MB at the raw socket's %s", fnum(mbEpoch), gbs(pg.socketMBs())), sub, pg.fig(png)); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n![%s stages](%s)\n\n", dataset, png)
	return nil
}

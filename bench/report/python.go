package main

// The Python client's sections: its epochs beside PyG's, the peers'
// configurations, the daemon's counters.

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// shmVsSocket compares the Python rows of policy pol over shared memory
// and over the socket, layout by layout: "views 0.180 vs 0.220 s (1.22×)".
func (pg *page) shmVsSocket(pol string) []string {
	var parts []string
	if pg.py == nil {
		return nil
	}
	for _, layout := range []string{"raw", "views", "pyg-layout"} {
		m, ok1 := pg.py.get("augloader/shm/" + pol + "/" + layout)
		s, ok2 := pg.py.get("augloader/socket/" + pol + "/" + layout)
		if ok1 && ok2 && m.Median > 0 {
			parts = append(parts, fmt.Sprintf("`%s` %s vs %s s (%s)", layout, fs(m.Median), fs(s.Median), fx(s.Median/m.Median)))
		}
	}
	return parts
}

// headline returns the #6 comparison: the paired rows when the run has
// them, else the separate ones; the peer is PyG's fastest dropout_edge
// configuration, its Config the name of that configuration's own row.
func (pg *page) headline() (ours, peer pyRow, paired, ok bool) {
	fast, okFast := pg.py.fastest("", "dropout_edge")
	if o, ok1 := pg.py.get("paired/augloader/socket/nodesam/views"); ok1 {
		if p, ok2 := pg.py.get("paired/pyg/dropout_edge/fastest"); ok2 {
			if p.Config == "" {
				p.Config = fast.Name
			}
			return o, p, true, true
		}
	}
	o, ok1 := pg.py.get("augloader/socket/nodesam/views")
	fast.Config = fast.Name
	return o, fast, false, ok1 && okFast
}

func (pg *page) writePython(w *bytes.Buffer) error {
	fmt.Fprintf(w, "## The Python client against PyG (`bench/python_client.py`)\n\n")
	if pg.py == nil {
		w.WriteString("Not run.\n\n")
		return nil
	}
	fmt.Fprintf(w, "Command: %s (step `python`; uses `.venv-peers`: %s). Data: the **real** COLLAB, converted by the script; the daemon "+
		"(`augloader serve` as `augloader.Daemon` starts it: default workers = cores, its runtime on every core but the trainer's, `--procs`; "+
		"`…/procs=every-core`: a second daemon on every core, `--procs 0`, its epochs alternating with the other `paired/` rows') and the client "+
		"share the machine's %d cores. %s\n\n", pg.command("python"), pg.pygPeer(), pg.machine.cores, pg.machineLine())
	w.WriteString("What each row delivers per batch:\n\n" +
		"- `raw`: the epoch's bytes read and dropped, no Arrow decoding (the transport alone; over shared memory each message's " +
		"descriptor is read and the message released, its bytes in the ring never touched).\n" +
		"- Transports: `socket` (the Unix socket), `shm` (the same socket with the shared-memory transport, `unix+shm://`: " +
		"batches through a memfd ring the client maps, docs/protocol.md), `flight` (Arrow Flight on loopback TCP).\n" +
		"- `views`: the client's `Batch`: NumPy views of the Arrow buffers (int32 `edge_src`/`edge_dst`, the sparse one-hot features), " +
		"`ptr`, `batch` and the soft labels. This is what `augloader.torch.to_tensors` moves to a GPU, where `edge_index` is widened " +
		"to int64 and `x` one-hot encoded on the device (half the bytes of int64 cross the bus, and no dense `x`).\n" +
		"- `pyg-layout`: additionally the host-memory layout of a PyG `Batch`: int64 `edge_index` [2, E] and the dense one-hot `x` " +
		"[N, 369], what a CPU-only trainer consumes.\n" +
		"- `decode-only`: `views` built from a recorded NodeSam epoch held in memory (no daemon, no socket).\n" +
		"- PyG rows: the same graphs as `torch_geometric.data.Data` (one-hot degree `x`, both edge directions, as PyG users build COLLAB) " +
		"through PyG's `DataLoader` (batch size 32, shuffled): `collate` in-process with no augmentation; `dropout_edge` applying " +
		"`torch_geometric.utils.dropout_edge` per graph; `nodesam-cleanroom` and `submix-cleanroom` applying a clean-room NodeSam and " +
		"SubMix written per graph in NumPy from the paper's algorithms, as a PyG user of the paper would (`bench/peers/cleanroom.py`, " +
		"its outputs checked for the paper's properties by `bench/peers/test_cleanroom.py`; one epoch over every fifth graph per " +
		"configuration, so compare graphs/s); `transform-only` applies `dropout_edge` to every graph in one process, no DataLoader. " +
		"Every peer is measured in-process and with 1 and 2 worker processes, persistent or not (next table); the main table shows " +
		"its fastest configuration, and ratios are quoted against that.\n\n")
	sockBytes := map[string]float64{}
	for _, pol := range []string{"none", "nodesam", "submix"} {
		if r, ok := pg.py.get("augloader/socket/" + pol + "/raw"); ok {
			sockBytes[pol] = r.Bytes
		}
	}
	peer, hasPeer := pg.py.fastest("", "dropout_edge")
	fmt.Fprintf(w, "| measurement | median s/epoch | best | graphs/s (median) | ÷ socket floor | PyG `dropout_edge` at its fastest ÷ this (`paired/` rows: its paired epochs) |\n|---|---:|---:|---:|---:|---:|\n")
	var labels []string
	var secs []float64
	isPeerConfig := func(name string) bool {
		return strings.HasPrefix(name, "pyg/") && strings.Contains(name, "/workers=") && name != "pyg/collate/workers=0"
	}
	for _, r := range pg.py.rows {
		if r.Name == "pyg/read_tu_data" || strings.HasPrefix(r.Name, "REDDIT-BINARY/") || r.Epochs == 0 {
			continue
		}
		if isPeerConfig(r.Name) {
			continue // in the configurations table, below
		}
		pg.pythonRow(w, r, r.Name, sockBytes, peer, hasPeer)
		labels = append(labels, r.Name)
		secs = append(secs, r.Median)
	}
	if hasPeer {
		pg.pythonRow(w, peer, peer.Name+" (its fastest)", sockBytes, peer, hasPeer)
		labels = append(labels, peer.Name)
		secs = append(secs, peer.Median)
	}
	slices.Reverse(labels)
	slices.Reverse(secs)
	sub := fmt.Sprintf("%d cores, %.0f GiB; real COLLAB, 5,000 graphs; %s", pg.machine.cores, pg.machine.memGiB, pg.machine.date)
	if err := plotBars("COLLAB epoch to a Python process: augloader vs PyG", sub, labels, secs, pg.fig("python-COLLAB.png")); err != nil {
		return err
	}
	w.WriteString("\n![Python client vs PyG](python-COLLAB.png)\n\n")
	pg.writePeerConfigs(w)
	pg.writeDaemonCounters(w)
	if ours, hp, paired, ok := pg.headline(); ok {
		lay, _ := pg.py.get("augloader/socket/nodesam/pyg-layout")
		how := ""
		if paired {
			how = fmt.Sprintf("; the `paired/` rows, %d epochs of each alternating so both see the same machine", ours.Epochs)
		}
		fmt.Fprintf(w, "A NodeSam-augmented COLLAB epoch reaches the Python trainer in %s s (median%s), %s faster than PyG's DataLoader "+
			"applying only `dropout_edge` at its fastest configuration on this machine (%s, %s s). As PyG's host-memory layout (int64 `edge_index`, dense `x`) it "+
			"takes %s s, %s faster than that peer in its own rows. The client's own work is small (`decode-only`); the rest is the "+
			"daemon's augmentation and collation sharing the two cores with the client, and the copy through the kernel (`raw`).\n\n",
			fs(ours.Median), how, fx(hp.Median/ours.Median), configName(hp.Config), fs(hp.Median), fs(lay.Median), fx(peer.Median/lay.Median))
	}
	pg.writeHeadlinePyg(w)
	for _, pol := range []string{"none", "nodesam"} {
		if parts := pg.shmVsSocket(pol); len(parts) > 0 {
			fmt.Fprintf(w, "Shared memory against the socket, policy `%s` (median s per epoch, same run; the socket's time ÷ shared memory's "+
				"in brackets): %s. Over shared memory the daemon copies each batch once into the client's memfd ring and the client's "+
				"arrays are views of it; over the socket the kernel copies it twice (into the socket, out to the client's buffer).\n\n",
				pol, strings.Join(parts, "; "))
		}
	}
	for _, c := range []struct{ ours, aug, what string }{
		{"augloader/socket/nodesam/views", "nodesam-cleanroom", "NodeSam"},
		{"augloader/socket/submix/views", "submix-cleanroom", "SubMix (p = 0.4)"},
	} {
		o, ok1 := pg.py.get(c.ours)
		p, ok2 := pg.py.fastest("", c.aug)
		if !ok1 || !ok2 || o.Graphs == 0 || p.Graphs == 0 {
			continue
		}
		og, pgps := o.Graphs/o.Median, p.Graphs/p.Median
		fmt.Fprintf(w, "%s: the daemon delivers %s augmented graphs/s to the Python client; the clean-room %s inside PyG's DataLoader, "+
			"at its fastest (%s), %s graphs/s: %s.\n\n", c.what, fnum(og), c.what, configName(p.Name), fnum(pgps), fx(og/pgps))
	}
	return nil
}

// pythonRow is one row of the Python table.
func (pg *page) pythonRow(w *bytes.Buffer, r pyRow, label string, sockBytes map[string]float64, peer pyRow, hasPeer bool) {
	floorCol, peerCol, gps := "—", "—", "—"
	if strings.HasPrefix(r.Name, "augloader/") {
		pol := "nodesam"
		for _, p := range []string{"none", "submix"} {
			if strings.Contains(r.Name, "/"+p+"/") {
				pol = p
			}
		}
		if b := sockBytes[pol]; b > 0 && !strings.HasPrefix(r.Name, "augloader/decode-only") {
			floorCol = fx(r.Median / (b / 1e6 / pg.socketMBs()))
		}
	}
	if r.Graphs > 0 {
		gps = fnum(r.Graphs / r.Median)
	}
	if pp, ok := pg.py.get("paired/pyg/dropout_edge/fastest"); ok && strings.HasPrefix(r.Name, "paired/") {
		peerCol = fx(pp.Median / r.Median) // against the peer's epochs paired with these
	} else if hasPeer {
		peerCol = fx(peer.Median / r.Median)
	}
	if r.Name == "augloader/socket/nodesam/views" || r.Name == "paired/augloader/socket/nodesam/views" {
		label = "**" + label + "**"
	}
	fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", label, fs(r.Median), fs(r.Best), gps, floorCol, peerCol)
}

// writePeerConfigs: every DataLoader configuration of every PyG peer, the
// fastest in bold.
func (pg *page) writePeerConfigs(w *bytes.Buffer) {
	found := false
	for _, aug := range []string{"dropout_edge", "nodesam-cleanroom", "submix-cleanroom"} {
		_, ok := pg.py.fastest("", aug)
		found = found || ok
	}
	if !found {
		return
	}
	w.WriteString("Every PyG peer in every DataLoader configuration tried (same run; `dropout_edge` over all 5,000 graphs, the " +
		"clean-room peers over every fifth graph, one epoch a configuration; a persistent loader's first epoch, which starts " +
		"its workers, is not counted). The fastest, in bold, is the peer:\n\n")
	w.WriteString("| peer | configuration | median s/epoch | graphs | graphs/s |\n|---|---|---:|---:|---:|\n")
	for _, aug := range []string{"dropout_edge", "nodesam-cleanroom", "submix-cleanroom"} {
		best, _ := pg.py.fastest("", aug)
		for _, r := range pg.py.rows {
			if !strings.HasPrefix(r.Name, "pyg/"+aug+"/workers=") || r.Epochs == 0 {
				continue
			}
			cfg := configName(r.Name)
			if r.Name == best.Name {
				cfg = "**" + cfg + "**"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", aug, cfg, fs(r.Median), fnum(r.Graphs), fnum(r.Graphs/r.Median))
		}
	}
	w.WriteString("\n")
}

// writeDaemonCounters shows what the daemon's /metrics endpoint said
// during the augloader rows: the numbers an operator scrapes.
func (pg *page) writeDaemonCounters(w *bytes.Buffer) {
	var rows []pyRow
	for _, r := range pg.py.rows {
		if r.Daemon != nil {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	w.WriteString("The daemon's own view of the same epochs, read by the benchmark from `augloader serve --metrics` " +
		"(Prometheus text, before and after each row) exactly as an operator scrapes it: worker time building batches " +
		"(summed over workers; it includes time a worker is runnable but descheduled) and waiting (for the next batch " +
		"to build, or for room in the window while the client is behind), and the sender's time waiting for " +
		"the next batch to be built or handing it to the client's socket. Per epoch:\n\n")
	w.WriteString("| row | worker busy s | worker idle s | sender waited for workers s | sender waited on the client s | MB sent | batches |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		d := r.Daemon
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Name, fs(d.WorkerBusy), fs(d.WorkerIdle), fs(d.WaitWorkers), fs(d.WaitClient), fnum(d.SentBytes/1e6), fnum(d.Batches))
	}
	w.WriteString("\n")
}

// writeHeadlinePyg: #68's headline, the path a PyG user takes
// (AugloaderDataset(pyg=True) over shared memory, paired with PyG's
// fastest), its CPU on both sides and this machine's floor, then where the
// time goes (bench/results/profile.txt, bench/profile.sh).
func (pg *page) writeHeadlinePyg(w *bytes.Buffer) {
	if _, cs := pg.headlinePygCase(); len(cs) == 1 {
		fmt.Fprintf(w, "**The path a PyG user takes** (`AugloaderDataset(url, pyg=True)` over shared memory, PyG `Batch`es; the `paired/` "+
			"rows, alternating with PyG's fastest `dropout_edge` configuration; CPU: our trainer process and the daemon, against PyG's "+
			"process and its DataLoader workers): %s.\n\n", cs[0].shown)
	}
	r := pg.results["profile"]
	if r == nil || len(r.rows) == 0 {
		w.WriteString("Where its time goes: no profile is saved (bench/results/profile.txt is missing: run bench/profile.sh).\n\n")
		return
	}
	fmt.Fprintf(w, "Where its time goes, from `%s`: %s\n\n", r.file, strings.Join(r.about, " "))
	total := 0.0
	for _, m := range r.rows {
		if m["kind"] == "trainer-total" {
			total = num(m, "s_per_epoch")
		}
	}
	fmt.Fprintf(w, "| the trainer's side (cProfile; %s s an epoch profiled) | calls an epoch | s an epoch | share |\n|---|---:|---:|---:|\n", fs(total))
	for _, m := range r.rows {
		if m["kind"] == "trainer-profile" {
			fmt.Fprintf(w, "| `%s` | %s | %s | %.0f%% |\n", m["func"], m["calls_per_epoch"], fs(num(m, "s_per_epoch")), 100*num(m, "share"))
		}
	}
	w.WriteString("\n| the daemon's side (pprof, one worker) | flat | share |\n|---|---:|---:|\n")
	for _, m := range r.rows {
		if m["kind"] == "daemon-profile" {
			fmt.Fprintf(w, "| `%s` | %s | %s |\n", m["func"], m["flat"], m["share"])
		}
	}
	w.WriteString("\n")
}

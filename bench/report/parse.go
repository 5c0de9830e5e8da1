package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// benchFile holds one `go test -bench` output: every metric of every
// benchmark, one value per -count repetition.
type benchFile struct {
	names   []string                        // in order of first appearance
	metrics map[string]map[string][]float64 // name → unit → values
	cpu     string                          // the "cpu:" header line
}

// readBench parses `go test -bench` output. Names lose their -GOMAXPROCS
// suffix; "ns/op" and every ReportMetric unit are kept.
func readBench(path string) (*benchFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bf := &benchFile{metrics: map[string]map[string][]float64{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if cpu, ok := strings.CutPrefix(text, "cpu: "); ok {
			bf.cpu = strings.TrimSpace(cpu)
			continue
		}
		fields := strings.Fields(text)
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(fields[1]); err != nil {
			continue // a benchmark's log line, not its result
		}
		name := fields[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		if bf.metrics[name] == nil {
			bf.metrics[name] = map[string][]float64{}
			bf.names = append(bf.names, name)
		}
		for k := 2; k+1 < len(fields); k += 2 {
			v, err := strconv.ParseFloat(fields[k], 64)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: value %q of %s: %w", path, line, fields[k], fields[k+1], err)
			}
			bf.metrics[name][fields[k+1]] = append(bf.metrics[name][fields[k+1]], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(bf.names) == 0 {
		return nil, fmt.Errorf("%s: no benchmark results", path)
	}
	return bf, nil
}

// med is the median of a benchmark's metric over its repetitions (NaN
// when absent, which the page prints as "—").
func (b *benchFile) med(name, unit string) float64 {
	if b == nil {
		return math.NaN()
	}
	return median(b.metrics[name][unit])
}

// span is the smallest and largest value of a metric.
func (b *benchFile) span(name, unit string) (lo, hi float64) {
	v := b.metrics[name][unit]
	if len(v) == 0 {
		return math.NaN(), math.NaN()
	}
	return slices.Min(v), slices.Max(v)
}

// count is the number of repetitions of a benchmark.
func (b *benchFile) count(name string) int { return len(b.metrics[name]["ns/op"]) }

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// pyRow is one line of bench/python_client.py's JSON output.
type pyRow struct {
	Name    string    `json:"name"`
	Epochs  int       `json:"epochs"`
	Secs    []float64 `json:"s_per_epoch"`
	Best    float64   `json:"best_s"`
	Median  float64   `json:"median_s"`
	Graphs  float64   `json:"graphs"`
	Batches float64   `json:"batches"`
	Bytes   float64   `json:"bytes"`
	// CPU seconds an epoch (medians): the trainer process's and the
	// daemon's on augloader's pyg-batch rows, a PyG loader's with its
	// workers (loader); and what a pyg-batch epoch held (edges, nodes and
	// x's width), for its floor.
	TrainerCPU float64 `json:"trainer_cpu_s"`
	DaemonCPU  float64 `json:"daemon_cpu_s"`
	LoaderCPU  float64 `json:"loader_cpu_s"`
	Edges      float64 `json:"edges"`
	Nodes      float64 `json:"nodes"`
	FeatureDim float64 `json:"feature_dim"`
	// Config names, on a "pyg/<aug>/fastest" marker row (which has no
	// epochs of its own), the row of that peer's fastest configuration.
	Config string `json:"config"`
	// Daemon holds the daemon's /metrics counters per epoch over the
	// row's epochs (augloader rows only).
	Daemon *struct {
		WorkerBusy  float64 `json:"worker_busy_s"`
		WorkerIdle  float64 `json:"worker_idle_s"`
		WaitWorkers float64 `json:"wait_workers_s"`
		WaitClient  float64 `json:"wait_client_s"`
		SentBytes   float64 `json:"sent_bytes"`
		Batches     float64 `json:"batches"`
	} `json:"daemon"`
}

type pyResults struct {
	rows     []pyRow
	byName   map[string]pyRow
	versions map[string]any
}

func readPython(path string) (*pyResults, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res := &pyResults{byName: map[string]pyRow{}}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var probe map[string]any
		if err := json.Unmarshal(sc.Bytes(), &probe); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if probe["name"] == "env" {
			res.versions = probe
			continue
		}
		var r pyRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		res.rows = append(res.rows, r)
		res.byName[r.Name] = r
	}
	if len(res.rows) == 0 {
		return nil, fmt.Errorf("%s: no measurements", path)
	}
	return res, sc.Err()
}

// fastest returns the fastest DataLoader configuration measured for the
// PyG peer applying aug (dropout_edge, nodesam-cleanroom, ...): the row its
// marker "<prefix>pyg/<aug>/fastest" names. Runs from before the markers
// had only the 2-worker row, which it falls back to.
func (p *pyResults) fastest(prefix, aug string) (pyRow, bool) {
	if m, ok := p.get(prefix + "pyg/" + aug + "/fastest"); ok {
		return p.get(m.Config)
	}
	return p.get(prefix + "pyg/" + aug + "/workers=2")
}

// configName is a peer row's DataLoader configuration, as prose.
func configName(row string) string {
	w := splitKV(row, "workers")
	s := w + " worker processes"
	switch w {
	case "0":
		s = "in-process (`num_workers=0`)"
	case "1":
		s = "1 worker process"
	}
	if strings.HasSuffix(row, "/persistent") {
		s += ", persistent"
	}
	return s
}

func (p *pyResults) get(name string) (pyRow, bool) {
	if p == nil {
		return pyRow{}, false
	}
	r, ok := p.byName[name]
	return r, ok
}

// readResult reads the first "RESULT k=v ..." line of a shell benchmark,
// every value a number.
func readResult(path string) (map[string]float64, error) {
	lines, err := readResultLines(path)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for k, v := range lines[0] {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %s=%s: %w", path, k, v, err)
		}
		out[k] = x
	}
	return out, nil
}

// readResultLines reads every "RESULT k=v ..." line of a shell benchmark,
// values as text.
func readResultLines(path string) ([]map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []map[string]string
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "RESULT ")
		if !ok {
			continue
		}
		m := map[string]string{}
		for kv := range strings.FieldsSeq(rest) {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no RESULT line", path)
	}
	return out, nil
}

// num is a RESULT value as a number (NaN when absent or not one).
func num(m map[string]string, k string) float64 {
	x, err := strconv.ParseFloat(m[k], 64)
	if err != nil {
		return math.NaN()
	}
	return x
}

// readCommands reads bench/run.sh's commands.tsv: step name → command.
func readCommands(dir string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "commands.tsv"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		name, cmd, ok := strings.Cut(line, "\t")
		if !ok {
			return nil, fmt.Errorf("commands.tsv: malformed line %q", line)
		}
		out[name] = cmd
	}
	return out, nil
}

// Command report writes docs/bench.md and its PNG figures from the raw
// outputs of bench/run.sh (make bench): every number on the page comes
// from that one run, each figure states the command that produced it, the
// machine, the data and the date, and its ratio to the machine's own
// limits (memcpy, Unix socket, measured in the same run) and to the peer
// tool measured in the same run.
//
//	go run ./bench/report -in bench/out -docs docs -results bench/results
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/augloader/augloader/internal/iox"
)

func main() {
	in := flag.String("in", "bench/out", "folder of bench/run.sh outputs")
	docs := flag.String("docs", "docs", "folder for bench.md and the PNG figures")
	results := flag.String("results", "bench/results", "folder of results saved from other machines (a lent GPU's gpu.txt, gpu-feed.txt)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("bench/report: ")
	pg, err := load(*in)
	if err != nil {
		log.Fatal(err)
	}
	pg.docs = *docs
	if pg.results, err = readResultsDir(*results); err != nil {
		log.Fatal(err)
	}
	pg.gpu, pg.gpuFeed = pg.results["gpu"], pg.results["gpu-feed"]
	var buf bytes.Buffer
	if err := pg.write(&buf); err != nil {
		log.Fatal(err)
	}
	out := filepath.Join(*docs, "bench.md")
	if err := iox.WriteFileAtomic(out, buf.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	figs := filepath.Join(*docs, "figures.tsv")
	if err := iox.WriteFileAtomic(figs, pg.figuresTSV(), 0o644); err != nil {
		log.Fatal(err)
	}
	pg.wrote = append(pg.wrote, figs)
	for _, f := range pg.wrote {
		fmt.Println("wrote", f)
	}
	fmt.Println("wrote", out)
}

// load reads whatever bench/run.sh left in dir; a missing output leaves
// its section saying so rather than failing the page.
func load(dir string) (*page, error) {
	cmds, err := readCommands(dir)
	if err != nil {
		return nil, fmt.Errorf("%w (run bench/run.sh or make bench first)", err)
	}
	pg := &page{cmds: cmds, machine: readMachine()}
	opt := func(name string) string {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err != nil {
			pg.missing = append(pg.missing, name)
			return ""
		}
		return p
	}
	for _, b := range []struct {
		file string
		into **benchFile
	}{{"policies.txt", &pg.policies}, {"scaling.txt", &pg.scaling}, {"collate.txt", &pg.collate}, {"epoch.txt", &pg.epoch}} {
		if p := opt(b.file); p != "" {
			if *b.into, err = readBench(p); err != nil {
				return nil, err
			}
		}
	}
	if p := opt("python.jsonl"); p != "" {
		if pg.py, err = readPython(p); err != nil {
			return nil, err
		}
	}
	if p := opt("convert.txt"); p != "" {
		if pg.convert, err = readResult(p); err != nil {
			return nil, err
		}
	}
	for _, b := range []struct {
		file string
		into *[]map[string]string
	}{{"scaleout.txt", &pg.scaleout}, {"molecules.txt", &pg.molecules}, {"large.txt", &pg.large}, {"shuffle.txt", &pg.shuffle}, {"tensors.txt", &pg.tensors}, {"twins.txt", &pg.twins}, {"litdata.txt", &pg.litdata}, {"cliff.txt", &pg.cliff}, {"s3.txt", &pg.s3}} {
		if p := opt(b.file); p != "" {
			if *b.into, err = readResultLines(p); err != nil {
				return nil, err
			}
		}
	}
	// The large step's limited daemon says in its note how large the
	// decoded shards are.
	if b, err := os.ReadFile(filepath.Join(dir, "large.txt")); err == nil {
		if m := regexp.MustCompile(`the shards \(about (\d+)MiB decoded\)`).FindSubmatch(b); m != nil {
			mib, _ := strconv.Atoi(string(m[1]))
			pg.largeDecoded = fmt.Sprintf(", about %.1f GiB decoded", float64(mib)/1024)
		}
	}
	// The commit measured, as bench/run.sh recorded it before the first step.
	if b, err := os.ReadFile(filepath.Join(dir, "commit.txt")); err == nil {
		pg.machine.commit, pg.machine.dirtyWorktree = strings.CutSuffix(strings.TrimSpace(string(b)), "-dirty")
	}
	if pg.epoch != nil && pg.epoch.cpu != "" {
		pg.machine.cpu = pg.epoch.cpu
	}
	return pg, nil
}

type machine struct {
	cores         int
	memGiB        float64
	cpu, kernel   string
	goVersion     string
	commit, date  string
	dirtyWorktree bool
}

func readMachine() machine {
	m := machine{cores: runtime.NumCPU(), goVersion: runtime.Version(), date: time.Now().UTC().Format("2006-01-02")}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				m.memGiB = kb / (1 << 20)
			}
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.commit = strings.TrimSpace(string(out))
		// The page and figures a previous run wrote do not count.
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs/bench.md", ":!docs/*.png").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
			m.dirtyWorktree = true
		}
	}
	return m
}

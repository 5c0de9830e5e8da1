package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Metrics are the daemon's counters, served in the Prometheus text format
// by MetricsHandler. Names follow augloader_<subsystem>_<name>_<unit>.
// Safe for concurrent use; a nil *Metrics records nothing.
type Metrics struct {
	streams, active, graphs, batches, bytes atomic.Int64
	waitWorkers, waitClient, busy, idle     atomic.Int64 // nanoseconds
	mu                                      sync.Mutex
	rejected                                map[string]int64 // by error code
	memory                                  MemoryGauge
	ppr                                     PPRGauge
	cache                                   func() CacheStats
	store                                   func() StoreStats
	disk                                    func() DiskCacheStats
	cut, acceptErrors, overBudget           atomic.Int64
	unchanged                               atomic.Int64
	ringMaps                                atomic.Int64 // shared-memory rings mapped (ringCache)
	shmLent, shmInline                      atomic.Int64 // batches written around their lent edges; messages sent inline
}

// MemoryGauge is what Metrics reports of a loader.Memory.
type MemoryGauge interface {
	Held() int64
	Limit() int64
}

// SetMemory makes /metrics report the bytes batches hold against the
// budget (augloader_loader_memory_*).
func (m *Metrics) SetMemory(g MemoryGauge) {
	m.mu.Lock()
	m.memory = g
	m.mu.Unlock()
}

// PPRGauge is what Metrics reports of SubMix's ranking cache.
type PPRGauge interface {
	Used() int64
	Limit() int64
	Hits() int64
	Draws() int64
}

// SetPPRCache makes /metrics report SubMix's ranking cache
// (augloader_aug_ppr_cache_*).
func (m *Metrics) SetPPRCache(g PPRGauge) {
	m.mu.Lock()
	m.ppr = g
	m.mu.Unlock()
}

// CacheStats is what Metrics reports of a shard cache (shard.CacheStats).
type CacheStats struct {
	Limit, Used, Peak int64
	Loads, Evictions  int64
	Resident          int
	Prefetches        int64
	Scans             int64
	Sheds             int64
	Compactions       int64
	Trims             int64
	Private           int
	Futures           int64
}

// SetShardCache makes /metrics report the shard cache of a reader with a
// cache limit (augloader_shard_cache_*).
func (m *Metrics) SetShardCache(stats func() CacheStats) {
	m.mu.Lock()
	m.cache = stats
	m.mu.Unlock()
}

// StoreStats is what Metrics reports of an object store's requests.
type StoreStats struct {
	Gets, Heads, Retries, Bytes int64
	// Seconds sums the time from each GET sent to its body read.
	Seconds float64
}

// SetObjectStore makes /metrics report the requests of the object store
// the shards are read from (augloader_objstore_*).
func (m *Metrics) SetObjectStore(stats func() StoreStats) {
	m.mu.Lock()
	m.store = stats
	m.mu.Unlock()
}

// DiskCacheStats is what Metrics reports of a disk cache of the store's
// reads (objstore.DiskCache).
type DiskCacheStats struct {
	Hits, Misses, Bad, Evictions, WriteErrors, Written, Stale int64
	Used, Limit                                               int64
}

// SetDiskCache makes /metrics report the disk cache before the store the
// shards are read from (augloader_disk_cache_*).
func (m *Metrics) SetDiskCache(stats func() DiskCacheStats) {
	m.mu.Lock()
	m.disk = stats
	m.mu.Unlock()
}

// NewMetrics returns zeroed counters.
func NewMetrics() *Metrics { return &Metrics{rejected: map[string]int64{}} }

func (m *Metrics) start() {
	if m != nil {
		m.streams.Add(1)
		m.active.Add(1)
	}
}

func (m *Metrics) done(batches, graphs int, bytes int64, t workerTimes, err error) {
	if m == nil {
		return
	}
	m.active.Add(-1)
	m.batches.Add(int64(batches))
	m.graphs.Add(int64(graphs))
	m.bytes.Add(bytes)
	m.waitWorkers.Add(int64(t.waitWorkers))
	m.waitClient.Add(int64(t.waitClient))
	m.busy.Add(int64(t.busy))
	m.idle.Add(int64(t.idle))
	m.unchanged.Add(int64(t.unchanged))
	if err != nil {
		m.cut.Add(1)
	}
}

func (m *Metrics) overBudgetBatches(n int) {
	if m != nil {
		m.overBudget.Add(int64(n))
	}
}

func (m *Metrics) ringMapped() {
	if m != nil {
		m.ringMaps.Add(1)
	}
}

// shmStream counts a shared-memory stream's batches written around their
// lent edge columns and its messages sent inline.
func (m *Metrics) shmStream(lent, inline int) {
	if m != nil {
		m.shmLent.Add(int64(lent))
		m.shmInline.Add(int64(inline))
	}
}

func (m *Metrics) acceptError() {
	if m != nil {
		m.acceptErrors.Add(1)
	}
}

func (m *Metrics) reject(code string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.rejected[code]++
	m.mu.Unlock()
}

// WriteText writes the counters in the Prometheus text exposition format.
func (m *Metrics) WriteText(w io.Writer) {
	counter := func(name, help string, v float64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %g\n", name, help, name, name, v)
	}
	count := func(name, help, typ string, v int64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", name, help, name, typ, name, v)
	}
	count("augloader_server_procs", "Cores the daemon's Go code runs on at once (GOMAXPROCS: --procs, else every core or $GOMAXPROCS).", "gauge", int64(runtime.GOMAXPROCS(0)))
	count("augloader_server_streams_total", "Streams started.", "counter", m.streams.Load())
	count("augloader_server_streams_active", "Streams being served.", "gauge", m.active.Load())
	count("augloader_server_streams_cut_total", "Streams ended by an error or shutdown.", "counter", m.cut.Load())
	count("augloader_server_accept_errors_total", "Accepts that failed and were retried (out of file descriptors, ...).", "counter", m.acceptErrors.Load())
	count("augloader_server_graphs_total", "Graphs sent.", "counter", m.graphs.Load())
	count("augloader_server_batches_total", "Batches sent.", "counter", m.batches.Load())
	count("augloader_server_batches_over_budget_total", "Batches of one graph that may alone exceed the node or edge budget.", "counter", m.overBudget.Load())
	count("augloader_server_sent_bytes_total", "Arrow IPC bytes sent.", "counter", m.bytes.Load())
	count("augloader_server_shm_ring_maps_total", "Shared-memory rings mapped; a client's next stream over the same ring reuses the mapping.", "counter", m.ringMaps.Load())
	count("augloader_server_shm_lent_batches_total", "Batches whose edge columns the workers wrote straight into the client's shared-memory ring, where the batch was sent from without copying them.", "counter", m.shmLent.Load())
	count("augloader_server_shm_inline_messages_total", "Messages of shared-memory streams sent inline on the socket: the client held its ring full (a larger ring, or releasing batches sooner, avoids it).", "counter", m.shmInline.Load())
	count("augloader_aug_submix_unchanged_total", "Graphs SubMix sent unchanged, with their hard label, because the mix had no edge (docs/schedule.md).", "counter", m.unchanged.Load())
	counter("augloader_loader_worker_busy_seconds_total", "Time workers spent augmenting and collating.", time.Duration(m.busy.Load()).Seconds())
	counter("augloader_loader_worker_idle_seconds_total", "Time workers spent waiting for a batch to build or for room in the window (the client is behind).", time.Duration(m.idle.Load()).Seconds())
	counter("augloader_loader_wait_workers_seconds_total", "Time senders waited for the next batch to be built.", time.Duration(m.waitWorkers.Load()).Seconds())
	counter("augloader_loader_wait_client_seconds_total", "Time senders spent handing batches to clients.", time.Duration(m.waitClient.Load()).Seconds())
	m.mu.Lock()
	if m.memory != nil {
		count("augloader_loader_memory_held_bytes", "Bytes held by batches in flight beyond each stream's next one (--memory-budget).", "gauge", m.memory.Held())
		count("augloader_loader_memory_budget_bytes", "The memory budget (--memory-budget).", "gauge", m.memory.Limit())
	}
	if m.ppr != nil {
		count("augloader_aug_ppr_cache_bytes", "Bytes SubMix's cached PageRank rankings hold (--ppr-cache).", "gauge", m.ppr.Used())
		count("augloader_aug_ppr_cache_draws_total", "SubMix rankings asked of the cache.", "counter", m.ppr.Draws())
		count("augloader_aug_ppr_cache_hits_total", "SubMix rankings found in the cache (no PageRank solve).", "counter", m.ppr.Hits())
	}
	if m.store != nil {
		st := m.store()
		count("augloader_objstore_gets_total", "Ranged GETs sent to the object store (retries included).", "counter", st.Gets)
		count("augloader_objstore_heads_total", "HEADs sent to the object store (one per file opened, retries included).", "counter", st.Heads)
		count("augloader_objstore_retries_total", "Requests tried again (a cut body, a timeout, 5xx, SlowDown).", "counter", st.Retries)
		count("augloader_objstore_bytes_total", "Bytes read from the object store.", "counter", st.Bytes)
		counter("augloader_objstore_get_seconds_total", "Time from each GET sent to its body read, summed.", st.Seconds)
	}
	if m.disk != nil {
		st := m.disk()
		count("augloader_disk_cache_hits_total", "Reads of the shards' store served from --disk-cache.", "counter", st.Hits)
		count("augloader_disk_cache_misses_total", "Reads of the shards' store that --disk-cache did not hold (bad entries included).", "counter", st.Misses)
		count("augloader_disk_cache_bad_total", "Entries of --disk-cache that failed their check (CRC-32C, size, key) and were fetched again.", "counter", st.Bad)
		count("augloader_disk_cache_evictions_total", "Entries dropped to stay within --disk-cache-limit.", "counter", st.Evictions)
		count("augloader_disk_cache_stale_total", "Entries of a replaced object's older version, dropped when the new version was opened.", "counter", st.Stale)
		count("augloader_disk_cache_write_errors_total", "Entries that could not be written or removed (the read went on from the store).", "counter", st.WriteErrors)
		count("augloader_disk_cache_written_bytes_total", "Bytes of entries written to --disk-cache.", "counter", st.Written)
		count("augloader_disk_cache_bytes", "Bytes of entries --disk-cache holds.", "gauge", st.Used)
		count("augloader_disk_cache_limit_bytes", "--disk-cache-limit.", "gauge", st.Limit)
	}
	if m.cache != nil {
		st := m.cache()
		count("augloader_shard_cache_bytes", "Bytes of decoded pages (record batches) and their NodeSam indexes held (--cache-limit).", "gauge", st.Used)
		count("augloader_shard_cache_limit_bytes", "The shard cache's limit (--cache-limit).", "gauge", st.Limit)
		count("augloader_shard_cache_peak_bytes", "The most the shard cache held, pages pinned past the limit included.", "gauge", st.Peak)
		count("augloader_shard_cache_resident_pages", "Pages (record batches) decoded and held.", "gauge", int64(st.Resident))
		count("augloader_shard_cache_loads_total", "Pages read by offset, checked and decoded (a load after an eviction counts again).", "counter", st.Loads)
		count("augloader_shard_cache_evictions_total", "Pages dropped to stay within the limit.", "counter", st.Evictions)
		count("augloader_shard_cache_prefetches_total", "Pages read ahead of the batches that need them.", "counter", st.Prefetches)
		count("augloader_shard_cache_sheds_total", "Times the NodeSam indexes charged to a page were dropped with the page kept, to make room for pages.", "counter", st.Sheds)
		count("augloader_shard_cache_compactions_total", "Pages shrunk to the graphs a stream still needs, to make room without dropping one.", "counter", st.Compactions)
		count("augloader_shard_cache_trims_total", "Pages shrunk by the graphs needed last, instead of dropped whole (counted in compactions too).", "counter", st.Trims)
		count("augloader_shard_cache_private_pages", "Pages read again whole, privately, for a graph compacted away from a page others pin (counted in the bytes held).", "gauge", int64(st.Private))
		count("augloader_shard_cache_future_bytes", "Bytes of the streams' page and graph futures (4 a graph), counted in the bytes held.", "gauge", st.Futures)
		count("augloader_shard_cache_scans_total", "Shard files read through to check them and index their pages (once each).", "counter", st.Scans)
	}
	codes := make([]string, 0, len(m.rejected))
	for c := range m.rejected {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	fmt.Fprintf(w, "# HELP augloader_server_rejected_total Requests refused, by error code.\n# TYPE augloader_server_rejected_total counter\n")
	for _, c := range codes {
		fmt.Fprintf(w, "augloader_server_rejected_total{code=%q} %d\n", c, m.rejected[c])
	}
	m.mu.Unlock()
}

// MetricsHandler serves GET /metrics, and the probes Kubernetes and
// launchers ask: GET /livez (200 while the process answers) and GET
// /readyz (200 once every listener serves, 503 before that and once a
// shutdown has begun: a draining daemon takes no new trainer). ready
// may be nil (never ready).
func MetricsHandler(m *Metrics, ready func() (bool, string)) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		m.WriteText(w)
	})
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		ok, why := false, "starting"
		if ready != nil {
			ok, why = ready()
		}
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready:", why)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}

// ListenMetrics binds the metrics endpoint; like Flight, loopback only
// unless allowRemote.
func ListenMetrics(addr string, allowRemote bool) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("server: --metrics %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); !allowRemote && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("server: --metrics %s is not a loopback address", addr)
	}
	return net.Listen("tcp", addr)
}

// Probes is the metrics endpoint opened before the daemon's source loads:
// a daemon that opens its shards from object storage for minutes is alive
// (/livez 200) and not ready (/readyz 503 "starting") all that while, so a
// liveness probe does not restart it and a readiness probe holds the
// trainer back. Run takes it over (DaemonOptions.Probes): "ready" once
// every listener serves, "draining" once a shutdown begins.
type Probes struct {
	ln    net.Listener
	srv   *http.Server
	state atomic.Value // string: starting, ready, draining
	done  chan struct{}
}

// ListenProbes binds addr (loopback unless allowRemote) and serves m's
// counters and the probes there, "starting" until Run says otherwise.
func ListenProbes(addr string, allowRemote bool, m *Metrics) (*Probes, error) {
	ln, err := ListenMetrics(addr, allowRemote)
	if err != nil {
		return nil, err
	}
	p := &Probes{ln: ln, done: make(chan struct{})}
	p.state.Store("starting")
	p.srv = &http.Server{Handler: MetricsHandler(m, p.readiness), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(p.done)
		p.srv.Serve(ln) // returns once Close is called, or the listener fails
	}()
	return p, nil
}

func (p *Probes) readiness() (bool, string) {
	s := p.state.Load().(string)
	return s == "ready", s
}

// set moves /readyz to state.
func (p *Probes) set(state string) { p.state.Store(state) }

// URL is the counters' address, http://HOST:PORT/metrics.
func (p *Probes) URL() string { return "http://" + p.ln.Addr().String() + "/metrics" }

// Close stops serving (idempotent).
func (p *Probes) Close() error {
	err := p.srv.Close()
	<-p.done
	return err
}

package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sys/unix"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/server"
	"github.com/augloader/augloader/wire"
)

// shmClient is a shared-memory client as docs/protocol.md describes it: a
// memfd ring, mapped, passed with the request.
type shmClient struct {
	fd   int
	ring []byte
}

func newShmClient(t *testing.T, size int) *shmClient {
	t.Helper()
	fd := server.Memfd(t, int64(size), unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	ring, err := unix.Mmap(fd, 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	c := &shmClient{fd: fd, ring: ring}
	t.Cleanup(func() { unix.Munmap(ring) })
	return c
}

// sendRequest sends req's frame with fds attached to its bytes.
func sendRequest(t *testing.T, sock string, req any, fds ...int) *net.UnixConn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var frame bytes.Buffer
	if err := wire.WriteFrame(&frame, wire.MagicRequest, wire.StatusOK, req); err != nil {
		t.Fatal(err)
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	uc := c.(*net.UnixConn)
	if _, _, err := uc.WriteMsgUnix(frame.Bytes(), oob, nil); err != nil {
		t.Fatal(err)
	}
	return uc
}

// shmStats counts how a stream's messages came: inline, and into the
// ring at a lower offset than the one before (a wrap).
type shmStats struct{ inline, wraps int }

// conversation reads a shared-memory stream and returns it as the socket
// would have carried it (response frame, Arrow IPC stream, trailer frame).
// hold keeps every ring message (releasing none); otherwise each is
// released once copied out.
func (c *shmClient) conversation(t *testing.T, sock string, req wire.Request, hold bool) ([]byte, shmStats) {
	return c.slowConversation(t, sock, req, hold, 0)
}

// slowConversation is conversation with a pause after each ring message
// (a trainer's step).
func (c *shmClient) slowConversation(t *testing.T, sock string, req wire.Request, hold bool, pause time.Duration) ([]byte, shmStats) {
	t.Helper()
	req.Shm = true
	conn := sendRequest(t, sock, req, c.fd)
	r := bufio.NewReader(conn)
	var out bytes.Buffer
	tee := io.TeeReader(r, &out)
	status, body, err := wire.ReadFrame(tee, wire.MagicResponse)
	if err != nil || status != wire.StatusOK {
		t.Fatalf("response: status %d, %s, %v", status, body, err)
	}
	var st shmStats
	last := uint64(0)
	for seq := uint64(0); ; {
		var d [wire.ShmDescriptorSize]byte
		if _, err := io.ReadFull(r, d[:]); err != nil {
			t.Fatalf("descriptor: %v", err)
		}
		desc, err := wire.ParseShmDescriptor(d[:], uint64(len(c.ring)))
		if err != nil {
			t.Fatal(err)
		}
		start := out.Len()
		if desc.Kind == wire.ShmInline {
			st.inline++
			if _, err := io.CopyN(&out, r, int64(desc.Length)); err != nil {
				t.Fatal(err)
			}
		} else {
			out.Write(c.ring[desc.Offset : desc.Offset+uint64(desc.Length)])
			if desc.Offset < last {
				st.wraps++
			}
			last = desc.Offset
			time.Sleep(pause)
			recs := []uint64{wire.ShmRead | (seq + 1)}
			if !hold {
				recs = append(recs, seq)
			}
			binary.Write(conn, binary.LittleEndian, recs)
			seq++
		}
		if desc.Length == 8 && bytes.Equal(out.Bytes()[start:], []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}) {
			break
		}
	}
	if _, _, err := wire.ReadFrame(tee, wire.MagicTrailer); err != nil {
		t.Fatalf("trailer: %v", err)
	}
	if rest, _ := io.ReadAll(r); len(rest) != 0 {
		t.Fatalf("%d bytes after the trailer", len(rest))
	}
	return out.Bytes(), st
}

// Over shared memory the conversation carries the very bytes of the socket
// one (the golden file), stream after stream over the same ring, which the
// daemon maps once: with a ring that holds the whole stream, and a client
// that never releases (once it has read every ring message, the rest come
// inline).
func TestShmSameBytes(t *testing.T) {
	want, err := os.ReadFile(testutil.Testdata(t, "golden", "stream-tiny.bin"))
	if err != nil {
		t.Fatal(err)
	}
	m := server.NewMetrics()
	l := newLoaderSeed(t, testutil.Testdata(t, "golden", "tiny.shards"), policy, 2, 7)
	sock := serveWith(t, server.Options{Source: server.Live{L: l}, Metrics: m, Limits: server.Limits{Drain: time.Second}})
	for i, tc := range []struct {
		name string
		ring int
		hold bool
	}{
		{"releasing", 1 << 20, false},
		{"holding", wire.MinShmRing, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newShmClient(t, tc.ring)
			// Five streams over the one ring, as a training loop's
			// epochs: the daemon maps it once and keeps the mapping.
			for s := range 5 {
				got, st := c.conversation(t, sock, goldenRequest, tc.hold)
				if !bytes.Equal(got, want) {
					t.Fatalf("stream %d: shm conversation (%d bytes) differs from the socket's (%d)", s, len(got), len(want))
				}
				if st.inline != 0 {
					t.Errorf("stream %d: %d messages inline from a ring that holds the stream", s, st.inline)
				}
			}
			var text strings.Builder
			m.WriteText(&text)
			if want := fmt.Sprintf("\naugloader_server_shm_ring_maps_total %d\n", i+1); !strings.Contains(text.String(), want) {
				t.Fatalf("one more ring over five streams, back to back: want it mapped once (%q)\n%s", want, text.String())
			}
		})
	}
}

// A larger epoch through a ring of a fifth of it: messages wrap around the
// ring and reuse released space, however slow the client (the server waits
// for it); a client that releases nothing gets the rest inline; the bytes
// equal the socket's in every case.
func TestShmRingWraps(t *testing.T) {
	l := newLoader(t, fixture.SynthShards(t, "COLLAB", 60, 1), policy, 2)
	sock := serve(t, server.Live{L: l})
	req := wire.Request{Epoch: 3, Rank: 0, World: 1, BatchSize: 4}
	want := socketConversation(t, sock, req)
	ring := max(wire.MinShmRing, (len(want)/5+4095)&^4095)
	for _, tc := range []struct {
		name  string
		hold  bool
		pause time.Duration
	}{{"releasing", false, 0}, {"slow", false, 20 * time.Millisecond}, {"holding", true, 0}} {
		c := newShmClient(t, ring)
		got, st := c.slowConversation(t, sock, req, tc.hold, tc.pause)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: shm conversation (%d bytes) differs from the socket's (%d)", tc.name, len(got), len(want))
		}
		t.Logf("%s: %d bytes through a %d-byte ring: %+v", tc.name, len(got), ring, st)
		switch {
		case tc.hold && st.inline == 0:
			t.Errorf("%s: a client that releases nothing got nothing inline", tc.name)
		case !tc.hold && st.inline != 0:
			t.Errorf("%s: %d messages inline to a client that releases", tc.name, st.inline)
		case !tc.hold && st.wraps == 0:
			t.Errorf("%s: no message wrapped around the ring", tc.name)
		}
	}
}

// What a shared-memory request may pass is checked before anything is
// served: exactly one descriptor, a writable memfd of a sane size, and
// shm asked for; each fault is a bad_request naming it, never a crash.
func TestShmRefusals(t *testing.T) {
	l := newLoaderSeed(t, testutil.Testdata(t, "golden", "tiny.shards"), policy, 1, 7)
	sock := serve(t, server.Live{L: l})
	sealed := func(size int64) int { return server.Memfd(t, size, unix.F_SEAL_SHRINK) }
	reopen := func(fd, flags int) int {
		ro, err := unix.Open("/proc/self/fd/"+itoa(fd), flags|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(ro) })
		return ro
	}
	// A file on disk: the test's temporary folder, unless that is itself
	// in memory (then the case is left out).
	disk, err := os.Create(filepath.Join(t.TempDir(), "ring"))
	if err != nil {
		t.Fatal(err)
	}
	disk.Truncate(1 << 20)
	defer disk.Close()
	var fs unix.Statfs_t
	onDisk := unix.Fstatfs(int(disk.Fd()), &fs) == nil && fs.Type != unix.TMPFS_MAGIC
	shmReq := wire.Request{Epoch: 1, World: 1, Shm: true}
	for _, tc := range []struct {
		name string
		req  wire.Request
		fds  []int
		want string
	}{
		{"no descriptor", shmReq, nil, "exactly one file descriptor"},
		{"two descriptors", shmReq, []int{sealed(1 << 20), sealed(1 << 20)}, "exactly one file descriptor"},
		{"descriptor without shm", wire.Request{Epoch: 1, World: 1}, []int{sealed(1 << 20)}, "without shm"},
		{"a file on disk", shmReq, []int{int(disk.Fd())}, "not in memory"},
		{"a pipe", shmReq, []int{pipeFD(t)}, "not a regular file"},
		{"too small", shmReq, []int{sealed(4096)}, "4096 bytes"},
		{"too large", shmReq, []int{sealed(wire.MaxShmRing + 1)}, "bytes (want"},
		{"read-only", shmReq, []int{reopen(sealed(1<<20), unix.O_RDONLY)}, "not open for reading and writing"},
		{"not sealed", shmReq, []int{server.Memfd(t, 1<<20, 0)}, "not sealed against shrinking"},
		{"sealed against writing", shmReq, []int{server.Memfd(t, 1<<20, unix.F_SEAL_SHRINK|unix.F_SEAL_WRITE)}, "sealed against writing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "a file on disk" && !onDisk {
				t.Skip("the temporary folder is in memory")
			}
			conn := sendRequest(t, sock, tc.req, tc.fds...)
			status, body, err := wire.ReadFrame(conn, wire.MagicResponse)
			if err != nil {
				t.Fatal(err)
			}
			var e wire.Error
			json.Unmarshal(body, &e)
			if status != wire.StatusError || e.Code != wire.CodeBadRequest || !strings.Contains(e.Message, tc.want) {
				t.Fatalf("status %d, %+v; want bad_request naming %q", status, e, tc.want)
			}
		})
	}
	// The daemon still serves.
	c := newShmClient(t, 1<<20)
	if got, _ := c.conversation(t, sock, goldenRequest, false); len(got) == 0 {
		t.Fatal("no stream after the refusals")
	}
}

func pipeFD(t *testing.T) int {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	return p[1]
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// The Go client over shared memory (client.Options.ShmRing) reads the
// socket's stream: the same digests, batch by batch, through a ring that
// holds the epoch and through one that holds two batches; batches kept
// past the callback stay intact.
func TestShmGoClient(t *testing.T) {
	l := newLoader(t, fixture.SynthShards(t, "COLLAB", 60, 1), policy, 2)
	sock := serve(t, server.Live{L: l})
	req := wire.Request{Epoch: 2, Rank: 1, World: 2, BatchSize: 4}
	want := fetch(t, sock, req, nil)
	for _, ring := range []int{32 << 20, wire.MinShmRing * 8} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		got, err := client.Fetch(context.Background(), sock, req, client.Options{Mem: mem, Digests: true, ShmRing: ring}, nil)
		if err != nil {
			t.Fatalf("ring %d: %v", ring, err)
		}
		mem.AssertSize(t, 0)
		if got.Digest != want.Digest || !slices.Equal(got.BatchDigests, want.BatchDigests) || got.Bytes != want.Bytes || got.Graphs != want.Graphs {
			t.Fatalf("ring %d: %d batches, %d bytes, digest %x; the socket's %d, %d, %x", ring, got.Batches, got.Bytes, got.Digest[:4],
				want.Batches, want.Bytes, want.Digest[:4])
		}
	}
	// Batches kept past the callback stay intact while the server goes on
	// through a ring that holds two of them.
	keep := func(ring int) []arrow.RecordBatch {
		var kept []arrow.RecordBatch
		if _, err := client.Fetch(context.Background(), sock, req, client.Options{ShmRing: ring}, func(rec arrow.RecordBatch) error {
			rec.Retain()
			kept = append(kept, rec)
			return nil
		}); err != nil {
			t.Fatalf("ring %d: %v", ring, err)
		}
		return kept
	}
	socketKept, shmKept := keep(0), keep(wire.MinShmRing*8)
	if len(socketKept) != len(shmKept) || len(shmKept) != want.Batches {
		t.Fatalf("kept %d and %d batches of %d", len(socketKept), len(shmKept), want.Batches)
	}
	for i := range shmKept {
		if !array.RecordEqual(socketKept[i], shmKept[i]) {
			t.Fatalf("kept batch %d changed in the ring", i)
		}
		socketKept[i].Release()
		shmKept[i].Release()
	}
	if _, err := client.Fetch(context.Background(), sock, req, client.Options{ShmRing: 100}, nil); err == nil || !strings.Contains(err.Error(), "shm ring of 100 bytes") {
		t.Fatalf("a 100-byte ring: %v", err)
	}
}

// A connection that sends part of a request and then nothing is refused
// when its request time is up (the request is read with ReadMsgUnix, whose
// error return must not reach bufio as a negative count), and the daemon
// goes on serving.
func TestRequestTimeoutWhileReadingDescriptors(t *testing.T) {
	l := newLoaderSeed(t, testutil.Testdata(t, "golden", "tiny.shards"), policy, 1, 7)
	sock := serveWith(t, server.Options{Source: server.Live{L: l}, Limits: server.Limits{Drain: time.Second, RequestTimeout: 100 * time.Millisecond}})
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(wire.MagicRequest[:])
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	status, body, err := wire.ReadFrame(c, wire.MagicResponse)
	if err != nil || status != wire.StatusError || !strings.Contains(string(body), wire.CodeBadRequest) {
		t.Fatalf("status %d, %s, %v; want bad_request", status, body, err)
	}
	shm := newShmClient(t, 1<<20)
	if got, _ := shm.conversation(t, sock, goldenRequest, false); len(got) == 0 {
		t.Fatal("no stream after the timeout")
	}
}

// A batch's edge columns are written by the workers straight into the
// client's ring (loader.EdgeLender) and the batch's message is placed
// around them: the conversation is still the socket's, byte for byte, for
// every policy (NodeSam writes its edges fused, the others through
// aug.Coalesced.Append), at one worker and at four, twins included, and
// the daemon counts the batches so sent (every one, through a ring that
// holds the stream); a set with edge features (whose
// collation reads the sources as it goes) is copied as before, and is the
// same bytes too.
func TestShmLentEdges(t *testing.T) {
	collab := fixture.SynthShards(t, "COLLAB", 60, 1)
	mol := testutil.Testdata(t, "golden", "tinymol.shards")
	for _, tc := range []struct {
		name, dir, policy string
		workers           int
		twins             bool
		lent              bool
	}{
		{"nodesam", collab, "nodesam", 1, false, true},
		{"nodesam-4-workers", collab, "nodesam", 4, false, true},
		{"mixed", collab, policy, 2, false, true},
		{"submix", collab, "submix", 2, false, true},
		{"dropedge-subgraph", collab, "dropedge:ratio=0.2:0.5,subgraph:ratio=0.3:0.5", 2, false, true},
		{"twins", collab, "nodesam", 2, true, true},
		{"edge-features", mol, "nodesam", 2, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := loader.Config{Seed: 5, Workers: tc.workers, BatchSize: 8}
			if tc.twins {
				cfg.Twins = fixture.Twins(t, "nodesam / dropedge:ratio=0.2", "submix / nodesam")
			}
			l := fixture.Loader(t, tc.dir, nil, tc.policy, cfg)
			m := server.NewMetrics()
			sock := serveWith(t, server.Options{Source: server.Live{L: l}, Metrics: m, Limits: server.Limits{Drain: time.Second}})
			req := wire.Request{Epoch: 2, Rank: 0, World: 1, BatchSize: 8, Digest: true}
			if tc.twins {
				req.Twins = 2
			}
			want := socketConversation(t, sock, req)
			socketBatches := metricValue(t, m, "augloader_server_batches_total")
			c := newShmClient(t, 32<<20)
			for epoch := range 2 { // the second stream reuses the ring's mapping
				got, st := c.conversation(t, sock, req, false)
				if !bytes.Equal(got, want) {
					t.Fatalf("stream %d: shm conversation (%d bytes) differs from the socket's (%d)", epoch, len(got), len(want))
				}
				if st.inline != 0 {
					t.Fatalf("stream %d: %d messages inline from a ring that holds the stream", epoch, st.inline)
				}
			}
			lent := metricValue(t, m, "augloader_server_shm_lent_batches_total")
			batches := metricValue(t, m, "augloader_server_batches_total") - socketBatches
			// A ring that holds the stream lends to every batch.
			if tc.lent && lent != batches || !tc.lent && lent != 0 {
				t.Fatalf("%d of %d batches sent around lent edges (lent wanted: %v)", lent, batches, tc.lent)
			}
		})
	}
}

// socketConversation is the whole conversation of req over the plain
// socket (response frame, Arrow IPC stream, trailer frame), as read.
func socketConversation(t *testing.T, sock string, req wire.Request) []byte {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := wire.WriteFrame(conn, wire.MagicRequest, wire.StatusOK, req); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// metricValue is the value of an unlabelled metric on m's /metrics page.
func metricValue(t *testing.T, m *server.Metrics, name string) int64 {
	t.Helper()
	var text strings.Builder
	m.WriteText(&text)
	for _, line := range strings.Split(text.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var n int64
			if _, err := fmt.Sscan(v, &n); err != nil {
				t.Fatalf("%s: %q", name, line)
			}
			return n
		}
	}
	t.Fatalf("no %s in the metrics", name)
	return 0
}

package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/materialize"
	"github.com/augloader/augloader/server"
	"github.com/augloader/augloader/wire"
)

func TestMain(m *testing.M) { fixture.Main(m) }

const policy = "nodesam:0.4,submix:p=0.4:0.4,none:0.2"

func newLoader(t testing.TB, dir, pol string, workers int) *loader.Loader {
	t.Helper()
	return newLoaderSeed(t, dir, pol, workers, 11)
}

func newLoaderSeed(t testing.TB, dir, pol string, workers int, seed uint64) *loader.Loader {
	t.Helper()
	return fixture.Loader(t, dir, nil, pol, loader.Config{Seed: seed, Workers: workers, BatchSize: 16})
}

// serve starts a server on a real socket in a temp folder.
func serve(t testing.TB, src server.Source) string {
	t.Helper()
	return serveWith(t, server.Options{Source: src, Limits: server.Limits{Drain: time.Second}})
}

// serveWith starts a server with the given options; at cleanup it stops
// it and checks the socket file is gone.
func serveWith(t testing.TB, o server.Options) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	srv, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := server.Listen(sock, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket file left behind: %v", err)
		}
	})
	return sock
}

func fetch(t testing.TB, sock string, req wire.Request, fn func(arrow.RecordBatch) error) *client.Result {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	res, err := client.Fetch(context.Background(), sock, req, client.Options{Mem: mem, Digests: true}, fn)
	if err != nil {
		t.Fatalf("fetch %+v: %v", req, err)
	}
	mem.AssertSize(t, 0)
	return res
}

// rows decodes a batch into one canonical byte string per graph (local
// node ids), checking the PyG invariants on the way: edge_index symmetric
// and within the graph's ptr range, features on the graph's nodes.
func rows(t testing.TB, rec arrow.RecordBatch, out map[int64][]byte, padded map[int64]int) {
	t.Helper()
	col := func(name string) arrow.Array {
		idx := rec.Schema().FieldIndices(name)
		if len(idx) != 1 {
			t.Fatalf("no column %s", name)
		}
		return rec.Column(idx[0])
	}
	ids := col(wire.ColGraphID).(*array.Int64).Int64Values()
	nn := col(wire.ColNumNodes).(*array.Int32).Int32Values()
	src, dst := col(wire.ColEdgeSrc).(*array.List), col(wire.ColEdgeDst).(*array.List)
	sv, dv := src.ListValues().(*array.Int32).Int32Values(), dst.ListValues().(*array.Int32).Int32Values()
	xn, xc := col(wire.ColXNode).(*array.List), col(wire.ColXCode).(*array.List)
	xnv, xcv := xn.ListValues().(*array.Int32).Int32Values(), xc.ListValues().(*array.Int32).Int32Values()
	xwv := col(wire.ColXWeight).(*array.List).ListValues().(*array.Float32).Float32Values()
	y, ym := col(wire.ColY).(*array.Int32).Int32Values(), col(wire.ColYMix).(*array.Int32).Int32Values()
	yq := col(wire.ColYQ).(*array.Float32).Float32Values()
	pol, pad := col(wire.ColPolicy).(*array.String), col(wire.ColPadded).(*array.Boolean)
	base := int32(0)
	for r := range ids {
		var b bytes.Buffer
		lo, hi := src.Offsets()[r], src.Offsets()[r+1]
		set := map[[2]int32]bool{}
		for k := lo; k < hi; k++ {
			u, v := sv[k]-base, dv[k]-base
			if u < 0 || v < 0 || u >= nn[r] || v >= nn[r] || u == v {
				t.Fatalf("graph %d: edge (%d, %d) outside its %d nodes", ids[r], u, v, nn[r])
			}
			set[[2]int32{u, v}] = true
			if k > lo && (sv[k-1] > sv[k] || (sv[k-1] == sv[k] && dv[k-1] >= dv[k])) {
				t.Fatalf("graph %d: edge_index not coalesced at %d: (%d,%d) after (%d,%d)", ids[r], k, sv[k], dv[k], sv[k-1], dv[k-1])
			}
			binary.Write(&b, binary.LittleEndian, [2]int32{u, v})
		}
		for e := range set {
			if !set[[2]int32{e[1], e[0]}] {
				t.Fatalf("graph %d: edge %v without its reverse", ids[r], e)
			}
		}
		for k := xn.Offsets()[r]; k < xn.Offsets()[r+1]; k++ {
			if xnv[k] < base || xnv[k] >= base+nn[r] {
				t.Fatalf("graph %d: feature on node %d outside [%d, %d)", ids[r], xnv[k], base, base+nn[r])
			}
			binary.Write(&b, binary.LittleEndian, []any{xnv[k] - base, xcv[k], xwv[k]})
		}
		fmt.Fprintf(&b, "|%d|%d|%d|%g|%s", nn[r], y[r], ym[r], yq[r], pol.Value(r))
		base += nn[r]
		if pad.Value(r) {
			padded[ids[r]]++
			if prev, ok := out[ids[r]]; ok && !bytes.Equal(prev, b.Bytes()) {
				t.Fatalf("padded copy of graph %d differs", ids[r])
			}
			continue
		}
		if _, dup := out[ids[r]]; dup {
			t.Fatalf("graph %d served twice", ids[r])
		}
		out[ids[r]] = b.Bytes()
	}
}

func TestRankUnion(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	sock := serve(t, server.Live{L: newLoader(t, dir, policy, 2)})
	var ref map[int64][]byte
	for _, world := range []int{1, 2, 3, 7} {
		got := map[int64][]byte{}
		padded := map[int64]int{}
		for rank := range world {
			fetch(t, sock, wire.Request{Epoch: 5, Rank: rank, World: world}, func(rec arrow.RecordBatch) error {
				rows(t, rec, got, padded)
				return nil
			})
		}
		if len(got) != 60 {
			t.Fatalf("world %d: union holds %d graphs, want 60", world, len(got))
		}
		if want := (world - 60%world) % world; len(padded) != want {
			t.Fatalf("world %d: %d padded entries, want %d", world, len(padded), want)
		}
		if ref == nil {
			ref = got
			continue
		}
		for id, b := range got {
			if !bytes.Equal(b, ref[id]) {
				t.Fatalf("world %d: graph %d augmented differently than with world 1", world, id)
			}
		}
	}
}

func TestReplayEqualsLive(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	l := newLoader(t, dir, policy, 2)
	out := t.TempDir()
	if err := materialize.Run(context.Background(), materialize.Options{Loader: l, Out: out,
		From: 0, To: 3, World: 2}); err != nil {
		t.Fatal(err)
	}
	if checked, inc, errs := materialize.Verify(context.Background(), out); len(errs) > 0 || len(checked) != 3 || len(inc) != 0 {
		t.Fatalf("verify: %v %v %v", checked, inc, errs)
	}
	rp, err := server.OpenReplay(out)
	if err != nil {
		t.Fatal(err)
	}
	live, replay := serve(t, server.Live{L: l}), serve(t, rp)
	for e := range uint64(3) {
		for rank := range 2 {
			for _, start := range []int{0, 2} {
				req := wire.Request{Epoch: e, Rank: rank, World: 2, StartBatch: start}
				a, b := fetch(t, live, req, nil), fetch(t, replay, req, nil)
				if a.Digest != b.Digest || a.Bytes != b.Bytes {
					t.Fatalf("%+v: replay (%d bytes) differs from live (%d bytes)", req, b.Bytes, a.Bytes)
				}
				// Replayed over shared memory: the same bytes.
				c, err := client.Fetch(context.Background(), replay, req, client.Options{Digests: true, ShmRing: 1 << 20}, nil)
				if err != nil || c.Digest != a.Digest {
					t.Fatalf("%+v: replay over shared memory differs from live: %v", req, err)
				}
			}
		}
	}
	// A rerun skips complete epochs and leaves the bytes alone.
	before, _ := os.ReadFile(filepath.Join(out, materialize.EpochDir(1), materialize.FileName(0, 2)))
	if err := materialize.Run(context.Background(), materialize.Options{Loader: l, Out: out,
		From: 0, To: 4, World: 2}); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(out, materialize.EpochDir(1), materialize.FileName(0, 2)))
	if !bytes.Equal(before, after) {
		t.Fatal("rerun rewrote a complete epoch")
	}
	// Out-of-range replay requests are readable errors.
	_, err = client.Fetch(context.Background(), replay, wire.Request{Epoch: 9, World: 2}, client.Options{}, nil)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeOutOfRange {
		t.Fatalf("epoch 9 from replay: %v", err)
	}
}

func TestMalformedRequests(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	sock := serve(t, server.Live{L: newLoader(t, dir, policy, 2)})
	raw := func(payload []byte) *wire.Error {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(payload)
		if uc, ok := c.(*net.UnixConn); ok {
			uc.CloseWrite()
		}
		status, body, err := wire.ReadFrame(c, wire.MagicResponse)
		if err != nil || status != wire.StatusError {
			t.Fatalf("payload %q: status %d err %v", payload, status, err)
		}
		var e wire.Error
		if err := jsonUnmarshal(body, &e); err != nil {
			t.Fatal(err)
		}
		return &e
	}
	frame := func(body string) []byte {
		var b bytes.Buffer
		wire.WriteFrame(&b, wire.MagicRequest, 0, jsonRaw(body))
		return b.Bytes()
	}
	cases := []struct {
		name    string
		payload []byte
		code    string
	}{
		{"garbage", []byte("GET / HTTP/1.1\r\n\r\n"), wire.CodeBadRequest},
		{"truncated", []byte("AUGQ\x01"), wire.CodeBadRequest},
		{"huge length", append([]byte("AUGQ\x01\x00\x00\x00"), 0xff, 0xff, 0xff, 0x7f), wire.CodeBadRequest},
		{"bad json", frame(`{"epoch": "x"}`), wire.CodeBadRequest},
		{"unknown field", frame(`{"epoch": 1, "path": "/etc/passwd"}`), wire.CodeBadRequest},
		{"negative rank", frame(`{"epoch": 1, "rank": -1, "world": 1}`), wire.CodeBadRequest},
		{"rank beyond world", frame(`{"epoch": 1, "rank": 2, "world": 2}`), wire.CodeOutOfRange},
		{"world beyond graphs", frame(`{"epoch": 1, "rank": 0, "world": 61}`), wire.CodeOutOfRange},
		{"batch too large", frame(`{"epoch": 1, "rank": 0, "world": 1, "batch_size": 100000000}`), wire.CodeOutOfRange},
		{"start beyond end", frame(`{"epoch": 1, "rank": 0, "world": 1, "start_batch": 99}`), wire.CodeOutOfRange},
		// Required fields (served as epoch 0 of a world of 1 before).
		{"empty object", frame(`{}`), wire.CodeBadRequest},
		{"null", frame(`null`), wire.CodeBadRequest},
		{"no world", frame(`{"epoch": 1, "rank": 0}`), wire.CodeBadRequest},
		{"world 0", frame(`{"epoch": 1, "rank": 0, "world": 0}`), wire.CodeBadRequest},
		// A view or fold a daemon without views does not have (ignored before).
		{"view of a viewless daemon", frame(`{"epoch": 1, "rank": 0, "world": 1, "view": "train"}`), wire.CodeOutOfRange},
		{"fold of a viewless daemon", frame(`{"epoch": 1, "rank": 0, "world": 1, "fold": 2}`), wire.CodeOutOfRange},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if e := raw(c.payload); e.Code != c.code || e.Message == "" {
				t.Fatalf("error %+v, want code %s", e, c.code)
			}
		})
	}
	// The server still serves after all that.
	fetch(t, sock, wire.Request{Epoch: 1, World: 1}, nil)
}

func openFDs() int {
	entries, _ := os.ReadDir("/proc/self/fd")
	return len(entries)
}

// A client that disconnects mid-stream: others keep being served, and no
// goroutine or file descriptor leaks.
func TestClientDisconnect(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	sock := serve(t, server.Live{L: newLoader(t, dir, policy, 2)})
	fetch(t, sock, wire.Request{Epoch: 0, World: 1, BatchSize: 1}, nil) // warm up
	time.Sleep(50 * time.Millisecond)
	g0, fd0 := runtime.NumGoroutine(), openFDs()
	for i := range 20 {
		stop := errors.New("stop")
		_, err := client.Fetch(context.Background(), sock, wire.Request{Epoch: uint64(i), World: 1, BatchSize: 1}, client.Options{},
			func(arrow.RecordBatch) error { return stop })
		if !errors.Is(err, stop) {
			t.Fatalf("early stop: %v", err)
		}
		fetch(t, sock, wire.Request{Epoch: uint64(i), World: 2, Rank: 1}, nil)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && (runtime.NumGoroutine() > g0 || openFDs() > fd0) {
		time.Sleep(20 * time.Millisecond)
	}
	if g, fd := runtime.NumGoroutine(), openFDs(); g > g0 || fd > fd0 {
		t.Fatalf("after 20 abandoned streams: goroutines %d (was %d), fds %d (was %d)", g, g0, fd, fd0)
	}
}

func TestSocketSafety(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "file")
	os.WriteFile(regular, []byte("keep me"), 0o644)
	if _, err := server.Listen(regular, 0o600); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("regular file: %v", err)
	}
	if b, _ := os.ReadFile(regular); string(b) != "keep me" {
		t.Fatal("regular file clobbered")
	}
	link := filepath.Join(dir, "link")
	os.Symlink(regular, link)
	if _, err := server.Listen(link, 0o600); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("symlink: %v", err)
	}
	sock := filepath.Join(dir, "s.sock")
	ln, err := server.Listen(sock, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Lstat(sock)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v", fi.Mode().Perm())
	}
	if _, err := server.Listen(sock, 0o600); err == nil || !strings.Contains(err.Error(), "another server") {
		t.Fatalf("live socket: %v", err)
	}
	// A server that goes away while the next one starts (a killed
	// daemon's threads still exiting, its socket still answering) is
	// waited for, not taken for a live one: the next start succeeded
	// only by luck when its main thread was already a zombie.
	go func() {
		time.Sleep(300 * time.Millisecond)
		ln.SetUnlinkOnClose(false)
		ln.Close()
	}()
	ln2, err := server.Listen(sock, 0o600)
	if err != nil {
		t.Fatalf("a socket whose server went away 0.3 s later: %v", err)
	}
	// A stale socket (no listener) is replaced.
	ln2.SetUnlinkOnClose(false)
	ln2.Close()
	ln3, err := server.Listen(sock, 0o600)
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	ln3.Close()
}

// The socket's path appears only once it listens: a client that waits
// for the file and connects at once is never refused (the file a bind
// makes came before its listen, and a test that waited so failed in
// 0.04 s on a loaded machine).
func TestSocketAppearsListening(t *testing.T) {
	dir := t.TempDir()
	for i := range 300 {
		sock := filepath.Join(dir, fmt.Sprintf("s%d.sock", i))
		made := make(chan interface{ Close() error }, 1)
		go func() {
			ln, err := server.Listen(sock, 0o600)
			if err != nil {
				t.Error(err)
			}
			made <- ln
		}()
		for {
			if _, err := os.Lstat(sock); err == nil {
				break
			}
			runtime.Gosched()
		}
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatalf("try %d: the socket file was there and refused a connection: %v", i, err)
		}
		c.Close()
		ln := <-made
		if fi, err := os.Lstat(sock); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("the socket's mode: %v %v", fi, err)
		}
		ln.Close()
		if _, err := os.Lstat(sock); err == nil {
			t.Fatal("Close left the socket file")
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".augsock-*")); len(left) > 0 {
		t.Fatalf("temporary names left: %v", left)
	}
}

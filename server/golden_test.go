package server_test

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/server"
	"github.com/augloader/augloader/wire"
)

// goldenRequest is the request behind testdata/golden/stream-tiny.bin.
var goldenRequest = wire.Request{Epoch: 1, Rank: 0, World: 1, BatchSize: 2}

// The whole socket conversation for one request on the tiny fixture
// (response frame, Arrow IPC stream, trailer) is pinned byte for byte in
// testdata/golden/stream-tiny.bin; the Python client's tests parse the
// same file (clients/python/tests/test_wire.py). Any change to the
// protocol, the batch layout or an augmentation shows here.
func TestGoldenStream(t *testing.T) {
	l := newLoaderSeed(t, testutil.Testdata(t, "golden", "tiny.shards"), policy, 2, 7)
	sock := serve(t, server.Live{L: l})
	got := socketConversation(t, sock, goldenRequest)
	path := testutil.Testdata(t, "golden", "stream-tiny.bin")
	testutil.Golden(t, path, got)

	// The Go client reads the file as it reads a socket.
	want, _ := os.ReadFile(path)
	res, err := client.Read(bytes.NewReader(want), client.Options{Digests: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Batches != 2 || res.Graphs != 3 || res.Info.Dataset != "TINY" || res.Trailer.Batches != 2 {
		t.Fatalf("read %+v", res)
	}
	sock2 := serve(t, server.Live{L: l})
	live, err := client.Fetch(context.Background(), sock2, goldenRequest, client.Options{Digests: true}, nil)
	if err != nil || live.Digest != res.Digest {
		t.Fatalf("a live fetch differs from the golden file: %v", err)
	}
}

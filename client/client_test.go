package client_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/wire"
)

func golden(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(testutil.Testdata(t, "golden", "stream-tiny.bin"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Read takes a conversation as the server sends it: the golden one is
// complete, with per-batch digests summing to the stream's.
func TestReadGolden(t *testing.T) {
	res, err := client.Read(bytes.NewReader(golden(t)), client.Options{Digests: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Batches != 2 || res.Graphs != 3 || len(res.BatchDigests) != 2 || res.Trailer.Batches != 2 || res.Bytes == 0 {
		t.Fatalf("%+v", res)
	}
}

// A stream is complete only with a trailer of status 0 whose counts agree
// with the response: everything else is an error, never a short epoch
// taken for a whole one.
func TestReadIncomplete(t *testing.T) {
	g := golden(t)
	respLen := wire.HeaderSize + int(binary.LittleEndian.Uint32(g[8:12]))
	trailerAt := bytes.LastIndex(g, wire.MagicTrailer[:])
	var cut, cutTrailer bytes.Buffer
	cut.Write(g[:trailerAt-40]) // inside the last batch
	cutTrailer.Write(g[:trailerAt])
	var lying bytes.Buffer
	lying.Write(g[:trailerAt])
	wire.WriteFrame(&lying, wire.MagicTrailer, wire.StatusOK, wire.Trailer{Batches: 3, Graphs: 3})
	var failed bytes.Buffer
	failed.Write(g[:trailerAt])
	wire.WriteFrame(&failed, wire.MagicTrailer, wire.StatusError, wire.Trailer{Batches: 2, Graphs: 3, Code: wire.CodeUnavailable, Message: "server shutting down"})
	var refused bytes.Buffer
	wire.WriteFrame(&refused, wire.MagicResponse, wire.StatusError, wire.Error{Code: wire.CodeOutOfRange, Message: "epoch 9"})

	for name, in := range map[string][]byte{
		"cut inside a batch":       cut.Bytes(),
		"no trailer":               cutTrailer.Bytes(),
		"trailer counts differ":    lying.Bytes(),
		"trailer says cut":         failed.Bytes(),
		"refused":                  refused.Bytes(),
		"response only":            g[:respLen],
		"nothing":                  nil,
		"another protocol's bytes": []byte("HTTP/1.1 200 OK\r\n\r\n"),
	} {
		_, err := client.Read(bytes.NewReader(in), client.Options{}, nil)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		var we *wire.Error
		switch name {
		case "trailer says cut", "refused":
			if !errors.As(err, &we) {
				t.Errorf("%s: %v, want a *wire.Error", name, err)
			}
		}
	}
}

package server_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/augloader/augloader/client"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/server"
	"github.com/augloader/augloader/wire"
)

// runDaemon runs server.Run with Flight on a loopback port and returns the
// endpoints it listens on.
func runDaemon(t *testing.T, o server.DaemonOptions) server.Endpoints {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	ready, done := make(chan server.Endpoints, 1), make(chan error, 1)
	o.Ready = func(ep server.Endpoints) { ready <- ep }
	if o.Limits.Drain == 0 {
		o.Limits.Drain = 100 * time.Millisecond
	}
	go func() { done <- o.Run(ctx) }()
	select {
	case ep := <-ready:
		t.Cleanup(func() { stop(); <-done })
		return ep
	case err := <-done:
		stop()
		t.Fatal(err)
	}
	return server.Endpoints{}
}

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their paths and a pool trusting it.
func selfSigned(t *testing.T) (cert, key string, pool *x509.CertPool) {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "augloader test"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(k)
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	pool = x509.NewCertPool()
	c, _ := x509.ParseCertificate(der)
	pool.AddCert(c)
	return cert, key, pool
}

// Flight over TLS: a client trusting the certificate reads the same bytes
// as over the socket; one that does not is refused.
func TestFlightTLS(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	cert, key, pool := selfSigned(t)
	tlsCfg, err := server.LoadTLS(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	src := server.Live{L: newLoader(t, dir, policy, 2)}
	ep := runDaemon(t, server.DaemonOptions{Source: src, Socket: filepath.Join(t.TempDir(), "s.sock"),
		Flight: server.FlightOptions{Address: "grpc+tls://127.0.0.1:0", TLS: tlsCfg}})
	if !strings.HasPrefix(ep.Flight, "grpc+tls://127.0.0.1:") {
		t.Fatalf("endpoint %q", ep.Flight)
	}
	req := wire.Request{Epoch: 1, World: 1}
	viaTLS, err := client.FetchAddr(context.Background(), ep.Flight, req, client.Options{Digests: true, TLS: &tls.Config{RootCAs: pool}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	viaSock := fetch(t, ep.Socket, req, nil)
	if viaTLS.Digest != viaSock.Digest {
		t.Fatal("TLS Flight and socket bytes differ")
	}
	if _, err := client.FetchAddr(context.Background(), ep.Flight, req, client.Options{}, nil); err == nil {
		t.Fatal("a client without the certificate's root read over TLS")
	}
	if _, err := server.ListenFlight(server.FlightOptions{Address: "grpc://127.0.0.1:0", TLS: tlsCfg}); err == nil {
		t.Fatal("grpc:// with a certificate accepted (the scheme must say TLS)")
	}
}

// Wire compression re-encodes record batch bodies (zstd, lz4): fewer
// bytes, the same record batches, deterministic (two reads, one digest).
func TestFlightWireCompression(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	req := wire.Request{Epoch: 2, World: 1}
	var plain []arrow.RecordBatch
	base := runDaemon(t, server.DaemonOptions{Source: server.Live{L: newLoader(t, dir, policy, 2)},
		Flight: server.FlightOptions{Address: "grpc://127.0.0.1:0"}})
	ref, err := client.FetchAddr(context.Background(), base.Flight, req, client.Options{}, func(rec arrow.RecordBatch) error {
		rec.Retain()
		plain = append(plain, rec)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, codec := range []wire.Compression{wire.CompressZstd, wire.CompressLZ4} {
		ep := runDaemon(t, server.DaemonOptions{Source: server.Live{L: newLoader(t, dir, policy, 2)},
			Flight: server.FlightOptions{Address: "grpc://127.0.0.1:0", WireCompression: codec}})
		var digests [][32]byte
		for range 2 {
			i := 0
			res, err := client.FetchAddr(context.Background(), ep.Flight, req, client.Options{Digests: true}, func(rec arrow.RecordBatch) error {
				if !array.RecordEqual(rec, plain[i]) {
					t.Fatalf("%s: batch %d differs from the uncompressed one", codec, i)
				}
				i++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Bytes >= ref.Bytes {
				t.Fatalf("%s: %d bytes, uncompressed %d", codec, res.Bytes, ref.Bytes)
			}
			// Compressed bytes are another configuration to a client that
			// reads one epoch from several daemons (a mixed pool matched
			// neither daemon's digests).
			if c := res.Info.Config; c == nil || c.WireCompression != codec || c.ID == ref.Info.Config.ID || c.Check() != nil {
				t.Fatalf("%s: identity %+v, the uncompressed one %s", codec, c, ref.Info.Config.ID)
			}
			digests = append(digests, res.Digest)
			t.Logf("%s: %d bytes on the wire, %.0f%% of %d", codec, res.Bytes, 100*float64(res.Bytes)/float64(ref.Bytes), ref.Bytes)
		}
		if digests[0] != digests[1] {
			t.Fatalf("%s: two reads of one request differ", codec)
		}
		// Either daemon may answer first: the refusal names the codecs in
		// the order the answers came.
		_, err := client.FetchMany(context.Background(), []string{base.Flight, ep.Flight}, req, client.Options{}, nil)
		if err == nil || !(strings.Contains(err.Error(), "wire compression none vs "+string(codec)) ||
			strings.Contains(err.Error(), "wire compression "+string(codec)+" vs none")) {
			t.Fatalf("a pool of an uncompressed and a %s daemon: %v", codec, err)
		}
	}
	for _, r := range plain {
		r.Release()
	}
}

// GetFlightInfo splits a request across --peers, one contiguous chunk each
// with the peer's location; followed in order the chunks are the request.
func TestFlightInfoPeers(t *testing.T) {
	dir := fixture.SynthShards(t, "COLLAB", 60, 1)
	peers := []string{"grpc://127.0.0.1:1", "grpc://127.0.0.1:2", "grpc://127.0.0.1:3"}
	ep := runDaemon(t, server.DaemonOptions{Source: server.Live{L: newLoader(t, dir, policy, 2)},
		Flight: server.FlightOptions{Address: "grpc://127.0.0.1:0", Peers: peers}})
	cl, err := flight.NewClientWithMiddleware(strings.TrimPrefix(ep.Flight, "grpc://"), nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := wire.Request{Epoch: 0, World: 1, BatchSize: 5} // 12 batches
	cmd, _ := json.Marshal(req)
	fi, err := cl.GetFlightInfo(context.Background(), &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd})
	if err != nil {
		t.Fatal(err)
	}
	if len(fi.Endpoint) != 3 || !fi.Ordered || fi.Schema == nil {
		t.Fatalf("info: %d endpoints, ordered %v, schema %v", len(fi.Endpoint), fi.Ordered, fi.Schema != nil)
	}
	full := fetch(t, serve(t, server.Live{L: newLoader(t, dir, policy, 2)}), req, nil).BatchDigests
	var got [][32]byte
	for i, e := range fi.Endpoint {
		if e.Location[0].Uri != strings.Replace(peers[i], "grpc://", "grpc+tcp://", 1) {
			t.Fatalf("endpoint %d at %s", i, e.Location[0].Uri)
		}
		var sub wire.Request
		json.Unmarshal(e.Ticket.Ticket, &sub)
		res, err := client.FetchAddr(context.Background(), ep.Flight, sub, client.Options{Digests: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, res.BatchDigests...)
	}
	if len(got) != len(full) || !bytes.Equal(flat(got), flat(full)) {
		t.Fatalf("the endpoints give %d batches, not the request's %d", len(got), len(full))
	}
}

func flat(ds [][32]byte) []byte {
	var b []byte
	for _, d := range ds {
		b = append(b, d[:]...)
	}
	return b
}

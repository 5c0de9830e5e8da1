package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/augloader/augloader/wire"
)

func TestRoundTrip(t *testing.T) {
	var b bytes.Buffer
	want := wire.Request{Epoch: 7, Rank: 1, World: 4, BatchSize: 32, StartBatch: 3,
		Resume: []wire.ResumePhase{{World: 2, Graphs: []int{5, 4}}}, Twins: 2, TwinWeights: []float64{0.5, 0, 2}}
	if err := wire.WriteFrame(&b, wire.MagicRequest, wire.StatusOK, want); err != nil {
		t.Fatal(err)
	}
	// Header layout: magic, version, status, reserved, length.
	if got := b.Bytes()[:8]; !bytes.Equal(got, []byte("AUGQ\x01\x00\x00\x00")) {
		t.Fatalf("header % x", got)
	}
	got, err := wire.ParseRequest(&b)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v, %v", got, err)
	}
}

func TestBadFrames(t *testing.T) {
	frame := func(magic string, version, status byte, body string) []byte {
		b := append([]byte(magic), version, status, 0, 0, byte(len(body)), 0, 0, 0)
		return append(b, body...)
	}
	cases := map[string][]byte{
		"empty":         nil,
		"wrong magic":   frame("HTTP", 1, 0, "{}"),
		"version 2":     frame("AUGQ", 2, 0, "{}"),
		"status 7":      frame("AUGQ", 1, 7, "{}"),
		"short body":    frame("AUGQ", 1, 0, "{}")[:13],
		"not json":      frame("AUGQ", 1, 0, "{x"),
		"unknown field": frame("AUGQ", 1, 0, `{"file":"/etc/passwd"}`),
		"trailing data": frame("AUGQ", 1, 0, `{} {}`),
		"negative":      frame("AUGQ", 1, 0, `{"epoch":0,"rank":-1,"world":1}`),
		// The required fields (served as epoch 0 of a world of 1 before).
		"empty object": frame("AUGQ", 1, 0, `{}`),
		"null":         frame("AUGQ", 1, 0, `null`),
		"no world":     frame("AUGQ", 1, 0, `{"epoch":3,"rank":0}`),
		"no epoch":     frame("AUGQ", 1, 0, `{"rank":0,"world":1}`),
		"null rank":    frame("AUGQ", 1, 0, `{"epoch":3,"rank":null,"world":1}`),
		"world 0":      frame("AUGQ", 1, 0, `{"epoch":3,"rank":0,"world":0}`),
		"an array":     frame("AUGQ", 1, 0, `[1,2]`),
		"too long":     append([]byte("AUGQ\x01\x00\x00\x00"), 0, 0, 0, 1),
		// Resume phases: a world without ranks, a count a rank short, a
		// negative count.
		"resume world 0":        frame("AUGQ", 1, 0, `{"epoch":3,"rank":0,"world":1,"resume":[{"world":0,"graphs":[]}]}`),
		"resume counts short":   frame("AUGQ", 1, 0, `{"epoch":3,"rank":0,"world":1,"resume":[{"world":2,"graphs":[4]}]}`),
		"resume negative":       frame("AUGQ", 1, 0, `{"epoch":3,"rank":0,"world":1,"resume":[{"world":1,"graphs":[-1]}]}`),
		"resume unknown field":  frame("AUGQ", 1, 0, `{"epoch":3,"rank":0,"world":1,"resume":[{"world":1,"graphs":[1],"x":1}]}`),
		"twins 1":               frame("AUGQ", 1, 0, `{"epoch":3,"rank":0,"world":1,"twins":1}`),
		"twins 5":               frame("AUGQ", 1, 0, `{"epoch":3,"rank":0,"world":1,"twins":5}`),
		"twins negative":        frame("AUGQ", 1, 0, `{"epoch":3,"rank":0,"world":1,"twins":-2}`),
		"weights without twins": frame("AUGQ", 1, 0, `{"epoch":3,"rank":0,"world":1,"twin_weights":[1]}`),
		"weights all zero":      frame("AUGQ", 1, 0, `{"epoch":3,"rank":0,"world":1,"twins":2,"twin_weights":[0,0]}`),
		"weight negative":       frame("AUGQ", 1, 0, `{"epoch":3,"rank":0,"world":1,"twins":2,"twin_weights":[1,-1]}`),
		"weight not a number":   frame("AUGQ", 1, 0, `{"epoch":3,"rank":0,"world":1,"twins":2,"twin_weights":["x"]}`),
		"weight huge":           frame("AUGQ", 1, 0, `{"epoch":3,"rank":0,"world":1,"twins":2,"twin_weights":[1e999]}`),
		// A null where a number goes (Go would read it as 0, issue #44).
		"resume null count": frame("AUGQ", 1, 0, `{"epoch":3,"rank":0,"world":1,"resume":[{"world":2,"graphs":[4,null]}]}`),
		"resume null world": frame("AUGQ", 1, 0, `{"epoch":3,"rank":0,"world":1,"resume":[{"world":null,"graphs":[]}]}`),
		"weight null":       frame("AUGQ", 1, 0, `{"epoch":3,"rank":0,"world":1,"twins":2,"twin_weights":[1,null]}`),
		"epoch 2^64":        frame("AUGQ", 1, 0, `{"epoch":18446744073709551616,"rank":0,"world":1}`),
		"count 2^63":        frame("AUGQ", 1, 0, `{"epoch":0,"rank":0,"world":1,"count":9223372036854775808}`),
	}
	for name, in := range cases {
		if _, err := wire.ParseRequest(bytes.NewReader(in)); !errors.Is(err, wire.ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", name, err)
		}
	}
}

func TestConfigDiffAndCheck(t *testing.T) {
	a := wire.Config{Dataset: "MUTAG", ShardsSHA256: "ab", Served: 188, ServedSHA256: "cd", Seed: 11,
		Schedule: "0..|nodesam:1", BatchSize: 32, Remainder: "pad"}.WithID()
	if err := a.Check(); err != nil {
		t.Fatal(err)
	}
	if d := a.Diff(a); len(d) != 0 {
		t.Fatalf("a config differs from itself: %v", d)
	}
	b := a
	b.Seed, b.BatchSize = 12, 64
	if err := b.Check(); err == nil {
		t.Fatal("an identity whose seed was edited without its id passed Check")
	}
	b = b.WithID()
	if d := a.Diff(b); len(d) != 2 || !strings.HasPrefix(d[0], "seed 11 vs 12") || !strings.HasPrefix(d[1], "batch size 32 vs 64") {
		t.Fatalf("diff %q", d)
	}
	// An uncompressed identity's JSON (and so its id) has no compression
	// key: the ids of every existing stream and materialized folder hold.
	c := a
	c.WireCompression = "lz4"
	c = c.WithID()
	if c.ID == a.ID || len(a.Diff(c)) != 1 || a.Diff(c)[0] != "wire compression none vs lz4" {
		t.Fatalf("compression: ids %s %s, diff %q", a.ID, c.ID, a.Diff(c))
	}
	j, _ := json.Marshal(a)
	if strings.Contains(string(j), "wire_compression") {
		t.Fatalf("uncompressed identity encodes %s", j)
	}
}

// FuzzParseRequest: never panics, never accepts a negative field, and what
// it accepts re-encodes to an equal request.
func FuzzParseRequest(f *testing.F) {
	var b bytes.Buffer
	wire.WriteFrame(&b, wire.MagicRequest, 0, wire.Request{Epoch: 1, World: 2})
	f.Add(b.Bytes())
	f.Add([]byte("AUGQ\x01\x00\x00\x00\x02\x00\x00\x00{}"))
	f.Add([]byte("AUGQ\x01\x00\x00\x00\xff\xff\xff\xff"))
	b.Reset()
	wire.WriteFrame(&b, wire.MagicRequest, 0, wire.Request{Epoch: 1, World: 3, Resume: []wire.ResumePhase{{World: 2, Graphs: []int{3, 2}}}})
	f.Add(b.Bytes())
	b.Reset()
	wire.WriteFrame(&b, wire.MagicRequest, 0, wire.Request{Epoch: 1, World: 1, Twins: 2, TwinWeights: []float64{1, 0.5}})
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, in []byte) {
		req, err := wire.ParseRequest(bytes.NewReader(in))
		if err != nil {
			return
		}
		if req.Rank < 0 || req.World < 1 || req.BatchSize < 0 || req.StartBatch < 0 || len(req.Resume) > wire.MaxResumePhases {
			t.Fatalf("accepted %+v", req)
		}
		if wire.CheckTwins(req.Twins, req.TwinWeights) != nil {
			t.Fatalf("accepted twins %d, weights %v", req.Twins, req.TwinWeights)
		}
		for _, ph := range req.Resume {
			if ph.World < 1 || len(ph.Graphs) != ph.World {
				t.Fatalf("accepted resume phase %+v", ph)
			}
		}
		var out bytes.Buffer
		if err := wire.WriteFrame(&out, wire.MagicRequest, 0, req); err != nil {
			t.Fatal(err)
		}
		again, err := wire.ParseRequest(&out)
		if err != nil || !reflect.DeepEqual(again, req) {
			t.Fatalf("re-encoded %+v: %+v, %v", req, again, err)
		}
	})
}

// A shared-memory descriptor either parses to one that lies inside the ring
// (and encodes back to the same bytes) or is refused as a protocol error.
func FuzzParseShmDescriptor(f *testing.F) {
	for _, d := range []wire.ShmDescriptor{{Kind: wire.ShmRing, Length: 8, Offset: 0}, {Kind: wire.ShmRing, Length: 4096, Offset: 61440},
		{Kind: wire.ShmInline, Length: 1 << 20}, {Kind: 3, Length: 8}, {Kind: wire.ShmRing, Length: 16, Offset: 1<<64 - 8}} {
		f.Add(wire.AppendShmDescriptor(nil, d), uint64(wire.MinShmRing))
	}
	f.Fuzz(func(t *testing.T, b []byte, ring uint64) {
		d, err := wire.ParseShmDescriptor(b, ring)
		if err != nil {
			if !errors.Is(err, wire.ErrProtocol) {
				t.Fatalf("error outside ErrProtocol: %v", err)
			}
			return
		}
		if d.Length < 8 || d.Kind == wire.ShmRing && d.Offset+uint64(d.Length) > ring || d.Kind == wire.ShmInline && d.Offset != 0 {
			t.Fatalf("accepted %+v in a ring of %d bytes", d, ring)
		}
		if !bytes.Equal(wire.AppendShmDescriptor(nil, d), b) {
			t.Fatalf("%+v does not encode back to %x", d, b)
		}
	})
}

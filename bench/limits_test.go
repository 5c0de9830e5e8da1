package bench

// The machine's own limits, measured in the same run as the epoch
// benchmarks so that a served epoch's bytes can be divided by them:
// memcpy bandwidth, and raw Unix-socket bandwidth (one writer goroutine,
// one reader, 1 MiB writes, as the server and client do).

import (
	"io"
	"net"
	"path/filepath"
	"testing"
)

func BenchmarkLimitMemcpy(b *testing.B) {
	const size = 256 << 20
	src, dst := make([]byte, size), make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		copy(dst, src)
	}
}

func BenchmarkLimitUnixSocket(b *testing.B) {
	const size = 256 << 20
	sock := filepath.Join(b.TempDir(), "raw.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		buf := make([]byte, 1<<20)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			for sent := 0; sent < size; sent += len(buf) {
				if _, err := c.Write(buf); err != nil {
					break
				}
			}
			c.Close()
		}
	}()
	buf := make([]byte, 1<<20)
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := net.Dial("unix", sock)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.CopyBuffer(io.Discard, c, buf)
		c.Close()
		if n != size {
			b.Fatalf("read %d bytes", n)
		}
	}
}

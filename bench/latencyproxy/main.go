// Command latencyproxy forwards HTTP to a target after a fixed delay per
// request: bench/s3.sh puts it before the loopback S3 server to stand for
// a remote store's round trip, and bench/peers/mosaic_s3.py reads its
// counts to learn what a peer fetched.
//
// GET /_latencyproxy/stats answers {"requests": N, "bytes": B}: the
// requests forwarded and the response body bytes sent back since start. No
// S3 bucket can be named "_latencyproxy" (bucket names start with a letter
// or digit), so the path never shadows an object.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"
)

const statsPath = "/_latencyproxy/stats"

// countingWriter counts the body bytes a response carries back.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(n))
	return n, err
}

// Flush keeps streamed bodies streaming through the reverse proxy.
func (w countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	target := flag.String("target", "", "URL to forward to (http://HOST:PORT)")
	delay := flag.Duration("delay", 20*time.Millisecond, "added before each request is forwarded")
	flag.Parse()
	u, err := url.Parse(*target)
	if err != nil || u.Host == "" {
		log.Fatalf("latencyproxy: -target %q: want http://HOST:PORT", *target)
	}
	var requests, bytes atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(u)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == statsPath {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]int64{"requests": requests.Load(), "bytes": bytes.Load()})
			return
		}
		time.Sleep(*delay)
		requests.Add(1)
		proxy.ServeHTTP(countingWriter{w, &bytes}, r)
	})
	log.Fatal(http.ListenAndServe(*listen, handler))
}

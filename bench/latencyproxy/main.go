// Command latencyproxy forwards HTTP to a target after a fixed delay per
// request: bench/s3.sh puts it before the loopback S3 server to stand for
// a remote store's round trip.
package main

import (
	"flag"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	target := flag.String("target", "", "URL to forward to (http://HOST:PORT)")
	delay := flag.Duration("delay", 20*time.Millisecond, "added before each request is forwarded")
	flag.Parse()
	u, err := url.Parse(*target)
	if err != nil || u.Host == "" {
		log.Fatalf("latencyproxy: -target %q: want http://HOST:PORT", *target)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(*delay)
		proxy.ServeHTTP(w, r)
	})
	log.Fatal(http.ListenAndServe(*listen, handler))
}

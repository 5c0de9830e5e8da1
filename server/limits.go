package server

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/augloader/augloader/wire"
)

// Limits bound what clients can hold, on both transports together: one
// count of streams, one per client, one count of connections.
type Limits struct {
	// MaxStreams caps concurrent streams (socket and Flight together);
	// default 256. Beyond it a request is refused as unavailable.
	MaxStreams int
	// MaxStreamsPerClient caps one client's concurrent streams; default
	// MaxStreams. A client is the peer's user id on Unix sockets (the
	// augloader socket and grpc+unix Flight), its IP address over TCP.
	MaxStreamsPerClient int
	// MaxPending caps connections that have not sent their request yet;
	// default 64. A new connection beyond it evicts the oldest waiting one
	// (refused as unavailable), so idle connections can never lock out a
	// client that sends its request at once.
	MaxPending int
	// MaxConnections caps Flight's connections; default MaxStreams +
	// MaxPending. Beyond it a connection is closed at once.
	MaxConnections int
	// RequestTimeout bounds reading a socket request; default 10 s.
	RequestTimeout time.Duration
	// Drain is how long shutdown lets running streams finish before it
	// cuts them; default 5 s.
	Drain time.Duration
}

// reserveFDs is what the process keeps for itself beyond the connections
// (listeners, shard and materialized files, the metrics endpoint).
const reserveFDs = 16

// EnsureDefaults returns l with every limit left at zero (or below) set
// to its default.
func (l Limits) EnsureDefaults() Limits {
	if l.MaxStreams <= 0 {
		l.MaxStreams = 256
	}
	if l.MaxStreamsPerClient <= 0 || l.MaxStreamsPerClient > l.MaxStreams {
		l.MaxStreamsPerClient = l.MaxStreams
	}
	if l.MaxPending <= 0 {
		l.MaxPending = 64
	}
	if l.MaxConnections <= 0 {
		l.MaxConnections = l.MaxStreams + l.MaxPending
	}
	if l.RequestTimeout <= 0 {
		l.RequestTimeout = 10 * time.Second
	}
	if l.Drain <= 0 {
		l.Drain = 5 * time.Second
	}
	return l
}

// FitFDs shrinks the limits to the process's open-file limit (each stream
// and waiting connection holds a descriptor) and says what it changed, so
// that no flood of connections can make accept fail for want of one.
func (l Limits) FitFDs() (Limits, string) {
	l = l.EnsureDefaults()
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) != nil {
		return l, ""
	}
	avail := int(min(rl.Cur, 1<<20)) - reserveFDs - openFDs()
	if avail >= l.MaxStreams+l.MaxPending {
		return l, ""
	}
	old := l
	avail = max(avail, 2)
	l.MaxPending = max(1, min(l.MaxPending, avail/4))
	l.MaxStreams = max(1, avail-l.MaxPending)
	l.MaxStreamsPerClient = min(l.MaxStreamsPerClient, l.MaxStreams)
	l.MaxConnections = l.MaxStreams + l.MaxPending
	return l, fmt.Sprintf("open-file limit %d: at most %d streams (asked %d) and %d waiting connections (asked %d)",
		rl.Cur, l.MaxStreams, old.MaxStreams, l.MaxPending, old.MaxPending)
}

func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 16
	}
	return len(ents)
}

// admission counts streams for both transports.
type admission struct {
	lim     Limits
	streams chan struct{}

	mu        sync.Mutex
	perClient map[string]int
}

func newAdmission(l Limits) *admission {
	l = l.EnsureDefaults()
	return &admission{lim: l, streams: make(chan struct{}, l.MaxStreams), perClient: map[string]int{}}
}

// acquire admits one stream for client ("" when unknown) or returns an
// unavailable *wire.Error; release must be called once the stream ends.
func (a *admission) acquire(client string) (release func(), err error) {
	select {
	case a.streams <- struct{}{}:
	default:
		return nil, &wire.Error{Code: wire.CodeUnavailable, Message: fmt.Sprintf("%d streams already running", a.lim.MaxStreams)}
	}
	if client != "" {
		a.mu.Lock()
		if a.perClient[client] >= a.lim.MaxStreamsPerClient {
			a.mu.Unlock()
			<-a.streams
			return nil, &wire.Error{Code: wire.CodeUnavailable, Message: fmt.Sprintf("client %s already has %d streams running", client, a.lim.MaxStreamsPerClient)}
		}
		a.perClient[client]++
		a.mu.Unlock()
	}
	return func() {
		if client != "" {
			a.mu.Lock()
			if a.perClient[client]--; a.perClient[client] <= 0 {
				delete(a.perClient, client)
			}
			a.mu.Unlock()
		}
		<-a.streams
	}, nil
}

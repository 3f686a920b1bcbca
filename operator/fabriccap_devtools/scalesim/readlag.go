package main

// How late the operator reads its watches. The delivery latency (watch.go) ends when an event's
// bytes are handed to the kernel; a client that is busy elsewhere leaves them in the sockets'
// buffers, several MB on loopback, and that wait is invisible to it. Here each event of an
// operator's watch is timed to the moment its last byte leaves the kernel's queues: the bytes
// the server wrote on the connection (countingConn, TLS records included), less those still
// queued (the server socket's send queue and the client socket's receive queue, both read from
// /proc/net/tcp every -read-lag-period), is how far the client has read.
//
// Bytes read are not yet events handled: the client decrypts and parses after its read, so what
// this misses is at most what one read takes in. A latency is known to the sampling period.
//
// Off unless asked for: reading /proc/net/tcp walks the kernel's whole established-connection
// table, 262,144 buckets on the 24 GiB machine of docs/performance.md, 4.5 ms a read. Every
// 20 ms that doubled the simulator's CPU in a 100,000-node run, on the two cores it shares with
// the operator.

import (
	"bufio"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// countingConn counts the bytes written to a connection's socket.
type countingConn struct {
	net.Conn
	written atomic.Int64
}

func (c *countingConn) Write(data []byte) (int, error) {
	n, err := c.Conn.Write(data)
	c.written.Add(int64(n))
	return n, err
}

type countingListener struct{ net.Listener }

func (l countingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn}, nil
}

// socketOf finds the counting connection under what net/http hands a handler (TLS or not).
func socketOf(conn net.Conn) *countingConn {
	for {
		switch c := conn.(type) {
		case *countingConn:
			return c
		case interface{ NetConn() net.Conn }:
			conn = c.NetConn()
		default:
			return nil
		}
	}
}

// connKey holds a request's connection in its context (http.Server.ConnContext).
type connKey struct{}

type sentEvent struct {
	end       int64     // the connection's written bytes once the event was flushed
	committed time.Time // the event's commit
}

// readTracker follows one operator watch: its events flushed and not yet read.
type readTracker struct {
	conn       *countingConn
	kind       *Kind
	localPort  uint16
	remotePort uint16
	off        *atomic.Bool // the queues cannot be read: nothing is kept

	mu      sync.Mutex
	pending []sentEvent
}

func (t *readTracker) sent(events []*Event) {
	if t.off.Load() {
		return
	}
	end := t.conn.written.Load()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, event := range events {
		t.pending = append(t.pending, sentEvent{end, event.At})
	}
}

// readUpTo takes the events whose last byte is at or before position: their read latencies.
func (t *readTracker) readUpTo(position int64, now time.Time) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	taken := 0
	for taken < len(t.pending) && t.pending[taken].end <= position {
		taken++
	}
	if taken == 0 {
		return nil
	}
	latencies := make([]time.Duration, taken)
	for i, event := range t.pending[:taken] {
		latencies[i] = now.Sub(event.committed)
	}
	t.pending = append(t.pending[:0], t.pending[taken:]...)
	return latencies
}

// ReadLag samples the kernel's queues of the operator's watch connections.
type ReadLag struct {
	stats    *Stats
	path     string // /proc/net/tcp
	mu       sync.Mutex
	trackers map[*readTracker]struct{}
	failed   atomic.Bool
}

func newReadLag(stats *Stats, path string) *ReadLag {
	return &ReadLag{stats: stats, path: path, trackers: map[*readTracker]struct{}{}}
}

// track starts following a watch on conn; nil when its queues cannot be read.
func (r *ReadLag) track(conn net.Conn, kind *Kind) *readTracker {
	socket := socketOf(conn)
	if socket == nil || r.failed.Load() {
		return nil
	}
	local, okLocal := socket.LocalAddr().(*net.TCPAddr)
	remote, okRemote := socket.RemoteAddr().(*net.TCPAddr)
	if !okLocal || !okRemote {
		return nil
	}
	tracker := &readTracker{
		conn: socket, kind: kind, localPort: uint16(local.Port), remotePort: uint16(remote.Port), off: &r.failed,
	}
	r.mu.Lock()
	r.trackers[tracker] = struct{}{}
	r.mu.Unlock()
	return tracker
}

func (r *ReadLag) untrack(tracker *readTracker) {
	r.mu.Lock()
	delete(r.trackers, tracker)
	r.mu.Unlock()
}

func (r *ReadLag) run(period time.Duration) {
	for range time.Tick(period) {
		r.mu.Lock()
		trackers := make([]*readTracker, 0, len(r.trackers))
		for tracker := range r.trackers {
			trackers = append(trackers, tracker)
		}
		r.mu.Unlock()
		if len(trackers) == 0 {
			continue
		}
		queues, err := readQueues(r.path)
		if err != nil {
			r.failed.Store(true)
			return // no /proc/net/tcp (not Linux): the figures say they have no samples
		}
		now := time.Now()
		for _, tracker := range trackers {
			// Sent and not yet read: what waits in the server socket's send queue and in
			// the client socket's receive queue.
			unread := queues[portPair{tracker.localPort, tracker.remotePort}].tx +
				queues[portPair{tracker.remotePort, tracker.localPort}].rx
			read := tracker.conn.written.Load() - unread
			if latencies := tracker.readUpTo(read, now); len(latencies) > 0 {
				r.stats.readDelivered(tracker.kind, latencies)
			}
		}
	}
}

type portPair struct{ local, remote uint16 }

type socketQueues struct{ tx, rx int64 }

// readQueues reads the loopback IPv4 sockets' queues: /proc/net/tcp's tx_queue:rx_queue by
// (local port, remote port).
func readQueues(path string) (map[portPair]socketQueues, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	queues := map[portPair]socketQueues{}
	lines := bufio.NewScanner(file)
	lines.Scan() // the header
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) < 5 {
			continue
		}
		local, okLocal := hexPort(fields[1])
		remote, okRemote := hexPort(fields[2])
		tx, rx, okQueues := strings.Cut(fields[4], ":")
		if !okLocal || !okRemote || !okQueues {
			continue
		}
		txBytes, errTx := strconv.ParseInt(tx, 16, 64)
		rxBytes, errRx := strconv.ParseInt(rx, 16, 64)
		if errTx != nil || errRx != nil {
			continue
		}
		queues[portPair{local, remote}] = socketQueues{txBytes, rxBytes}
	}
	return queues, lines.Err()
}

// hexPort reads the port of "0100007F:1F90".
func hexPort(address string) (uint16, bool) {
	_, port, ok := strings.Cut(address, ":")
	if !ok {
		return 0, false
	}
	value, err := strconv.ParseUint(port, 16, 16)
	return uint16(value), err == nil
}

// clusterload: the load client of the cluster benchmark (bench/cluster/run.py). One binary, two modes:
//
//	sub  N WebSocket subscribers on the gateway replicas' /v1/pubsub/ws, one topic each, spread over the replicas. Every
//	     event's data carries its topic's sequence number and its publish time, so each subscriber counts what it lost,
//	     got twice or got out of order, across its reconnects. A share of the subscribers reconnects every second
//	     (close, dial a random other replica, subscribe with `since` = the last position it saw); a subscriber whose
//	     replica dies does the same. Publish-to-delivery latency goes into fixed 100 us buckets (live and replayed
//	     events apart). Commands on stdin: `start` (begin churn), `stop <publisher-final.json>` (end churn, wait until
//	     every subscriber has its topic's last event or the drain bound passes, report, exit).
//	pub  publishes at a fixed rate through the gateways' REST `POST /v1/pubsub/{topic}`, round robin over the topics,
//	     one publish in flight per topic (so the topic's order is the publisher's), and writes each topic's last
//	     sequence number to -out.
//
// Output: JSON lines on stdout (`ready`, one `tick` a second, `final`). Every loop and wait is bounded. Standard library
// only (the WebSocket client side is the few lines it needs: upgrade, masked text frames out, unmasked frames in).
package main

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io/ioutil"
	"math/rand"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

var (
	mode        = flag.String("mode", "sub", "sub | pub")
	wsAddrs     = flag.String("ws-addrs", "", "sub: the replicas' HTTP host:port, comma-separated")
	httpAddrs   = flag.String("http-addrs", "", "pub: the replicas' HTTP host:port to publish through, comma-separated")
	subs        = flag.Int("subs", 1000, "sub: subscribers in this process")
	first       = flag.Int("first", 0, "sub: global index of this process's first subscriber (topic and replica follow from it)")
	topics      = flag.Int("topics", 100, "topics bench.c.0 .. bench.c.<n-1>")
	churn       = flag.Float64("churn", 0.01, "sub: share of the subscribers reconnecting per second after `start`")
	dialPar     = flag.Int("dial-par", 64, "sub: parallel connection setups")
	setupS      = flag.Float64("setup-timeout-s", 300, "sub: bound on opening every subscriber")
	drainS      = flag.Float64("drain-timeout-s", 30, "sub: bound on waiting for the last events after `stop`")
	rate        = flag.Float64("rate", 100, "pub: events per second over all topics")
	durationS   = flag.Float64("duration-s", 30, "pub: publishing time")
	size        = flag.Int("size", 128, "pub: padding bytes in each event's data")
	out         = flag.String("out", "", "pub: file for the topics' last sequence numbers (JSON array)")
	inflightMax = flag.Int("http-conns", 64, "pub: keep-alive connections per replica")
	resume      = flag.Bool("resume", true, "sub: reconnect with since (false checks the checker: the gaps must show as lost)")
	urlSub      = flag.Bool("url-subscribe", false, "sub: subscribe (and resume) in the upgrade URL, ?topic=..&since=.., instead of a subscribe frame after the 101")
	nLoops      = flag.Int("loops", 2, "sub: epoll loops (goroutines reading the sockets)")
	portRange   = flag.String("ports", "", "sub: LO-HI, local ports this process binds its connections from (empty: the kernel picks)")
	cpuProfile  = flag.String("cpuprofile", "", "sub: write a Go CPU profile of the run to this file")
	failJitter  = flag.Duration("failover-jitter", 0, "sub: a subscriber whose connection ended without the client asking (a replica that died) waits a random time below this before it reconnects (0: at once, the herd)")
	pollEvery   = flag.Duration("poll", time.Millisecond, "sub: look for ready sockets this often, sleeping in between (0: block in epoll_wait, woken by every first arrival)")
)

func die(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "clusterload: "+format+"\n", a...)
	os.Exit(1)
}

var outMu sync.Mutex

func emit(v map[string]interface{}) {
	outMu.Lock()
	defer outMu.Unlock()
	b, _ := json.Marshal(v)
	os.Stdout.Write(append(b, '\n'))
}

func topicName(i int) string { return "bench.c." + strconv.Itoa(i) }

// ---- latency histogram: 100 us buckets up to 20 s ----

const bucketUs = 100
const nBuckets = 200001

type hist struct{ b []int64 }

func newHist() *hist { return &hist{b: make([]int64, nBuckets)} }

func (h *hist) add(us int64) {
	i := us / bucketUs
	if i < 0 {
		i = 0
	}
	if i >= nBuckets {
		i = nBuckets - 1
	}
	atomic.AddInt64(&h.b[i], 1)
}

// take moves h's counts into a new histogram and leaves h empty (the warm-up's share, at `measure`).
func (h *hist) take() *hist {
	w := newHist()
	for i := range h.b {
		w.b[i] = atomic.SwapInt64(&h.b[i], 0)
	}
	return w
}

// snapshot returns the non-empty buckets as [bucket_index, count] pairs (compact; the runner merges processes).
func (h *hist) snapshot() [][2]int64 {
	var s [][2]int64
	for i := range h.b {
		if c := atomic.LoadInt64(&h.b[i]); c > 0 {
			s = append(s, [2]int64{int64(i), c})
		}
	}
	return s
}

// ---- subscribers ----

type sub struct {
	gi       int
	topic    int
	replica  int
	mu       sync.Mutex // guards fd against the churn goroutine's shutdown
	fd       int        // the socket, owned by loop while live
	loop     *loop      // the epoll loop that reads it
	buf      []byte     // the start of a frame that has not arrived whole
	churning int32      // set by the churn goroutine before it shuts the socket down
	live     int32      // 1 while subscribed
	lastSeq  int64      // highest sequence number seen (atomic: the drain check reads it)
	lastPos  []byte // the last event's id (the resume position), reused: no allocation per event
	missing  map[int64]struct{}
	resubNs  int64 // wall clock of the last resubscribe: events published before it are replays
	acked    int32 // 1 once the first `subscribed` reply came
	// connection setup (./start, handshake): owned by whoever holds s (a reconnector, then its loop)
	state      int    // stateLive, or a setup's stage
	dialNs     int64  // when the setup started
	key        string // Sec-WebSocket-Key, and the Sec-WebSocket-Accept it must get back
	accept     string
	dialFailed bool // the last setup failed (for the reconnectors)
	waited     bool // its failover delay (-failover-jitter) is running or just over
	closing    bool // the server answered our Close: its FIN comes next
	port       int  // the local port the connection bound from the pool (0: the kernel's)
	tries      int  // setups failed in a row
}

var (
	replicas                                      []string
	delivered, dups, ooo, lostOverflow, frameErrs int64
	reconnects, churnReconnects, failReconnects   int64
	recoveredTrue, recoveredFalse, abandoned      int64
	dialFailures, replayed                        int64
	setups                                        int64 // connection setups in flight
	liveHist, replayHist                          = newHist(), newHist()
	resubHist                                     = newHist() // a resubscribe's subscribe frame to its `subscribed` reply
	warmLive, warmReplay                          = newHist(), newHist() // latencies before `measure` (the warm-up)
	secondHist                                    = make([]int64, 10001) // this second's deliveries by latency in ms (ticks report its p99 and max, then clear it)
	frameSeq, frameT, frameID, framePos, frameRec = []byte(`"seq":`), []byte(`"t":`), []byte(`"id":"`), []byte(`"position":"`), []byte(`"recovered":`)
	opEvent, opSubscribed, opError                = []byte(`{"op":"event"`), []byte(`"op":"subscribed"`), []byte(`"op":"error"`)
	errorsLogged                                  int64
	stopping                                      int32
	loopsDone                                     sync.WaitGroup
)

// intAfter reads the decimal integer after the first key in b (no allocation: this runs once per delivery).
func intAfter(b, key []byte) (int64, bool) {
	i := bytes.Index(b, key)
	if i < 0 {
		return 0, false
	}
	var v int64
	k := i + len(key)
	j := k
	for ; j < len(b) && b[j] >= '0' && b[j] <= '9' && j-k < 19; j++ {
		v = v*10 + int64(b[j]-'0')
	}
	return v, j > k
}

// bytesAfter returns the JSON string's bytes after the first key (which ends with the opening quote) in b.
func bytesAfter(b, key []byte) ([]byte, bool) {
	i := bytes.Index(b, key)
	if i < 0 {
		return nil, false
	}
	j := i + len(key)
	k := bytes.IndexByte(b[j:], '"')
	if k < 0 {
		return nil, false
	}
	return b[j : j+k], true
}

// onFrame handles one frame of subscriber s (called only from the loop that holds s's socket).
func (s *sub) onFrame(b []byte) {
	if bytes.HasPrefix(b, opEvent) { // the gateway writes op first: {"op":"event","topic":..,"id":..,"cloudevent":..}
		now := time.Now().UnixNano()
		pos, ok3 := bytesAfter(b, frameID) // the frame's own id precedes the cloudevent's
		seq, ok1 := intAfter(b, frameSeq)
		t, ok2 := intAfter(b, frameT)
		if !ok1 || !ok2 || !ok3 {
			atomic.AddInt64(&frameErrs, 1)
			return
		}
		atomic.AddInt64(&delivered, 1)
		s.lastPos = append(s.lastPos[:0], pos...)
		ms := (now - t) / 1e6
		if ms < 0 {
			ms = 0
		} else if ms >= int64(len(secondHist)) {
			ms = int64(len(secondHist)) - 1
		}
		atomic.AddInt64(&secondHist[ms], 1)
		if t < atomic.LoadInt64(&s.resubNs) {
			atomic.AddInt64(&replayed, 1)
			replayHist.add((now - t) / 1000)
		} else {
			liveHist.add((now - t) / 1000)
		}
		last := atomic.LoadInt64(&s.lastSeq)
		switch {
		case seq == last+1:
			atomic.StoreInt64(&s.lastSeq, seq)
		case seq > last+1:
			gap := seq - last - 1
			if gap > 100000 {
				atomic.AddInt64(&lostOverflow, gap)
			} else {
				if s.missing == nil {
					s.missing = map[int64]struct{}{}
				}
				for q := last + 1; q < seq; q++ {
					s.missing[q] = struct{}{}
				}
			}
			atomic.StoreInt64(&s.lastSeq, seq)
		default:
			if _, was := s.missing[seq]; was {
				delete(s.missing, seq)
				atomic.AddInt64(&ooo, 1)
			} else {
				atomic.AddInt64(&dups, 1)
			}
		}
		return
	}
	if bytes.Contains(b, opSubscribed) {
		if atomic.SwapInt32(&s.acked, 1) == 1 {
			resubHist.add((time.Now().UnixNano() - atomic.LoadInt64(&s.resubNs)) / 1000)
		}
		if pos, ok := bytesAfter(b, framePos); ok && len(s.lastPos) == 0 {
			s.lastPos = append(s.lastPos[:0], pos...)
		}
		if i := bytes.Index(b, frameRec); i >= 0 {
			if bytes.HasPrefix(b[i+len(frameRec):], []byte("true")) {
				atomic.AddInt64(&recoveredTrue, 1)
			} else {
				atomic.AddInt64(&recoveredFalse, 1)
			}
		}
		return
	}
	if bytes.Contains(b, opError) {
		atomic.AddInt64(&frameErrs, 1)
		if atomic.AddInt64(&errorsLogged, 1) <= 10 {
			fmt.Fprintf(os.Stderr, "clusterload: sub %d: %.300s\n", s.gi, b)
		}
	}
}

// Connection setup happens in the epoll loops too, non-blocking, so a reconnect costs the client its syscalls and no
// goroutine hand-offs: start opens the socket and connects (EINPROGRESS), the loop writes the HTTP upgrade when the
// socket is writable, checks the 101 (status and Sec-WebSocket-Accept), sends the subscribe frame (with since when s
// has a position; with -url-subscribe both ride in the upgrade URL instead) and from then on reads frames. (A gorilla dial per reconnect cost about 330 us of client CPU here,
// 0.2 cores at 1% churn of 60,000 subscribers.) A setup that fails or passes the handshake bound goes back to the
// reconnectors as a dial failure.
const (
	stateLive = iota
	stateConnecting
	stateUpgrading
)

const handshakeTimeout = 10 * time.Second

const epollET = 1 << 31 // syscall.EPOLLET is a negative int constant

var wsGUID = []byte("258EAFA5-E914-47DA-95CA-C5AB0DC85B11")

// start begins a connection to replica r (any goroutine); the loop finishes it. False: it failed at once.
// portPool holds this process's own local ports (-ports), one free list per replica: a connection binds a port no
// other connection of this process uses towards the same replica. Left to the kernel, connect() picks a port by
// scanning the ephemeral range (even ports first) past every port already connected to that replica, and with tens of
// thousands of sockets from one address that scan cost about 260 us of CPU per connect here: most of what a reconnect
// cost this client, and a load-generator cost no real client (one socket per machine) pays.
type portPool struct {
	mu   sync.Mutex
	free [][]int // by replica
}

var ports *portPool

func newPortPool(spec string, replicas int) *portPool {
	var lo, hi int
	if _, err := fmt.Sscanf(spec, "%d-%d", &lo, &hi); err != nil || lo < 1024 || hi > 65535 || hi <= lo {
		die("-ports %q: want LO-HI within 1024-65535", spec)
	}
	p := &portPool{free: make([][]int, replicas)}
	for r := range p.free {
		for port := hi; port >= lo; port-- {
			p.free[r] = append(p.free[r], port)
		}
	}
	return p
}

// take a free port towards replica r (0: none left, the kernel picks).
func (p *portPool) take(r int) int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.free[r])
	if n == 0 {
		return 0
	}
	port := p.free[r][n-1]
	p.free[r] = p.free[r][:n-1]
	return port
}

func (p *portPool) give(r, port int) {
	if p == nil || port == 0 {
		return
	}
	p.mu.Lock()
	p.free[r] = append(p.free[r], port)
	p.mu.Unlock()
}

// start begins a connection to replica r (any goroutine); the loop finishes it. False: it failed at once.
func (s *sub) start(r int) bool {
	addr, err := net.ResolveTCPAddr("tcp4", replicas[r])
	if err != nil {
		return false
	}
	sa := &syscall.SockaddrInet4{Port: addr.Port}
	copy(sa.Addr[:], addr.IP.To4())
	// A port another program holds, or whose 4-tuple is still in TIME_WAIT, fails bind or connect at once: it stays
	// out of the pool and the next one is tried.
	fd := -1
	port := 0
	for try := 0; try < 4 && fd < 0; try++ {
		if fd, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0); err != nil {
			return false
		}
		syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
		port = ports.take(r)
		if port != 0 && syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: sa.Addr}) != nil {
			syscall.Close(fd)
			fd = -1
			continue
		}
		if err := syscall.Connect(fd, sa); err != nil && err != syscall.EINPROGRESS {
			syscall.Close(fd)
			fd = -1
			if port == 0 {
				return false
			}
		}
	}
	if fd < 0 {
		return false
	}
	s.replica = r
	s.port = port
	s.closing = false
	s.state = stateConnecting
	s.dialNs = time.Now().UnixNano()
	s.buf = s.buf[:0]
	s.mu.Lock()
	s.fd = fd
	s.mu.Unlock()
	atomic.AddInt64(&setups, 1)
	if err := s.loop.add(s, syscall.EPOLLOUT); err != nil {
		atomic.AddInt64(&setups, -1)
		s.mu.Lock()
		syscall.Close(fd)
		s.fd = -1
		s.mu.Unlock()
		ports.give(r, port)
		s.port = 0
		return false
	}
	return true
}

// handshake advances s's connection setup on a loop event; false: it failed.
func (s *sub) handshake(l *loop, rbuf []byte) bool {
	if s.state == stateConnecting {
		if e, err := syscall.GetsockoptInt(s.fd, syscall.SOL_SOCKET, syscall.SO_ERROR); err != nil || e != 0 {
			return false
		}
		path := "/v1/pubsub/ws"
		if *urlSub {
			path += "?topic=" + topicName(s.topic)
			if len(s.lastPos) > 0 && *resume {
				path += "&since=" + string(s.lastPos)
			}
			atomic.StoreInt64(&s.resubNs, time.Now().UnixNano())
		}
		req := "GET " + path + " HTTP/1.1\r\nHost: " + replicas[s.replica] + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
			"Sec-WebSocket-Key: " + s.key + "\r\nSec-WebSocket-Version: 13\r\n\r\n"
		if k, err := syscall.Write(s.fd, []byte(req)); err != nil || k != len(req) {
			return false
		}
		s.state = stateUpgrading
		return syscall.EpollCtl(l.efd, syscall.EPOLL_CTL_MOD, s.fd, &syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | epollET, Fd: int32(s.fd)}) == nil
	}
	k, err := syscall.Read(s.fd, rbuf)
	if err == syscall.EAGAIN {
		return true
	}
	if k <= 0 || err != nil {
		return false
	}
	s.buf = append(s.buf, rbuf[:k]...)
	end := bytes.Index(s.buf, []byte("\r\n\r\n"))
	if end < 0 {
		return len(s.buf) < 4096
	}
	head := s.buf[:end]
	if !bytes.HasPrefix(head, []byte("HTTP/1.1 101 ")) || !bytes.Contains(bytes.ToLower(head), []byte("sec-websocket-accept: "+strings.ToLower(s.accept))) {
		if atomic.AddInt64(&errorsLogged, 1) <= 10 {
			fmt.Fprintf(os.Stderr, "clusterload: sub %d: upgrade refused: %.300q\n", s.gi, head)
		}
		return false
	}
	rest := append([]byte(nil), s.buf[end+4:]...)
	s.buf = s.buf[:0]
	if *urlSub {
		s.state = stateLive
		atomic.AddInt64(&setups, -1)
		atomic.StoreInt32(&s.live, 1)
		return s.frames(rest)
	}
	msg := `{"op":"subscribe","topics":["` + topicName(s.topic) + `"]`
	if len(s.lastPos) > 0 && *resume {
		msg += `,"since":"` + string(s.lastPos) + `"`
	}
	msg += "}"
	f := make([]byte, 0, 8+len(msg))
	if len(msg) < 126 {
		f = append(f, 0x81, 0x80|byte(len(msg)))
	} else {
		f = append(f, 0x81, 0x80|126, byte(len(msg)>>8), byte(len(msg)))
	}
	f = append(f, 0, 0, 0, 0) // zero mask key: the payload goes as is
	f = append(f, msg...)
	atomic.StoreInt64(&s.resubNs, time.Now().UnixNano())
	if k, err := syscall.Write(s.fd, f); err != nil || k != len(f) {
		return false
	}
	s.state = stateLive
	atomic.AddInt64(&setups, -1)
	atomic.StoreInt32(&s.live, 1)
	return s.frames(rest)
}

// retry hands a subscriber whose setup failed back to the reconnectors (or counts it abandoned after 40 tries).
func (s *sub) retry(gone chan<- *sub) {
	s.dialFailed = true
	if atomic.LoadInt32(&stopping) == 0 {
		gone <- s
	}
}

// reconnector takes subscribers whose socket ended (churn, a dead replica) or whose setup failed, and starts the next
// setup: after an end, on a random other replica (so a resume crosses replicas); after a failure, 50 ms later, on a
// random replica other than the one that failed (on the same one while it never subscribed: the initial layout);
// at most 40 tries.
func reconnector(gone chan *sub, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	for s := range gone {
		if atomic.LoadInt32(&stopping) == 1 {
			continue
		}
		dropped := false // the connection ended without this client asking (not churn, not a failed setup)
		if s.waited {
			// back from its failover delay: counted when it ended
			s.waited = false
		} else if s.dialFailed {
			s.dialFailed = false
			atomic.AddInt64(&dialFailures, 1)
			if s.tries++; s.tries >= 40 {
				atomic.AddInt64(&abandoned, 1)
				continue
			}
			time.Sleep(50 * time.Millisecond)
		} else {
			s.tries = 0
			if atomic.SwapInt32(&s.churning, 0) == 1 {
				atomic.AddInt64(&churnReconnects, 1)
			} else {
				atomic.AddInt64(&failReconnects, 1)
				dropped = true
			}
			atomic.AddInt64(&reconnects, 1)
		}
		if dropped && *failJitter > 0 {
			// Spread the reconnects of a failure over the jitter window, the way clients with a jittered backoff do: the
			// subscriber comes back to the reconnectors when its delay is over (and picks its replica then).
			s.waited = true
			back := s // the loop variable is reused by the next receive (Go before 1.22)
			time.AfterFunc(time.Duration(rng.Int63n(int64(*failJitter))), func() { gone <- back })
			continue
		}
		r := s.replica
		if atomic.LoadInt32(&s.acked) == 1 && len(replicas) > 1 {
			r = (s.replica + 1 + rng.Intn(len(replicas)-1)) % len(replicas)
		}
		if !s.start(r) {
			s.retry(gone)
		}
	}
}

// epoll loops: reading with a goroutine per socket costs two read syscalls per frame (the data, then EAGAIN before
// parking) plus the scheduler's wake-up; a level-triggered epoll loop reads each ready socket once. That halves the
// client's CPU per delivery, and on this box the client shares the two cores with everything it measures.
type loop struct {
	efd  int
	subs []*sub // by fd
	mu   sync.Mutex
}

func newLoop() *loop {
	efd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		die("epoll: %v", err)
	}
	return &loop{efd: efd, subs: make([]*sub, 1<<16)}
}

func (l *loop) add(s *sub, events uint32) error {
	if s.fd >= len(l.subs) {
		return fmt.Errorf("fd %d past the table", s.fd)
	}
	l.mu.Lock()
	l.subs[s.fd] = s
	l.mu.Unlock()
	return syscall.EpollCtl(l.efd, syscall.EPOLL_CTL_ADD, s.fd, &syscall.EpollEvent{Events: events, Fd: int32(s.fd)})
}

// drop takes s's socket out of the loop and closes it; s goes to the reconnectors unless the run is stopping (a setup
// that failed goes as a dial failure). The close is abortive (RST): the socket's peer has ended (a replica that died, a
// close handshake done) or failed, and a FIN would cost both ends a last exchange (LAST_ACK here, TIME_WAIT there) that
// a client on its own machine would not spend this box's CPU on. Closing the fd also takes it out of the epoll set.
func (l *loop) drop(s *sub, gone chan<- *sub) {
	l.mu.Lock()
	l.subs[s.fd] = nil
	l.mu.Unlock()
	atomic.StoreInt32(&s.live, 0)
	s.mu.Lock()
	syscall.SetsockoptLinger(s.fd, syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 0})
	syscall.Close(s.fd)
	s.fd = -1
	s.mu.Unlock()
	ports.give(s.replica, s.port)
	s.port = 0
	if s.state != stateLive {
		s.state = stateLive
		atomic.AddInt64(&setups, -1)
		s.retry(gone)
		return
	}
	if atomic.LoadInt32(&stopping) == 0 {
		gone <- s
	}
}

// epollNow asks for the sockets ready now, without blocking and without the Go scheduler's syscall hand-off.
func epollNow(efd int, events []syscall.EpollEvent) (int, error) {
	r, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_WAIT, uintptr(efd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// run reads the loop's sockets. With -poll (the default, 1 ms) it looks for ready sockets that often and sleeps in
// between, instead of blocking in epoll_wait: a blocked waiter is woken by the first frame that arrives, and at
// 100,000 deliveries a second those wake-ups (the gateway's send pays for waking the reader, this process pays for the
// scheduler's hand-off around a blocking syscall) cost more CPU than reading. The price is up to one interval (plus
// the timer's slack) added to each measured latency. Sockets are edge-triggered: each is read until a short read, once
// per arrival, not polled again by the next epoll_wait as a level-triggered socket is.
func (l *loop) run(gone chan<- *sub, done *sync.WaitGroup) {
	defer done.Done()
	events := make([]syscall.EpollEvent, 1024)
	rbuf := make([]byte, 64<<10)
	lastSweep := time.Now()
	lastPoll := time.Now()
	for atomic.LoadInt32(&stopping) == 0 {
		var n int
		var err error
		now := time.Now()
		raiseTo(&loopGapMaxUs, now.Sub(lastPoll).Microseconds())
		lastPoll = now
		if *pollEvery > 0 {
			n, err = epollNow(l.efd, events)
		} else {
			n, err = syscall.EpollWait(l.efd, events, 100)
		}
		if err != nil && err != syscall.EINTR {
			die("epoll_wait: %v", err)
		}
		for i := 0; i < n; i++ {
			fd := int(events[i].Fd)
			l.mu.Lock()
			s := l.subs[fd]
			l.mu.Unlock()
			if s == nil {
				continue
			}
			var ok bool
			if s.state != stateLive {
				ok = s.handshake(l, rbuf)
			} else {
				ok = s.readAll(rbuf)
			}
			// the end comes after whatever data came before it; edge-triggered, no later event would report it
			if !ok || events[i].Events&(syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
				l.drop(s, gone)
			}
		}
		if *pollEvery > 0 && n < len(events) {
			time.Sleep(*pollEvery)
		}
		// Setups past the handshake bound fail (a replica that accepted the connection but never answers); a close the
		// server answered but never ended is dropped.
		if now := time.Now(); now.Sub(lastSweep) > 500*time.Millisecond {
			lastSweep = now
			var late []*sub
			l.mu.Lock()
			for _, s := range l.subs {
				if s != nil && (s.state != stateLive || s.closing) && now.UnixNano()-s.dialNs > int64(handshakeTimeout) {
					late = append(late, s)
				}
			}
			l.mu.Unlock()
			for _, s := range late {
				l.drop(s, gone)
			}
		}
	}
}

// readAll reads s's socket until a short read (edge-triggered: the next arrival brings the next event); false when the
// socket is to be dropped.
func (s *sub) readAll(rbuf []byte) bool {
	for {
		k, err := syscall.Read(s.fd, rbuf)
		if err == syscall.EAGAIN {
			return true
		}
		if k <= 0 || err != nil || !s.frames(rbuf[:k]) {
			return false
		}
		if k < len(rbuf) {
			return true
		}
	}
}

// frames parses the server's (unmasked) frames in b after what s kept of an earlier read; false when the socket is to
// be dropped (a close frame, or a frame this client does not take: fragments, binary).
func (s *sub) frames(b []byte) bool {
	if len(s.buf) > 0 {
		s.buf = append(s.buf, b...)
		b = s.buf
	}
	for len(b) >= 2 {
		op := b[0] & 0x0f
		n := int(b[1] & 0x7f)
		h := 2
		switch n {
		case 126:
			if len(b) < 4 {
				goto partial
			}
			n = int(b[2])<<8 | int(b[3])
			h = 4
		case 127:
			if len(b) < 10 {
				goto partial
			}
			n = 0
			for _, x := range b[2:10] {
				n = n<<8 | int(x)
			}
			h = 10
		}
		if len(b) < h+n {
			goto partial
		}
		payload := b[h : h+n]
		switch {
		case op == 1 && b[0]&0x80 != 0:
			s.onFrame(payload)
		case op == 9: // ping: answer a masked pong with the same payload
			s.pong(payload)
		case op == 10:
		case op == 8 && atomic.LoadInt32(&s.churning) == 1:
			// the answer to our Close: read on until the server's FIN (the loop sees the end and drops s)
			s.closing = true
			s.dialNs = time.Now().UnixNano() // the same bound as a setup's
		default: // close (8) or anything this client does not take
			return false
		}
		b = b[h+n:]
	}
partial:
	// keep the rest (own copy: b may be the loop's shared read buffer)
	s.buf = append(s.buf[:0], b...)
	return true
}

func (s *sub) pong(p []byte) {
	if len(p) > 125 {
		return
	}
	f := make([]byte, 0, 6+len(p))
	f = append(f, 0x8a, 0x80|byte(len(p)), 0, 0, 0, 0) // zero mask key: the payload goes as is
	f = append(f, p...)
	syscall.Write(s.fd, f)
}

func runSub() {
	replicas = strings.Split(*wsAddrs, ",")
	all := make([]*sub, *subs)
	for i := range all {
		gi := *first + i
		// Topic and replica from the global index: topic j's subscribers j, j+T, j+2T, ... go round robin over the
		// replicas, so every replica holds every topic.
		all[i] = &sub{gi: gi, topic: gi % *topics, replica: (gi / *topics) % len(replicas), fd: -1}
		var k [16]byte
		rand.Read(k[:])
		all[i].key = base64.StdEncoding.EncodeToString(k[:])
		h := sha1.Sum(append([]byte(all[i].key), wsGUID...))
		all[i].accept = base64.StdEncoding.EncodeToString(h[:])
	}
	if *portRange != "" {
		ports = newPortPool(*portRange, len(replicas))
	}
	loops := make([]*loop, *nLoops)
	gone := make(chan *sub, len(all))
	for i := range loops {
		loops[i] = newLoop()
		loopsDone.Add(1)
		go loops[i].run(gone, &loopsDone)
	}
	for i, s := range all {
		s.loop = loops[i%len(loops)]
	}
	for w := 0; w < *dialPar; w++ {
		go reconnector(gone, int64(*first+w))
	}
	// Initial setup: at most dial-par setups in flight; a failed one is retried by the reconnectors.
	t0 := time.Now()
	setupBound := time.Duration(*setupS * float64(time.Second))
	for _, s := range all {
		for atomic.LoadInt64(&setups) >= int64(*dialPar) && time.Since(t0) < setupBound {
			time.Sleep(time.Millisecond)
		}
		if !s.start(s.replica) {
			s.retry(gone)
		}
	}
	for countSubscribed(all)+atomic.LoadInt64(&abandoned) < int64(len(all)) && time.Since(t0) < setupBound {
		time.Sleep(20 * time.Millisecond)
	}
	failed := int64(len(all)) - countSubscribed(all)
	emit(map[string]interface{}{"type": "ready", "subs": len(all), "failed": failed, "setup_s": time.Since(t0).Seconds(),
		"subscribed": countSubscribed(all)})
	if failed > 0 {
		die("%d of %d subscribers failed to connect", failed, len(all))
	}

	var churnOn int32
	stopTicks := make(chan struct{})
	go tickLoop(all, stopTicks)
	go churnLoop(all, &churnOn)

	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "start":
			atomic.StoreInt32(&churnOn, 1)
			if *cpuProfile != "" {
				f, err := os.Create(*cpuProfile)
				if err != nil {
					die("cpuprofile: %v", err)
				}
				pprof.StartCPUProfile(f)
				defer pprof.StopCPUProfile()
			}
		case "measure":
			// the warm-up ends: latencies from here on are the measured ones (the sequence checks run throughout)
			warmLive, warmReplay = liveHist.take(), replayHist.take()
			resubHist.take()
			emit(map[string]interface{}{"type": "measuring", "delivered": atomic.LoadInt64(&delivered)})
		case "stop":
			atomic.StoreInt32(&churnOn, 0)
			final := readFinal(f[1])
			finish(all, final)
			close(stopTicks)
			return
		}
	}
	die("stdin closed before stop")
}

func countSubscribed(all []*sub) int64 {
	var n int64
	for _, s := range all {
		if atomic.LoadInt32(&s.acked) == 1 {
			n++
		}
	}
	return n
}

func readFinal(path string) []int64 {
	b, err := ioutil.ReadFile(path)
	if err != nil {
		die("final: %v", err)
	}
	var f []int64
	if err := json.Unmarshal(b, &f); err != nil || len(f) != *topics {
		die("final %s: %v (%d topics)", path, err, len(f))
	}
	return f
}

// loopGapMaxUs: the longest time between two looks for ready sockets by any loop since the last tick, us (a loop
// that does not look cannot read, so every latency it measures meanwhile includes the gap).
var loopGapMaxUs int64

// raiseTo stores v in *max if it is larger (loops on a lost race).
func raiseTo(max *int64, v int64) {
	for m := atomic.LoadInt64(max); v > m; m = atomic.LoadInt64(max) {
		if atomic.CompareAndSwapInt64(max, m, v) {
			return
		}
	}
}

func tickLoop(all []*sub, stop chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var prev int64
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		d := atomic.LoadInt64(&delivered)
		var live int64
		for _, s := range all {
			live += int64(atomic.LoadInt32(&s.live))
		}
		// this second's latency p99 and max (1 ms buckets), to see when in a run the tail happens
		var n, seen, p99, max int64
		counts := make([]int64, len(secondHist))
		for i := range secondHist {
			counts[i] = atomic.SwapInt64(&secondHist[i], 0)
			n += counts[i]
		}
		for i, c := range counts {
			if c == 0 {
				continue
			}
			seen += c
			if p99 == 0 && seen*100 >= n*99 {
				p99 = int64(i) + 1
			}
			max = int64(i) + 1
		}
		emit(map[string]interface{}{"type": "tick", "t": time.Now().UnixNano() / 1e6, "delivered": d, "delivered_1s": d - prev,
			"p99_1s_ms": p99, "max_1s_ms": max, "loop_gap_max_ms": float64(atomic.SwapInt64(&loopGapMaxUs, 0)) / 1000,
			"live": live, "reconnects": atomic.LoadInt64(&reconnects), "fail_reconnects": atomic.LoadInt64(&failReconnects),
			"dups": atomic.LoadInt64(&dups), "ooo": atomic.LoadInt64(&ooo), "recovered_false": atomic.LoadInt64(&recoveredFalse)})
		prev = d
	}
}

// churnLoop closes a share of the live subscribers every 100 ms while churn is on; each reconnects from its reader.
func churnLoop(all []*sub, on *int32) {
	rng := rand.New(rand.NewSource(int64(*first) + 7))
	perTick := *churn * float64(len(all)) / 10
	var carry float64
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for range t.C {
		if atomic.LoadInt32(&stopping) == 1 {
			return
		}
		if atomic.LoadInt32(on) == 0 {
			continue
		}
		carry += perTick
		n := int(carry)
		carry -= float64(n)
		for k := 0; k < n; k++ {
			s := all[rng.Intn(len(all))]
			if atomic.LoadInt32(&s.live) != 1 || !atomic.CompareAndSwapInt32(&s.churning, 0, 1) {
				continue
			}
			s.mu.Lock()
			if s.fd >= 0 {
				// A browser's close: a Close frame (1000); the server answers with its own and closes the TCP connection
				// first (RFC 6455 7.1.1), so TIME_WAIT stays on the server side. (A client that closes first keeps one
				// TIME_WAIT socket per churned connection for 60 s: 36,000 at 600 a second, and with them each connect()
				// searched the ephemeral port range for about 400 us of CPU.)
				syscall.Write(s.fd, []byte{0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8})
			}
			s.mu.Unlock()
		}
	}
}

func finish(all []*sub, final []int64) {
	t0 := time.Now()
	deadline := t0.Add(time.Duration(*drainS * float64(time.Second)))
	behind := func() int {
		n := 0
		for _, s := range all {
			if atomic.LoadInt64(&s.lastSeq) < final[s.topic] {
				n++
			}
		}
		return n
	}
	for behind() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	drainS := time.Since(t0).Seconds()
	stillBehind := behind()
	atomic.StoreInt32(&stopping, 1)
	loopsDone.Wait() // the loops end within one epoll_wait timeout
	for _, s := range all {
		s.mu.Lock()
		if s.fd >= 0 {
			// Abortive (RST): a FIN from here would leave one TIME_WAIT socket per subscriber in this machine's ephemeral
			// port range for 60 s, and the next run's connect()s would search past them.
			syscall.SetsockoptLinger(s.fd, syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 0})
			syscall.Close(s.fd)
			s.fd = -1
		}
		s.mu.Unlock()
	}
	time.Sleep(200 * time.Millisecond) // readers see their sockets closed
	var lostMissing, lostTail int64
	for _, s := range all {
		lostMissing += int64(len(s.missing))
		if d := final[s.topic] - atomic.LoadInt64(&s.lastSeq); d > 0 {
			lostTail += d
		}
	}
	var expected int64
	for _, s := range all {
		expected += final[s.topic]
	}
	emit(map[string]interface{}{"type": "final", "subs": len(all), "expected": expected, "delivered": atomic.LoadInt64(&delivered),
		"replayed": atomic.LoadInt64(&replayed), "lost": lostMissing + lostTail + atomic.LoadInt64(&lostOverflow),
		"lost_gaps": lostMissing, "lost_tail": lostTail, "duplicated": atomic.LoadInt64(&dups), "out_of_order": atomic.LoadInt64(&ooo),
		"reconnects": atomic.LoadInt64(&reconnects), "churn_reconnects": atomic.LoadInt64(&churnReconnects),
		"failure_reconnects": atomic.LoadInt64(&failReconnects), "dial_failures": atomic.LoadInt64(&dialFailures),
		"abandoned": atomic.LoadInt64(&abandoned), "recovered_true": atomic.LoadInt64(&recoveredTrue),
		"recovered_false": atomic.LoadInt64(&recoveredFalse), "frame_errors": atomic.LoadInt64(&frameErrs),
		"drain_s": drainS, "behind_at_end": stillBehind, "live_hist": liveHist.snapshot(), "replay_hist": replayHist.snapshot(),
		"resubscribe_hist": resubHist.snapshot(), "warmup_live_hist": warmLive.snapshot(), "warmup_replay_hist": warmReplay.snapshot(),
		"hist_bucket_us":   bucketUs})
}

// ---- publisher ----

func runPub() {
	addrs := strings.Split(*httpAddrs, ",")
	tr := &http.Transport{MaxIdleConnsPerHost: *inflightMax, MaxConnsPerHost: *inflightMax, IdleConnTimeout: 90 * time.Second,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	pad := strings.Repeat("x", *size)
	last := make([]int64, *topics)
	var published, failures, retries, late int64
	ackHist := newHist()
	t0 := time.Now().Add(200 * time.Millisecond)
	end := t0.Add(time.Duration(*durationS * float64(time.Second)))
	perTopic := time.Duration(float64(*topics) / *rate * float64(time.Second)) // one topic's spacing
	offset := time.Duration(float64(time.Second) / *rate)                      // topic j starts j of these after t0
	publish := func(addr, topic string, seq int64) error {
		body := `{"specversion":"1.0","id":"` + topic + `-` + strconv.FormatInt(seq, 10) + `","source":"urn:bench:cluster","type":"bench.cluster",` +
			`"datacontenttype":"application/json","data":{"seq":` + strconv.FormatInt(seq, 10) + `,"t":` + strconv.FormatInt(time.Now().UnixNano(), 10) +
			`,"pad":"` + pad + `"}}`
		resp, err := client.Post("http://"+addr+"/v1/pubsub/"+topic, "application/cloudevents+json", strings.NewReader(body))
		if err != nil {
			return err
		}
		b, _ := ioutil.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"success":true`)) {
			return fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
		}
		return nil
	}
	stopTick := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopTick:
				return
			case <-t.C:
				emit(map[string]interface{}{"type": "tick", "t": time.Now().UnixNano() / 1e6, "published": atomic.LoadInt64(&published),
					"failures": atomic.LoadInt64(&failures), "late": atomic.LoadInt64(&late)})
			}
		}
	}()
	var wg sync.WaitGroup
	for j := 0; j < *topics; j++ {
		wg.Add(1)
		go func(j int) {
			defer wg.Done()
			topic := topicName(j)
			for seq := int64(1); ; seq++ {
				due := t0.Add(time.Duration(seq-1)*perTopic + time.Duration(j)*offset)
				if !due.Before(end) {
					return
				}
				if d := time.Until(due); d > 0 {
					time.Sleep(d)
				} else if d < -100*time.Millisecond {
					atomic.AddInt64(&late, 1)
				}
				// The topic's publishes go through one replica; on failure the same event is retried on the next.
				var err error
				p0 := time.Now()
				for try := 0; try < len(addrs)*2; try++ {
					if err = publish(addrs[(j+try)%len(addrs)], topic, seq); err == nil {
						break
					}
					atomic.AddInt64(&retries, 1)
					time.Sleep(50 * time.Millisecond)
				}
				if err != nil {
					atomic.AddInt64(&failures, 1)
					fmt.Fprintf(os.Stderr, "clusterload: publish %s %d: %v\n", topic, seq, err)
					continue
				}
				ackHist.add(int64(time.Since(p0) / time.Microsecond))
				atomic.StoreInt64(&last[j], seq)
				atomic.AddInt64(&published, 1)
			}
		}(j)
	}
	wg.Wait()
	close(stopTick)
	elapsed := time.Since(t0).Seconds()
	b, _ := json.Marshal(last)
	if err := ioutil.WriteFile(*out, b, 0o644); err != nil {
		die("write %s: %v", *out, err)
	}
	emit(map[string]interface{}{"type": "final", "published": published, "failures": failures, "retries": retries, "late": late,
		"elapsed_s": elapsed, "rate": float64(published) / elapsed, "ack_hist": ackHist.snapshot(), "hist_bucket_us": bucketUs})
}

func main() {
	flag.Parse()
	switch *mode {
	case "sub":
		runSub()
	case "pub":
		runPub()
	default:
		die("unknown mode %q", *mode)
	}
}

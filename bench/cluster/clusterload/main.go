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
// Output: JSON lines on stdout (`ready`, one `tick` a second, `final`). Every loop and wait is bounded. Built in GOPATH
// mode against Debian's golang-github-gorilla-websocket-dev.
package main

import (
	"bufio"
	"bytes"
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

	"github.com/gorilla/websocket"
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
	nLoops      = flag.Int("loops", 2, "sub: epoll loops (goroutines reading the sockets)")
	cpuProfile  = flag.String("cpuprofile", "", "sub: write a Go CPU profile of the run to this file")
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
	lastPos  string
	missing  map[int64]struct{}
	resubNs  int64 // wall clock of the last resubscribe: events published before it are replays
	acked    int32 // 1 once the first `subscribed` reply came
}

var (
	replicas                                      []string
	delivered, dups, ooo, lostOverflow, frameErrs int64
	reconnects, churnReconnects, failReconnects   int64
	recoveredTrue, recoveredFalse, abandoned      int64
	dialFailures, replayed                        int64
	liveHist, replayHist                          = newHist(), newHist()
	frameSeq, frameT, frameID, framePos, frameRec = []byte(`"seq":`), []byte(`"t":`), []byte(`"id":"`), []byte(`"position":"`), []byte(`"recovered":`)
	opEvent, opSubscribed, opError                = []byte(`"op":"event"`), []byte(`"op":"subscribed"`), []byte(`"op":"error"`)
	errorsLogged                                  int64
	stopping                                      int32
	loopsDone                                     sync.WaitGroup
)

func intAfter(b, key []byte) (int64, bool) {
	i := bytes.Index(b, key)
	if i < 0 {
		return 0, false
	}
	j := i + len(key)
	k := j
	for k < len(b) && b[k] >= '0' && b[k] <= '9' {
		k++
	}
	v, err := strconv.ParseInt(string(b[j:k]), 10, 64)
	return v, err == nil
}

func strAfter(b, key []byte) (string, bool) {
	i := bytes.Index(b, key)
	if i < 0 {
		return "", false
	}
	j := i + len(key)
	k := bytes.IndexByte(b[j:], '"')
	if k < 0 {
		return "", false
	}
	return string(b[j : j+k]), true
}

// onFrame handles one frame of subscriber s (called only from the loop that holds s's socket).
func (s *sub) onFrame(b []byte) {
	if bytes.Contains(b, opEvent) {
		now := time.Now().UnixNano()
		seq, ok1 := intAfter(b, frameSeq)
		t, ok2 := intAfter(b, frameT)
		pos, ok3 := strAfter(b, frameID) // the frame's own id precedes the cloudevent's
		if !ok1 || !ok2 || !ok3 {
			atomic.AddInt64(&frameErrs, 1)
			return
		}
		atomic.AddInt64(&delivered, 1)
		s.lastPos = pos
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
		atomic.StoreInt32(&s.acked, 1)
		if pos, ok := strAfter(b, framePos); ok && s.lastPos == "" {
			s.lastPos = pos
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

var dialer = websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 2048, WriteBufferSize: 512}

// connect dials replica r with gorilla (the HTTP upgrade), sends the subscribe frame (with since when s has a
// position), then takes the socket over: a dup of its fd goes to s's epoll loop and gorilla's conn is closed (the
// socket stays open through the dup). From then on the loop reads the frames; the `subscribed` reply and any replay
// are frames like the others.
func (s *sub) connect(r int) error {
	c, _, err := dialer.Dial("ws://"+replicas[r]+"/v1/pubsub/ws", nil)
	if err != nil {
		return err
	}
	msg := `{"op":"subscribe","topics":["` + topicName(s.topic) + `"]`
	if s.lastPos != "" && *resume {
		msg += `,"since":"` + s.lastPos + `"`
	}
	msg += "}"
	atomic.StoreInt64(&s.resubNs, time.Now().UnixNano())
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		c.Close()
		return err
	}
	rc, err := c.UnderlyingConn().(*net.TCPConn).SyscallConn()
	if err != nil {
		c.Close()
		return err
	}
	fd := -1
	var dupErr error
	rc.Control(func(f uintptr) { fd, dupErr = syscall.Dup(int(f)) })
	c.Close()
	if dupErr != nil {
		return dupErr
	}
	s.replica = r
	s.mu.Lock()
	s.fd = fd
	s.mu.Unlock()
	s.buf = s.buf[:0]
	atomic.StoreInt32(&s.live, 1)
	if err := s.loop.add(s); err != nil {
		atomic.StoreInt32(&s.live, 0)
		s.mu.Lock()
		syscall.Close(fd)
		s.fd = -1
		s.mu.Unlock()
		return err
	}
	return nil
}

// reconnect dials a random other replica (so a resume crosses replicas), and after a failed dial a random replica
// other than the one that failed, until one takes the subscriber (bounded: 40 tries, 50 ms apart).
func (s *sub) reconnect(rng *rand.Rand) bool {
	avoid := s.replica
	for try := 0; try < 40; try++ {
		r := rng.Intn(len(replicas))
		if r == avoid && len(replicas) > 1 {
			r = (r + 1 + rng.Intn(len(replicas)-1)) % len(replicas)
		}
		if err := s.connect(r); err == nil {
			return true
		}
		avoid = r
		atomic.AddInt64(&dialFailures, 1)
		time.Sleep(50 * time.Millisecond)
	}
	return false
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

func (l *loop) add(s *sub) error {
	if s.fd >= len(l.subs) {
		return fmt.Errorf("fd %d past the table", s.fd)
	}
	l.mu.Lock()
	l.subs[s.fd] = s
	l.mu.Unlock()
	return syscall.EpollCtl(l.efd, syscall.EPOLL_CTL_ADD, s.fd, &syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(s.fd)})
}

// drop takes s's socket out of the loop and closes it; s goes to the reconnectors unless the run is stopping.
func (l *loop) drop(s *sub, gone chan<- *sub) {
	syscall.EpollCtl(l.efd, syscall.EPOLL_CTL_DEL, s.fd, nil)
	l.mu.Lock()
	l.subs[s.fd] = nil
	l.mu.Unlock()
	atomic.StoreInt32(&s.live, 0)
	s.mu.Lock()
	syscall.Close(s.fd)
	s.fd = -1
	s.mu.Unlock()
	if atomic.LoadInt32(&stopping) == 0 {
		gone <- s
	}
}

func (l *loop) run(gone chan<- *sub, done *sync.WaitGroup) {
	defer done.Done()
	events := make([]syscall.EpollEvent, 256)
	rbuf := make([]byte, 64<<10)
	for atomic.LoadInt32(&stopping) == 0 {
		n, err := syscall.EpollWait(l.efd, events, 100)
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
			k, err := syscall.Read(fd, rbuf)
			if err == syscall.EAGAIN {
				continue
			}
			if k <= 0 || err != nil {
				l.drop(s, gone)
				continue
			}
			if !s.frames(rbuf[:k]) {
				l.drop(s, gone)
			}
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
	// Reconnectors: a subscriber whose socket ended (churn or a dead replica) dials a random other replica and
	// resumes with since.
	for w := 0; w < *dialPar; w++ {
		go func(w int) {
			rng := rand.New(rand.NewSource(int64(*first + w)))
			for s := range gone {
				if atomic.SwapInt32(&s.churning, 0) == 1 {
					atomic.AddInt64(&churnReconnects, 1)
				} else {
					atomic.AddInt64(&failReconnects, 1)
				}
				atomic.AddInt64(&reconnects, 1)
				if atomic.LoadInt32(&stopping) == 0 && !s.reconnect(rng) {
					atomic.AddInt64(&abandoned, 1)
				}
			}
		}(w)
	}
	t0 := time.Now()
	var next int64 = -1
	var failed int64
	var wg sync.WaitGroup
	for w := 0; w < *dialPar; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(atomic.AddInt64(&next, 1))
				if i >= len(all) || time.Since(t0) > time.Duration(*setupS*float64(time.Second)) {
					return
				}
				s := all[i]
				var err error
				for try := 0; try < 5; try++ {
					if err = s.connect(s.replica); err == nil {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				if err != nil {
					atomic.AddInt64(&failed, 1)
					if failed <= 5 {
						fmt.Fprintf(os.Stderr, "clusterload: sub %d: %v\n", s.gi, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	// Every subscriber has its `subscribed` reply (or the bound passed).
	want := int64(len(all)) - failed
	deadline := time.Now().Add(60 * time.Second)
	for countSubscribed(all) < want {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
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
		emit(map[string]interface{}{"type": "tick", "t": time.Now().UnixNano() / 1e6, "delivered": d, "delivered_1s": d - prev,
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
				syscall.Shutdown(s.fd, syscall.SHUT_RDWR) // the loop sees the end and hands s to a reconnector
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
		"hist_bucket_us": bucketUs})
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

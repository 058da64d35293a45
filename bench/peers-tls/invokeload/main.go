// invokeload (TLS): a copy of ../shared/peers/go/invokeload with TLS client options: -ca names a PEM CA file to
// trust and -tls the paths that dial TLS (gRPC paths with ALPN h2, REST paths as HTTPS over HTTP/1.1 keep-alive, as the
// plaintext REST paths use HTTP/1.1; the gateway's uWS port speaks no HTTP/2). The server name checked is the host of
// the address (127.0.0.1: the certificate needs that IP in its subjectAltName). Added paths gwgrpc2 and gwrest2: the
// same calls on a second gateway (another build, -pid-gw2), for bench/peers/compare.py's side-by-side invoke job.
// Everything else is unchanged.
//
// The original's description follows.
//
// invokeload: closed-loop unary load on several paths to the same Go backend method, interleaved in blocks so that a
// noisy neighbour hits every path alike. Each round runs one block of -calls calls at -conc concurrency on every path
// (the order rotates per round); per block it reads /proc/<pid>/stat of the proxy on that path, of the backend and of
// itself. Paths (each -NAME flag is host:port; leave empty to skip):
//
//	direct    gRPC PutItem straight to the backend (pre-encoded request bytes)
//	passthru  the same gRPC call through a pass-through proxy
//	gwgrpc    platform.Gateway/InvokeJson with the PutItem request as proto3 JSON
//	gwrest    REST POST /v1/gateway/invoke-json on the gateway
//	grpcgw    REST POST /v1/items on a grpc-gateway proxy (body: the PutItemRequest JSON)
//
// Output: one JSON object on stdout with a figure set per path.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io/ioutil"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	inv "acme/inventory/v1"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

var (
	directAddr   = flag.String("direct", "", "backend host:port")
	passthruAddr = flag.String("passthru", "", "pass-through proxy host:port")
	gwGrpcAddr   = flag.String("gwgrpc", "", "gateway gRPC host:port")
	gwRestAddr   = flag.String("gwrest", "", "gateway REST host:port")
	grpcgwAddr   = flag.String("grpcgw", "", "grpc-gateway host:port")
	gwProxyAddr  = flag.String("gwproxy", "", "gateway gRPC host:port, PutItem through its transparent proxy")
	nginxAddr    = flag.String("nginx", "", "nginx grpc_pass host:port")
	gwRest1Addr  = flag.String("gwrest1", "", "a second gateway's REST host:port (e.g. started with --threads 1)")
	pidGw1       = flag.Int("pid-gw1", 0, "")
	gwGrpc2Addr  = flag.String("gwgrpc2", "", "a second gateway build's gRPC host:port (InvokeJson; bench/peers/compare.py, side by side)")
	gwRest2Addr  = flag.String("gwrest2", "", "a second gateway build's REST host:port (invoke-json)")
	pidGw2       = flag.Int("pid-gw2", 0, "")
	pidNginx     = flag.Int("pid-nginx", 0, "")
	readyS       = flag.Float64("ready-timeout-s", 20, "gwproxy: retry the first call this long (routes appear when the backend schema loads)")
	pidPassthru  = flag.Int("pid-passthru", 0, "")
	pidGw        = flag.Int("pid-gw", 0, "")
	pidGrpcgw    = flag.Int("pid-grpcgw", 0, "")
	pidBackend   = flag.Int("pid-backend", 0, "")
	service      = flag.String("service", "inventory", "gateway service name")
	conc         = flag.Int("conc", 1, "concurrency (closed loop)")
	calls        = flag.Int("calls", 500, "calls per block")
	rounds       = flag.Int("rounds", 4, "rounds (one block per path each)")
	warmCalls    = flag.Int("warm", 300, "warm-up calls per path")
	jsonBytes    = flag.Int("json-bytes", 1024, "size of the PutItemRequest as proto3 JSON")
	blockTimeout = flag.Float64("block-timeout-s", 120, "bound on one block")
	label        = flag.String("label", "", "")
	caFile       = flag.String("ca", "", "PEM file of the CA that signed the servers' certificates (for -tls paths)")
	tlsPaths     = flag.String("tls", "", "comma-separated path names that dial TLS, e.g. gwgrpc,gwrest,grpcgw")
)

type rawCodec struct{}

func (rawCodec) Marshal(v interface{}) ([]byte, error) {
	switch b := v.(type) {
	case []byte:
		return b, nil
	case *[]byte:
		return *b, nil
	}
	return nil, fmt.Errorf("raw codec: %T", v)
}
func (rawCodec) Unmarshal(data []byte, v interface{}) error {
	p := v.(*[]byte)
	*p = append((*p)[:0], data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

func cpuUs(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	b, err := ioutil.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) * 1e6 / 100
}

// request builds a PutItemRequest whose proto3 JSON is about n bytes.
func request(n int) *inv.PutItemRequest {
	attrs, _ := structpb.NewStruct(map[string]interface{}{"color": "red", "fragile": true, "weight": 1.5})
	lvl := int32(3)
	it := &inv.Item{
		Sku: "BENCH-1", DisplayName: "Bench claw hammer", Quantity: 9007199254740993, Serial: 18446744073709551615,
		Kind: inv.Kind_KIND_TOOL, StockBySite: map[string]int64{"north": 12, "south": 0, "east": 7},
		Dims: &inv.Dimensions{Width: 3.5, Height: 30}, Price: &inv.Item_Cents{Cents: 1299},
		UpdatedAt: timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 600000000, time.UTC)),
		LeadTime:  durationpb.New(90 * time.Second), Attrs: attrs, Blob: []byte{0, 1, 2, 250, 255},
		Note: wrapperspb.String("handle replaced"), ReorderLevel: &lvl,
	}
	r := &inv.PutItemRequest{Item: it}
	for i := 0; ; i++ {
		b, _ := protojson.Marshal(r)
		if len(b) >= n {
			return r
		}
		it.Tags = append(it.Tags, fmt.Sprintf("tag-%03d", i))
	}
}

type path struct {
	name     string
	pid      int
	call     func(ctx context.Context) error
	lat      []float64
	busy     float64 // seconds
	n        int
	errs     int
	proxy    float64 // us
	client   float64
	back     float64
	firstErr string
	proto    atomic.Value // REST: the protocol and TLS version of a response, e.g. "HTTP/1.1 TLS1.3"
}

// monoUs is CLOCK_MONOTONIC in microseconds (the clock of V8's .cpuprofile timestamps).
func monoUs() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Sec*1e6 + ts.Nsec/1e3
}

func pbString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// invokeOK reads InvokeResponse.success (field 1) and message (field 3).
func invokeOK(b []byte) (bool, string) {
	ok, msg := false, ""
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false, "bad response"
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			ok, b = v == 1, b[m:]
		case num == 3 && typ == protowire.BytesType:
			v, m := protowire.ConsumeString(b)
			msg, b = v, b[m:]
		default:
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return false, "bad response"
			}
			b = b[m:]
		}
	}
	return ok, msg
}

func main() {
	flag.Parse()
	req := request(*jsonBytes)
	bin, _ := proto.Marshal(req)
	js, _ := protojson.Marshal(req)
	var invReq []byte
	invReq = pbString(invReq, 1, *service)
	invReq = pbString(invReq, 2, "PutItem")
	invReq = pbString(invReq, 3, string(js))
	restBody, _ := json.Marshal(map[string]string{"service": *service, "method": "PutItem", "request_data": string(js)})

	useTLS := map[string]bool{}
	for _, n := range strings.Split(*tlsPaths, ",") {
		if n != "" {
			useTLS[n] = true
		}
	}
	var tlsConf *tls.Config
	if len(useTLS) > 0 {
		pem, err := ioutil.ReadFile(*caFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "invokeload: -tls needs -ca:", err)
			os.Exit(1)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			fmt.Fprintln(os.Stderr, "invokeload: no certificate in", *caFile)
			os.Exit(1)
		}
		tlsConf = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	dialOpts := []grpc.DialOption{grpc.WithInsecure(), grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}))}
	tlsDialOpts := dialOpts
	if tlsConf != nil {
		tlsDialOpts = []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tlsConf.Clone())), grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}))}
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	hc := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	// HTTPS client: its own pool of connections; a TLSClientConfig with a custom DialContext keeps Go on HTTP/1.1.
	tlsTr := tr.Clone()
	tlsTr.TLSClientConfig = tlsConf
	hcTLS := &http.Client{Transport: tlsTr, Timeout: 60 * time.Second}

	var paths []*path
	grpcPath := func(name, addr string, pid int, method string, body []byte, check func([]byte) error) {
		opts := dialOpts
		if useTLS[name] {
			opts = tlsDialOpts
		}
		cc, err := grpc.Dial(addr, opts...)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		paths = append(paths, &path{name: name, pid: pid, call: func(ctx context.Context) error {
			var resp []byte
			if err := cc.Invoke(ctx, method, body, &resp); err != nil {
				return err
			}
			return check(resp)
		}})
	}
	restPath := func(name, url string, pid int, body []byte, check func(int, []byte) error) {
		client := hc
		if useTLS[name] {
			client = hcTLS
			url = "https://" + strings.TrimPrefix(url, "http://")
		}
		p := &path{name: name, pid: pid}
		paths = append(paths, p)
		p.call = func(ctx context.Context) error {
			r, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
			if err != nil {
				return err
			}
			r.Header.Set("content-type", "application/json")
			resp, err := client.Do(r)
			if err != nil {
				return err
			}
			b, err := ioutil.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			if p.proto.Load() == nil {
				v := resp.Proto
				if resp.TLS != nil {
					v += " " + map[uint16]string{tls.VersionTLS12: "TLS1.2", tls.VersionTLS13: "TLS1.3"}[resp.TLS.Version]
				}
				p.proto.Store(v)
			}
			return check(resp.StatusCode, b)
		}
	}
	nonEmpty := func(b []byte) error {
		if len(b) < 16 {
			return fmt.Errorf("short response %d bytes", len(b))
		}
		return nil
	}
	if *directAddr != "" {
		grpcPath("direct", *directAddr, 0, "/acme.inventory.v1.Inventory/PutItem", bin, nonEmpty)
	}
	if *passthruAddr != "" {
		grpcPath("passthru", *passthruAddr, *pidPassthru, "/acme.inventory.v1.Inventory/PutItem", bin, nonEmpty)
	}
	if *gwProxyAddr != "" {
		grpcPath("gwproxy", *gwProxyAddr, *pidGw, "/acme.inventory.v1.Inventory/PutItem", bin, nonEmpty)
	}
	if *nginxAddr != "" {
		grpcPath("nginx", *nginxAddr, *pidNginx, "/acme.inventory.v1.Inventory/PutItem", bin, nonEmpty)
	}
	if *gwGrpcAddr != "" {
		grpcPath("gwgrpc", *gwGrpcAddr, *pidGw, "/platform.Gateway/InvokeJson", invReq, func(b []byte) error {
			if ok, msg := invokeOK(b); !ok {
				return fmt.Errorf("InvokeJson failed: %s", msg)
			}
			return nil
		})
	}
	if *gwRestAddr != "" {
		restPath("gwrest", "http://"+*gwRestAddr+"/v1/gateway/invoke-json", *pidGw, restBody, func(code int, b []byte) error {
			if code != 200 || !bytes.Contains(b, []byte(`"success":true`)) {
				return fmt.Errorf("invoke-json %d: %.200s", code, b)
			}
			return nil
		})
	}
	if *gwGrpc2Addr != "" {
		grpcPath("gwgrpc2", *gwGrpc2Addr, *pidGw2, "/platform.Gateway/InvokeJson", invReq, func(b []byte) error {
			if ok, msg := invokeOK(b); !ok {
				return fmt.Errorf("InvokeJson failed: %s", msg)
			}
			return nil
		})
	}
	if *gwRest2Addr != "" {
		restPath("gwrest2", "http://"+*gwRest2Addr+"/v1/gateway/invoke-json", *pidGw2, restBody, func(code int, b []byte) error {
			if code != 200 || !bytes.Contains(b, []byte(`"success":true`)) {
				return fmt.Errorf("invoke-json %d: %.200s", code, b)
			}
			return nil
		})
	}
	if *gwRest1Addr != "" {
		restPath("gwrest1", "http://"+*gwRest1Addr+"/v1/gateway/invoke-json", *pidGw1, restBody, func(code int, b []byte) error {
			if code != 200 || !bytes.Contains(b, []byte(`"success":true`)) {
				return fmt.Errorf("invoke-json %d: %.200s", code, b)
			}
			return nil
		})
	}
	if *grpcgwAddr != "" {
		restPath("grpcgw", "http://"+*grpcgwAddr+"/v1/items", *pidGrpcgw, js, func(code int, b []byte) error {
			if code != 200 || len(b) < 16 {
				return fmt.Errorf("grpc-gateway %d: %.200s", code, b)
			}
			return nil
		})
	}

	// Check once that every path returns the same item, then warm up.
	ctx := context.Background()
	for _, p := range paths {
		if p.name == "gwproxy" {
			deadline := time.Now().Add(time.Duration(*readyS * float64(time.Second)))
			for {
				err := p.call(ctx)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					fmt.Fprintf(os.Stderr, "invokeload: gwproxy not ready: %v\n", err)
					os.Exit(1)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		for i := 0; i < *warmCalls; i++ {
			if err := p.call(ctx); err != nil {
				fmt.Fprintf(os.Stderr, "invokeload: %s warm-up: %v\n", p.name, err)
				os.Exit(1)
			}
		}
	}

	self := os.Getpid()
	mono0 := monoUs()
	for r := 0; r < *rounds; r++ {
		for k := range paths {
			p := paths[(k+r)%len(paths)]
			var next int64 = -1
			var wg sync.WaitGroup
			lats := make([][]float64, *conc)
			errs := make([]int, *conc)
			firstErr := make([]string, *conc)
			bctx, cancel := context.WithTimeout(ctx, time.Duration(*blockTimeout*float64(time.Second)))
			px0, c0, b0 := cpuUs(p.pid), cpuUs(self), cpuUs(*pidBackend)
			t0 := time.Now()
			for w := 0; w < *conc; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for atomic.AddInt64(&next, 1) < int64(*calls) && bctx.Err() == nil {
						s := time.Now()
						if err := p.call(bctx); err != nil {
							errs[w]++
							if firstErr[w] == "" {
								firstErr[w] = err.Error()
							}
							continue
						}
						lats[w] = append(lats[w], float64(time.Since(s).Microseconds()))
					}
				}(w)
			}
			wg.Wait()
			busy := time.Since(t0).Seconds()
			px1, c1, b1 := cpuUs(p.pid), cpuUs(self), cpuUs(*pidBackend)
			cancel()
			for w := 0; w < *conc; w++ {
				p.lat = append(p.lat, lats[w]...)
				p.n += len(lats[w])
				p.errs += errs[w]
				if p.firstErr == "" {
					p.firstErr = firstErr[w]
				}
			}
			p.busy += busy
			if p.pid > 0 {
				p.proxy += px1 - px0
			}
			p.client += c1 - c0
			p.back += b1 - b0
		}
	}

	q := func(s []float64, f float64) float64 {
		if len(s) == 0 {
			return -1
		}
		i := int(f * float64(len(s)))
		if i >= len(s) {
			i = len(s) - 1
		}
		return s[i]
	}
	res := map[string]interface{}{}
	for _, p := range paths {
		sort.Float64s(p.lat)
		mean := 0.0
		for _, v := range p.lat {
			mean += v
		}
		if len(p.lat) > 0 {
			mean /= float64(len(p.lat))
		}
		n := float64(p.n)
		if n == 0 {
			n = 1
		}
		proto, _ := p.proto.Load().(string)
		res[p.name] = map[string]interface{}{
			"http_proto": proto,
			"calls":      p.n, "errors": p.errs, "first_error": p.firstErr, "tls": useTLS[p.name],
			"p50_us": q(p.lat, 0.5), "p99_us": q(p.lat, 0.99), "mean_us": mean,
			"rps":                     float64(p.n) / p.busy,
			"proxy_cpu_us_per_call":   p.proxy / n,
			"client_cpu_us_per_call":  p.client / n,
			"backend_cpu_us_per_call": p.back / n,
		}
	}
	mono1 := monoUs()
	load, _ := ioutil.ReadFile("/proc/loadavg")
	json.NewEncoder(os.Stdout).Encode(map[string]interface{}{
		"mono_start_us": mono0, "mono_end_us": mono1,
		"label": *label, "conc": *conc, "calls_per_block": *calls, "rounds": *rounds,
		"request_json_bytes": len(js), "request_binary_bytes": len(bin), "gateway_rest_body_bytes": len(restBody),
		"paths": res, "loadavg_end": strings.TrimSpace(string(load)),
	})
}

// A Go gRPC client (grpc-go from Debian's packages, GOPATH mode) calling the gateway's gRPC port over TLS, for
// scripts/go-tls-check.sh: one unary call, platform.Config/ListServices, with raw bytes (no generated stubs), and an
// optional client certificate for mutual TLS. Prints one line and exits 0 when the outcome is the one -expect names.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io/ioutil"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

// rawCodec passes message bytes through: the request is empty, the reply is only counted.
type rawCodec struct{}

func (rawCodec) Marshal(v interface{}) ([]byte, error)      { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v interface{}) error { *(v.(*[]byte)) = append([]byte(nil), data...); return nil }
func (rawCodec) Name() string                               { return "proto" }

func main() {
	addr := flag.String("addr", "127.0.0.1:5000", "gateway gRPC address")
	caFile := flag.String("ca", "", "PEM CA the gateway's certificate chains to")
	certFile := flag.String("cert", "", "PEM client certificate (mutual TLS)")
	keyFile := flag.String("key", "", "PEM client key")
	serverName := flag.String("server-name", "localhost", "name the gateway's certificate must carry")
	apiKey := flag.String("api-key", "", "x-api-key")
	expect := flag.String("expect", "ok", "ok | fail")
	flag.Parse()

	pem, err := ioutil.ReadFile(*caFile)
	if err != nil {
		fmt.Println("cannot read -ca:", err)
		os.Exit(2)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		fmt.Println("-ca holds no PEM certificate")
		os.Exit(2)
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: *serverName, MinVersion: tls.VersionTLS12}
	if *certFile != "" {
		pair, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			fmt.Println("cannot load -cert/-key:", err)
			os.Exit(2)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := grpc.DialContext(ctx, *addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		fmt.Println("dial:", err)
		os.Exit(2)
	}
	defer conn.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-api-key", *apiKey)
	in, out := []byte{}, []byte{}
	err = conn.Invoke(ctx, "/platform.Config/ListServices", &in, &out, grpc.ForceCodec(rawCodec{}), grpc.WaitForReady(false))
	got := "ok"
	if err != nil {
		got = "fail"
	}
	fmt.Printf("go client (grpc-go %s): %s (%v, %d reply bytes)\n", grpc.Version, got, err, len(out))
	if got != *expect {
		os.Exit(1)
	}
}

// grpcgwproxy (TLS): a copy of ../shared/peers/go/grpcgwproxy that serves HTTPS itself when given -tls-cert and
// -tls-key (net/http's ServeTLS: TLS 1.2+, ALPN h2 and http/1.1; the load client uses HTTP/1.1), the way the gateway
// terminates TLS itself. The backend is dialled in cleartext, as the gateway dials it in the comparison.
//
// The original's description: the REST->gRPC proxy that grpc-gateway 1.6 (Debian) generates for
// acme.inventory.v1.Inventory (HTTP rules in ../shared/peers/go/grpcgwproxy/grpcgw-api.yaml: POST /v1/items ->
// PutItem, GET /v1/items/{sku} -> GetItem), on net/http. Prints {"port": n} once listening.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"log"
	"net"
	"net/http"
	"os"

	inv "acme/inventory/v1"

	"github.com/grpc-ecosystem/grpc-gateway/runtime"
	"google.golang.org/grpc"
)

func main() {
	backend := flag.String("backend", "127.0.0.1:50061", "backend host:port")
	certFile := flag.String("tls-cert", "", "PEM certificate: serve HTTPS (with -tls-key)")
	keyFile := flag.String("tls-key", "", "PEM private key of -tls-cert")
	flag.Parse()
	ctx := context.Background()
	mux := runtime.NewServeMux()
	if err := inv.RegisterInventoryHandlerFromEndpoint(ctx, mux, *backend, []grpc.DialOption{grpc.WithInsecure()}); err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	tlsOn := *certFile != "" && *keyFile != ""
	json.NewEncoder(os.Stdout).Encode(map[string]interface{}{"port": lis.Addr().(*net.TCPAddr).Port, "tls": tlsOn})
	if tlsOn {
		srv := &http.Server{Handler: mux, TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12}}
		log.Fatal(srv.ServeTLS(lis, *certFile, *keyFile))
	}
	log.Fatal(http.Serve(lis, mux))
}

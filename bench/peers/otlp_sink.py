#!/usr/bin/env python3
"""An OTLP/HTTP receiver for benchmarks: it reads every export request whole and answers 200, as a collector does, and
keeps nothing but counts. The OpenTelemetry exporter sends its body with `Transfer-Encoding: chunked` (it pipes a
stream into the request), so the body is read by its chunks when it has no Content-Length; a receiver that read
Content-Length only would answer before the body, then parse the body as the next request and drop the connection,
and every export would fail and reconnect.

  python3 otlp_sink.py            # prints its port, then serves until killed; SIGTERM prints the counts as JSON

In process: `start()` returns the server (its `counts`: requests, bytes, bad)."""
import http.server
import json
import signal
import sys
import threading


def read_body(rfile, headers):
    """The request body, whole: by its chunks, or by Content-Length."""
    if "chunked" in (headers.get("transfer-encoding") or "").lower():
        parts = []
        for _ in range(1 << 20):  # chunks per request, bounded
            size = int(rfile.readline(1024).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while rfile.readline(1024) not in (b"\r\n", b"\n", b""):  # trailer fields, then the blank line
                    pass
                break
            parts.append(rfile.read(size))
            rfile.readline(1024)
        return b"".join(parts)
    return rfile.read(int(headers.get("content-length") or 0))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a collector does

    def do_POST(self):
        counts = self.server.counts
        try:
            body = read_body(self.rfile, self.headers)
        except ValueError:
            counts["bad"] += 1
            self.send_error(400)
            return
        counts["requests"] += 1
        counts["bytes"] += len(body)
        self.send_response(200)
        self.send_header("content-type", self.headers.get("content-type") or "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


def start():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.counts = {"requests": 0, "bytes": 0, "bad": 0}
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


if __name__ == "__main__":
    s = start()
    print(s.server_address[1], flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()
    print(json.dumps(s.counts), flush=True)
    sys.exit(0)

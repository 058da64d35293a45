import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import { startTestGateway, type TestGateway } from "../support/gateway.js";

const KEY = "k1";

/** A raw HTTP/2 session to the gateway's gRPC port, once its SETTINGS arrived. */
async function connect(gw: TestGateway): Promise<http2.ClientHttp2Session> {
  const s = http2.connect(`http://${gw.grpcAddress}`);
  s.on("error", () => undefined);
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error("no remote SETTINGS within 5 s")), 5000);
    s.once("remoteSettings", () => {
      clearTimeout(t);
      resolve();
    });
  });
  return s;
}

/** Open a gRPC unary stream with headers only: the request message is never sent. */
function headersOnly(s: http2.ClientHttp2Session, path = "/platform.Config/ListServices"): http2.ClientHttp2Stream {
  const st = s.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", "x-api-key": KEY }, { endStream: false });
  st.on("error", () => undefined);
  return st;
}

describe("gRPC HTTP/2 limits", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ apiKeys: [KEY], grpcMaxConcurrentStreams: 16, grpcMessageTimeoutMs: 300 });
  });
  after(async () => {
    await gw.close();
  });

  it("advertises the configured maxConcurrentStreams instead of 2^32-1", async () => {
    const s = await connect(gw);
    try {
      assert.equal(s.remoteSettings.maxConcurrentStreams, 16);
    } finally {
      s.destroy();
    }
  });

  it("ends a unary call whose request message never arrives with DEADLINE_EXCEEDED, freeing the stream", async () => {
    const s = await connect(gw);
    try {
      const started = Date.now();
      const streams = Array.from({ length: 16 }, () => headersOnly(s));
      const trailers = await Promise.all(
        streams.map(
          (st) =>
            new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
              const t = setTimeout(() => reject(new Error("the stream was not ended within 3 s")), 3000);
              const done = (h: http2.IncomingHttpHeaders): void => {
                clearTimeout(t);
                resolve(h);
              };
              st.on("response", (h) => h["grpc-status"] !== undefined && done(h)); // trailers-only reply
              st.on("trailers", done);
              st.resume();
            }),
        ),
      );
      const elapsed = Date.now() - started;
      for (const h of trailers) {
        assert.equal(h["grpc-status"], "4");
        assert.match(decodeURIComponent(String(h["grpc-message"])), /request message did not arrive within 300 ms/);
      }
      assert.ok(elapsed >= 250, `ended after ${elapsed} ms, before the timeout`);
      // Our side of each stream is still open (we never sent END_STREAM); close it as a client would after the status.
      for (const st of streams) st.close();
      // The slots are free again: a complete call on the same connection is answered (empty ListServices request).
      const st = s.request({ ":method": "POST", ":path": "/platform.Config/ListServices", "content-type": "application/grpc", te: "trailers", "x-api-key": KEY });
      st.end(Buffer.from([0, 0, 0, 0, 0]));
      const status = await new Promise<string>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error("no answer within 3 s")), 3000);
        st.on("trailers", (h) => {
          clearTimeout(t);
          resolve(String(h["grpc-status"]));
        });
        st.resume();
      });
      assert.equal(status, "0");
      const metrics = await (await fetch(`${gw.http}/metrics`)).text();
      assert.match(metrics, /platform_grpc_requests_total\{method="platform\.Config\/ListServices",code="DEADLINE_EXCEEDED"\} 16/);
    } finally {
      s.destroy();
    }
  });
});

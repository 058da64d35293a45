/**
 * The `method` label of the REST request metrics is bounded: a method outside GET, HEAD, POST, PUT, PATCH, DELETE and
 * OPTIONS is counted as OTHER, so an unauthenticated client sending made-up methods to an unknown path cannot add a
 * permanent series per method. uWebSockets.js 20.30 closes the connection of a method token it does not know before
 * any handler runs (asserted below as what happens today); CONNECT and TRACE it does pass on.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect } from "node:net";
import { startTestGateway, type TestGateway } from "../support/gateway.js";

/** Send one request on its own connection; resolve with what came back before the server closed or `ms` passed. */
function raw(port: number, request: string, ms = 1500): Promise<string> {
  return new Promise((resolve) => {
    const sock = connect(port, "127.0.0.1");
    let data = "";
    sock.on("data", (d) => {
      data += d.toString();
      if (/\r\n\r\n[\s\S]*\}$/.test(data)) sock.destroy();
    });
    sock.on("error", () => resolve(data));
    sock.on("close", () => resolve(data));
    sock.write(request);
    setTimeout(() => sock.destroy(), ms).unref();
  });
}

/** The `method` label values of a metric's series in a Prometheus text exposition, with each series' line. */
function methodSeries(text: string, metric: string): Array<{ method: string; line: string }> {
  return text
    .split("\n")
    .filter((l) => l.startsWith(`${metric}{`))
    .map((line) => ({ method: /method="([^"]*)"/.exec(line)?.[1] ?? "", line }));
}

const KNOWN = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

describe("REST request metrics: the method label is bounded", () => {
  let gw: TestGateway;
  let port: number;
  before(async () => {
    gw = await startTestGateway({});
    port = gw.gateway.httpPort;
  });
  after(() => gw.close());

  it("50 made-up methods and CONNECT/TRACE on an unknown path make one OTHER series, never one per method", async () => {
    const made = Array.from({ length: 50 }, (_, i) => `M${i}X`);
    let answered = 0;
    for (const m of made) {
      const reply = await raw(port, `${m} /nope HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
      if (reply.startsWith("HTTP/1.1 ")) answered++;
    }
    // What uWS 20.30 does with a token it does not know: the connection closes with no reply, no handler runs.
    assert.equal(answered, 0, "uWS closed every made-up method's connection (if it ever passes them on, they must count as OTHER)");
    for (const m of ["CONNECT", "TRACE", "CONNECT"]) {
      const reply = await raw(port, `${m} /nope HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
      assert.match(reply, /^HTTP\/1\.1 404 /, m);
      answered++;
    }
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    for (const metric of ["platform_http_requests_total", "platform_http_request_duration_seconds_count"]) {
      const series = methodSeries(text, metric);
      const unknown = series.filter((s) => !KNOWN.has(s.method) && s.method !== "OTHER");
      assert.deepEqual(unknown, [], `${metric}: only known methods and OTHER`);
      const other = series.filter((s) => s.method === "OTHER");
      assert.equal(other.length, 1, `${metric}: one OTHER series\n${other.map((s) => s.line).join("\n")}`);
      assert.match(other[0]!.line, /route="unmatched"/);
      assert.match(other[0]!.line, /status="404"/);
      assert.equal(Number(other[0]!.line.split(" ").pop()), answered, `${metric}: every answered request counted`);
    }
  });

  it("known methods keep their own label", async () => {
    await fetch(`http://127.0.0.1:${port}/nope`, { method: "PATCH" });
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    assert.ok(methodSeries(text, "platform_http_requests_total").some((s) => s.method === "PATCH" && /route="unmatched"/.test(s.line)));
  });
});

/**
 * Attack classes above the HTTP/2 layer: REST clients that never read a large reply, a 9 MiB
 * WebSocket frame, and a gRPC Subscribe naming 100,000 topics; each against a fresh gateway child with the harness's
 * well-behaved gRPC client measuring on another connection (harness.ts). Run by .ci/run with the HTTP/2 classes.
 */
import assert from "node:assert/strict";
import net from "node:net";
import { after, describe, it } from "node:test";
import WebSocket from "ws";
import { METHODS } from "../fuzz/inputs.js";
import { F, RawH2, T, grpcFrame, grpcRequestFields, headerBlock, rawFrame, readUnary } from "../support/h2-raw-unary.js";
import { AttackRun, MIB, within } from "./harness.js";

const runs: AttackRun[] = [];
after(async () => {
  for (const r of runs) await r.stop().catch(() => undefined);
});

async function start(args: string[] = []): Promise<AttackRun> {
  const r = await AttackRun.start(["--shutdown-timeout", "1000", ...args]);
  runs.push(r);
  return r;
}

async function finish(r: AttackRun): Promise<void> {
  runs.splice(runs.indexOf(r), 1);
  await r.stop();
}

describe("attack classes: REST, WebSocket and gRPC calls", { concurrency: 1, timeout: 600_000 }, () => {
  it("REST: 40 clients ask for a 7.5 MiB reply and never read it (RSS +256 MiB, under one whole reply per client)", async () => {
    // The default config/gateway.yaml's service "platform" has a state store: three 2.5 MiB values make the query
    // page about 7.5 MiB, more than the kernel's socket buffers take.
    const r = await start();
    const http = `http://127.0.0.1:${r.httpPort}`;
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${http}/v1/state/save-state`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ service: "platform", key: `big${i}`, value: "y".repeat(2500 * 1024) }) });
      assert.equal(res.status, 200, await res.text());
    }
    const path = `/v1/state/platform/query?query=${encodeURIComponent("{}")}`;
    await r.during(async (stopped) => {
      const sockets = Array.from({ length: 40 }, () => {
        const s = net.connect(r.httpPort, "127.0.0.1");
        s.on("error", () => undefined);
        s.pause(); // never read
        s.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
        return s;
      });
      await within(stopped, 10_000);
      for (const s of sockets) s.destroy();
    });
    await r.check(256 * MIB);
    await finish(r);
  });

  it("WebSocket: a 9 MiB frame on /v1/gateway/invoke-ws is closed with 1009, repeatedly (RSS +200 MiB)", async () => {
    const r = await start();
    const codes: number[] = [];
    await r.during(async (stopped) => {
      const frame = Buffer.alloc(9 * MIB, 0x61);
      while (!stopped() && codes.length < 20) {
        const ws = new WebSocket(`ws://127.0.0.1:${r.httpPort}/v1/gateway/invoke-ws`);
        ws.on("error", () => undefined);
        const code = await new Promise<number>((resolve) => {
          const t = setTimeout(() => resolve(-1), 5000);
          ws.on("open", () => ws.send(frame));
          ws.on("close", (c) => {
            clearTimeout(t);
            resolve(c);
          });
        });
        ws.terminate();
        codes.push(code);
      }
    });
    assert.ok(codes.length > 0, "no WebSocket attempt completed");
    assert.deepEqual([...new Set(codes)], [1009], `close codes seen: ${codes.join(", ")} (1006: the connection dropped without a close frame; -1: no close within 5 s); ${r.summary()}`);
    await r.check(200 * MIB);
    await finish(r);
  });

  it("gRPC: a Subscribe naming 100,000 topics is INVALID_ARGUMENT, repeatedly (RSS +200 MiB)", async () => {
    const r = await start();
    const sub = METHODS.find((m) => m.path === "/io.cloudevents.v1.Pubsub/Subscribe")!;
    const body = grpcFrame(sub.serialize({ topics: Array.from({ length: 100_000 }, (_, i) => `t${i}`) }));
    const statuses: (number | string)[] = [];
    await r.during(async (stopped) => {
      while (!stopped() && statuses.length < 50) {
        const c = new RawH2(r.grpcPort);
        try {
          await c.connected();
          await c.open();
          const frames = [rawFrame(T.HEADERS, F.END_HEADERS, 1, headerBlock(grpcRequestFields(sub.path)))];
          for (let at = 0; at < body.length; at += 16_384) frames.push(rawFrame(T.DATA, at + 16_384 >= body.length ? F.END_STREAM : 0, 1, body.subarray(at, at + 16_384)));
          await c.send(...frames);
          const done = await c.until(() => c.closed || c.frames.some((f) => f.stream === 1 && (f.type === T.RST_STREAM || (f.type === T.HEADERS && (f.flags & F.END_STREAM) !== 0))), 5000);
          statuses.push(done ? (readUnary(c.frames, 1).status ?? "no status") : "still open after 5 s (accepted)");
        } finally {
          c.destroy();
        }
      }
    });
    assert.ok(statuses.length > 0, "no Subscribe completed");
    assert.deepEqual([...new Set(statuses)], [3], `Subscribe statuses seen: ${[...new Set(statuses)].join(", ")}; ${r.summary()}`);
    await r.check(200 * MIB);
    await finish(r);
  });
});

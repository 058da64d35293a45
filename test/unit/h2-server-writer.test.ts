/**
 * The HTTP/2 server's frame writer (src/h2/server-writer.ts) when a flush outlasts its 1 ms slice: thousands of
 * connections, half of them with a reply (HEADERS + DATA), half with DATA only (a stream's event), written to sockets
 * that take about 10 us per write, so the flush runs in many passes and the queue of writers due and the queue of
 * answers are compacted between them. Whatever the passes, every connection's frames leave whole, in order, in one
 * write, and each answer goes once half of the writes queued before it are done.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type net from "node:net";
import { FrameWriter } from "../../src/h2/server-writer.js";
import { waitFor } from "../support/gateway.js";

/** The socket calls FrameWriter makes, recording each write; every write costs about `spinUs` of CPU. */
let writeSeq = 0;

function fakeSocket(spinUs: number): { socket: net.Socket; writes: Buffer[]; seq: number[] } {
  const writes: Buffer[] = [];
  const seq: number[] = [];
  const socket = {
    destroyed: false,
    writable: true,
    writableLength: 0,
    write(b: Buffer): boolean {
      const until = performance.now() + spinUs / 1000;
      while (performance.now() < until);
      writes.push(Buffer.from(b));
      seq.push(writeSeq++);
      return true;
    },
    cork(): void {},
    uncork(): void {},
  };
  return { socket: socket as unknown as net.Socket, writes, seq };
}

/** Frame types in the order they appear in `bytes`. */
function frameTypes(bytes: Buffer): number[] {
  const types: number[] = [];
  for (let p = 0; p + 9 <= bytes.length; p += 9 + bytes.readUIntBE(p, 3)) types.push(bytes[p + 3]!);
  return types;
}

describe("HTTP/2 server frame writer, flushed in slices", () => {
  it("3,000 connections, half with a reply, about 30 ms of writes: each leaves in one write, and each reply once half of the writes before it are done", async () => {
    const n = 3000;
    const conns = Array.from({ length: n }, () => fakeSocket(10));
    let flushes = 0;
    const owner = { flushed: () => void flushes++, flushFailed: (e: unknown) => assert.fail(`flush failed: ${String(e)}`) };
    const writers = conns.map((c) => new FrameWriter(c.socket, owner));
    const body = Buffer.alloc(300, 7);
    const isReply = (i: number): boolean => i % 2 === 0;
    for (let i = 0; i < n; i++) {
      if (isReply(i)) writers[i]!.headers(1, [[":status", "200"]], false);
      writers[i]!.data(1, body, 0, body.length, 0);
    }
    await waitFor(() => conns.every((c) => c.writes.length > 0), "every connection's write", 10_000);
    await new Promise((r) => setTimeout(r, 20)); // nothing more comes
    for (const [i, c] of conns.entries()) {
      assert.equal(c.writes.length, 1, `connection ${i}: one write`);
      assert.deepEqual(frameTypes(c.writes[0]!), isReply(i) ? [1, 0] : [0], `connection ${i}: its frames`);
      assert.deepEqual(c.writes[0]!.subarray(c.writes[0]!.length - body.length), body, `connection ${i}: the DATA payload`);
    }
    assert.equal(flushes, n, "each writer flushed once");
    // Reply i had i writers queued before it: it goes after the first ceil(i/2) of them and before the rest.
    for (let i = 0; i < n; i += 2) {
      const half = Math.ceil(i / 2);
      for (const j of [half - 1, half, half + 1]) {
        if (j < 0 || j >= i || isReply(j)) continue;
        const before = j < half;
        assert.equal(conns[j]!.seq[0]! < conns[i]!.seq[0]!, before, `reply ${i} ${before ? "after" : "before"} stream ${j}'s write`);
      }
    }
  });
});

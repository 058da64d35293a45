/**
 * Attack classes on the gRPC port's HTTP/2 layer, each against a fresh gateway child with a
 * well-behaved client measuring on another connection (harness.ts): the gateway stays up and answering, its RSS stays
 * under the bound stated per class, the well-behaved client's p99 stays within 3x its unloaded p99, and where the
 * class is one a server must end, the attacker's connection is closed (GOAWAY or socket end) within the stated time.
 * Run by .ci/run: `node --test --import tsx --test-concurrency=1 test/attack/*.attack.ts` (not `npm test`: these
 * assert timings).
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { literalField, writeInt } from "../../src/h2/hpack.js";
import { F, RawH2, T, grpcFrame, grpcRequestFields, headerBlock, rawFrame, settings, u32 } from "../support/h2-raw-unary.js";
import { AttackRun, MIB, within } from "./harness.js";

const LIST = "/platform.Config/ListServices";
const LIST_BLOCK = headerBlock(grpcRequestFields(LIST));
const EMPTY_MSG = grpcFrame(Buffer.alloc(0));

const runs: AttackRun[] = [];
after(async () => {
  for (const r of runs) await r.stop().catch(() => undefined);
});

async function start(args: string[] = [], env: Record<string, string> = {}): Promise<AttackRun> {
  const r = await AttackRun.start(["--shutdown-timeout", "1000", ...args], env);
  runs.push(r);
  return r;
}

async function finish(r: AttackRun): Promise<void> {
  runs.splice(runs.indexOf(r), 1);
  await r.stop();
}

/** A connection past its preface and SETTINGS (and `entries`). */
async function attacker(port: number, entries: [number, number][] = []): Promise<RawH2> {
  const c = new RawH2(port);
  await c.connected();
  await c.open(entries);
  return c;
}

/** Write `batch` as fast as the socket takes it until stopped or the server ends the connection. */
async function flood(c: RawH2, stopped: () => boolean, batch: Buffer | ((i: number) => Buffer)): Promise<void> {
  for (let i = 0; !stopped() && !c.closed && c.socket.writable; i++) await c.send(typeof batch === "function" ? batch(i) : batch);
}

/** The server ended the connection: a GOAWAY, or the socket closed. */
const ended = (c: RawH2): boolean => c.closed || c.of(T.GOAWAY).length > 0;

/** `n` copies of `f(i)` in one buffer. */
function repeat(n: number, f: (i: number) => Buffer): Buffer {
  return Buffer.concat(Array.from({ length: n }, (_, i) => f(i)));
}

/** Run a class whose attacker uses one connection that the server must end within `closeMs` of the attack's start. */
async function oneConnection(r: AttackRun, closeMs: number, attack: (c: RawH2, stopped: () => boolean) => Promise<void>, entries: [number, number][] = []): Promise<void> {
  let closedAfter = -1;
  await r.during(async (stopped) => {
    const c = await attacker(r.grpcPort, entries);
    const t0 = Date.now();
    const watch = within(() => ended(c), 60_000).then(() => (closedAfter = Date.now() - t0));
    try {
      await attack(c, stopped);
      // The attack ended by itself: wait for the server's verdict up to the bound.
      await c.until(() => ended(c), Math.max(0, closeMs - (Date.now() - t0)));
    } finally {
      c.destroy();
      void watch;
    }
  });
  assert.ok(closedAfter >= 0 && closedAfter <= closeMs, `the attacker's connection was ${closedAfter < 0 ? "never closed" : `closed after ${closedAfter} ms`} (bound ${closeMs} ms); ${r.summary()}`);
}

/**
 * Run a class made of many short connections, each of which the server must end within `closeMs`; `parallel` attacker
 * loops (two keep this process's core busy on the 2-core CI machine: more would measure only CPU contention).
 */
async function manyConnections(r: AttackRun, closeMs: number, parallel: number, attack: (c: RawH2) => Promise<void>, raw = false): Promise<{ total: number; late: number }> {
  const out = { total: 0, late: 0 };
  await r.during(async (stopped) => {
    const one = async (): Promise<void> => {
      while (!stopped()) {
        const c = new RawH2(r.grpcPort);
        try {
          await c.connected();
          if (!raw) await c.open();
          await attack(c);
          out.total++;
          if (!(await c.until(() => ended(c), closeMs))) out.late++;
        } finally {
          c.destroy();
        }
      }
    };
    await Promise.all(Array.from({ length: parallel }, one));
  });
  assert.ok(out.total > 0, "the attack made no connection");
  assert.equal(out.late, 0, `${out.late} of ${out.total} attacking connections were not closed within ${closeMs} ms; ${r.summary()}`);
  return out;
}

describe("attack classes: the gRPC port's HTTP/2 layer", { concurrency: 1, timeout: 600_000 }, () => {
  it("frames on a closed stream: WINDOW_UPDATE(1,+1) + DATA(1,END_STREAM) repeated after a completed call (closed within 2 s, RSS +100 MiB)", async () => {
    const r = await start();
    await oneConnection(r, 2000, async (c, stopped) => {
      await c.send(rawFrame(T.HEADERS, F.END_HEADERS, 1, LIST_BLOCK), rawFrame(T.DATA, F.END_STREAM, 1, EMPTY_MSG));
      assert.ok(await c.until(() => c.frames.some((f) => f.stream === 1 && f.type === T.HEADERS && f.flags & F.END_STREAM), 3000), "the unary call completed");
      await flood(c, stopped, repeat(1000, () => Buffer.concat([rawFrame(T.WINDOW_UPDATE, 0, 1, u32(1)), rawFrame(T.DATA, F.END_STREAM, 1)])));
    });
    await r.check(100 * MIB);
    await finish(r);
  });

  it("refused streams: with 1,000 streams open, HEADERS beyond the limit repeated (closed within 3 s, RSS +150 MiB)", async () => {
    const r = await start();
    await oneConnection(r, 3000, async (c, stopped) => {
      // 1,000 calls whose request message never comes (the message timeout is 10 s, longer than the attack).
      await c.send(repeat(1000, (i) => rawFrame(T.HEADERS, F.END_HEADERS, 1 + 2 * i, LIST_BLOCK)));
      let sid = 2001;
      await flood(c, stopped, () => {
        const b = repeat(500, (i) => rawFrame(T.HEADERS, F.END_HEADERS, sid + 2 * i, LIST_BLOCK));
        sid += 1000;
        return b;
      });
    });
    await r.check(150 * MIB);
    await finish(r);
  });

  it("HPACK bomb: header lists over the limit built from one dynamic-table entry, repeated (closed within 3 s, RSS +100 MiB)", async () => {
    const r = await start();
    await oneConnection(r, 3000, async (c, stopped) => {
      // Stream 1 inserts a 4,000-byte field into the table (a normal call); each later block names it 20 times: an
      // 80 KB header list from 40 bytes.
      const insert = Buffer.alloc(4200);
      insert[0] = 0x40;
      let p = writeInt(insert, 1, 6, 7, 0);
      p += insert.write("x-bomb", p, "latin1");
      p = writeInt(insert, p, 4000, 7, 0);
      p += insert.write("a".repeat(4000), p, "latin1");
      await c.send(rawFrame(T.HEADERS, F.END_HEADERS, 1, Buffer.concat([LIST_BLOCK, insert.subarray(0, p)])), rawFrame(T.DATA, F.END_STREAM, 1, EMPTY_MSG));
      const bomb = Buffer.concat([LIST_BLOCK, Buffer.alloc(20, 0x80 | 62)]);
      let sid = 3;
      await flood(c, stopped, () => {
        const b = repeat(200, (i) => rawFrame(T.HEADERS, F.END_HEADERS | F.END_STREAM, sid + 2 * i, bomb));
        sid += 400;
        return b;
      });
    });
    await r.check(100 * MIB);
    await finish(r);
  });

  it("idle connections: 200 connections that send nothing after SETTINGS are each closed after the idle timeout (1 s here; closed within 4 s, RSS +100 MiB)", async () => {
    // --grpc-idle-timeout (GATEWAY_GRPC_IDLE_TIMEOUT_MS), 5 min by default.
    const r = await start(["--grpc-idle-timeout", "1000"]);
    let open = -1;
    await r.during(async () => {
      const conns = await Promise.all(Array.from({ length: 200 }, () => attacker(r.grpcPort)));
      await within(() => conns.every(ended), 4000);
      open = conns.filter((c) => !ended(c)).length;
      for (const c of conns) c.destroy();
    });
    assert.equal(open, 0, `${open} of 200 idle connections were still open 4 s after they went idle; ${r.summary()}`);
    await r.check(100 * MIB);
    await finish(r);
  });

  it("slow CONTINUATION: 20 header blocks each kept open by a CONTINUATION every 2 s (closed within 12 s, RSS +100 MiB)", async () => {
    const r = await start();
    let open = -1;
    await r.during(async (stopped) => {
      const conns = await Promise.all(Array.from({ length: 20 }, () => attacker(r.grpcPort)));
      const block = headerBlock([...grpcRequestFields(LIST), ...Array.from({ length: 100 }, (_, i) => [`x-slow-${i}`, "v"] as [string, string])]);
      for (const c of conns) await c.send(rawFrame(T.HEADERS, 0, 1, block.subarray(0, 40)));
      const t0 = Date.now();
      let at = 40;
      while (!stopped() && Date.now() - t0 < 12_000 && !conns.every(ended)) {
        await within(() => stopped() || conns.every(ended), 2000);
        for (const c of conns) if (!ended(c)) await c.send(rawFrame(T.CONTINUATION, 0, 1, block.subarray(at, at + 10)));
        at += 10;
      }
      open = conns.filter((c) => !ended(c)).length;
      for (const c of conns) c.destroy();
    }, 12_000);
    assert.equal(open, 0, `${open} of 20 slow header blocks were still open after 12 s; ${r.summary()}`);
    await r.check(100 * MIB);
    await finish(r);
  });

  it("rapid reset: HEADERS + RST_STREAM(CANCEL) on new streams as fast as possible (closed within 3 s, RSS +100 MiB)", async () => {
    const r = await start();
    await oneConnection(r, 3000, async (c, stopped) => {
      let sid = 1;
      await flood(c, stopped, () => {
        const b = repeat(250, (i) => Buffer.concat([rawFrame(T.HEADERS, F.END_HEADERS, sid + 2 * i, LIST_BLOCK), rawFrame(T.RST_STREAM, 0, sid + 2 * i, u32(8))]));
        sid += 500;
        return b;
      });
    });
    await r.check(100 * MIB);
    await finish(r);
  });

  it("CONTINUATION flood: endless CONTINUATION frames on one header block, on connection after connection (each closed within 1 s, RSS +200 MiB (measured plateau))", async () => {
    // +200 MiB: not a leak but the collector's plateau (measured +90 to +144 MiB across runs, CI rehearsal included). Each connection's ~20 KB read (HEADERS + 2,000 CONTINUATIONs
    // in one chunk, read whole before the 65th fails the block) is a Node ArrayBuffer the main thread drops at once;
    // V8 collects them only once external memory has grown by about 100 MiB (measured: process.memoryUsage()
    // arrayBuffers on the main thread saws 50 -> 105 MiB, the heap 30 -> 120 MiB). RSS levels off at +127 to +131 MiB
    // within 3 s and stays there: the same +131 MiB when the attack runs 25 s instead of 5 (five times the connections).
    const r = await start();
    await manyConnections(r, 1000, 4, async (c) => {
      await c.send(rawFrame(T.HEADERS, 0, 1, LIST_BLOCK.subarray(0, 10)), repeat(2000, () => rawFrame(T.CONTINUATION, 0, 1, Buffer.from([0x40]))));
    });
    await r.check(200 * MIB);
    await finish(r);
  });

  it("SETTINGS flood (closed within 2 s, RSS +100 MiB)", async () => {
    const r = await start();
    await oneConnection(r, 2000, (c, stopped) => flood(c, stopped, repeat(1000, () => rawFrame(T.SETTINGS, 0, 0, settings([[4, 65_535]])))));
    await r.check(100 * MIB);
    await finish(r);
  });

  it("PING flood (closed within 2 s, RSS +100 MiB)", async () => {
    const r = await start();
    await oneConnection(r, 2000, (c, stopped) => flood(c, stopped, repeat(1000, () => rawFrame(T.PING, 0, 0, Buffer.from("attack!!")))));
    await r.check(100 * MIB);
    await finish(r);
  });

  it("zero-window stall: 10 connections advertise window 0, never open it, and keep 900 calls each waiting (RSS +200 MiB)", async () => {
    const r = await start();
    await r.during(async (stopped) => {
      const conns = await Promise.all(Array.from({ length: 10 }, () => attacker(r.grpcPort, [[4, 0]])));
      for (const c of conns) await c.send(repeat(900, (i) => Buffer.concat([rawFrame(T.HEADERS, F.END_HEADERS, 1 + 2 * i, LIST_BLOCK), rawFrame(T.DATA, F.END_STREAM, 1 + 2 * i, EMPTY_MSG)])));
      await within(stopped, 10_000);
      for (const c of conns) c.destroy();
    });
    await r.check(200 * MIB);
    await finish(r);
  });

  it("huge headers: a 1 MiB header block in 16 KiB CONTINUATIONs, on connection after connection (each closed within 1 s, RSS +150 MiB)", async () => {
    // +150 MiB: each connection's block is read up to the 128 KiB block limit before the GOAWAY, ~500 connections a
    // second. A failed connection lets go of its partial block at once (FrameReader.dropPartial), not when its socket
    // is destroyed a second later: RSS rises +66-89 MiB here; while the block lived on with the lingering socket it
    // rose +185-266 MiB.
    const r = await start();
    const big = Buffer.alloc(16_384);
    let p = 0;
    while (p < 16_000) p = literalField(big, p, 0, `x-h${p}`, "h".repeat(200));
    const block = big.subarray(0, p);
    await manyConnections(r, 1000, 2, async (c) => {
      await c.send(rawFrame(T.HEADERS, 0, 1, Buffer.concat([LIST_BLOCK, block])), repeat(64, (i) => rawFrame(T.CONTINUATION, i === 63 ? F.END_HEADERS : 0, 1, block)));
    });
    await r.check(150 * MIB);
    await finish(r);
  });

  it("invalid preface: HTTP/1.1 and garbage instead of the client preface, on connection after connection (each closed within 1 s, RSS +100 MiB)", async () => {
    const r = await start();
    let n = 0;
    await manyConnections(
      r,
      1000,
      2,
      async (c) => {
        await c.send(Buffer.from(n++ % 2 === 0 ? "GET / HTTP/1.1\r\nHost: x\r\n\r\n" : "PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n" + "\u0000".repeat(100)));
      },
      true,
    );
    await r.check(100 * MIB);
    await finish(r);
  });

  it("half-closed TCP: a call, then the client's FIN without reading, on connection after connection (each closed within 2 s, RSS +100 MiB)", async () => {
    const r = await start();
    await manyConnections(r, 2000, 2, async (c) => {
      await c.send(rawFrame(T.HEADERS, F.END_HEADERS, 1, LIST_BLOCK), rawFrame(T.DATA, F.END_STREAM, 1, EMPTY_MSG));
      c.endWrites();
    });
    await r.check(100 * MIB);
    await finish(r);
  });
});

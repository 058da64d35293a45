/**
 * RFC 9113 rules and abuse meters of the native HTTP/2 server (src/h2/server-session.ts), each over a real socket
 * with raw frames (test/support/h2-raw-client.ts), so `npm test` guards them without h2spec: stream states after a
 * stream closed (5.1), WINDOW_UPDATE and flow-control errors (6.9), priority self-dependency (5.3.1), content-length
 * against DATA and field checks (8.1.1, 8.2.1), padding, CONTINUATION, and the meters on frames on closed streams,
 * refused streams, oversize header lists and header block size.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { createH2Server } from "../../src/h2/server.js";
import {
  CLOSED_FRAME_BURST,
  FLOOD_BURST,
  MAX_CONTINUATIONS,
  MAX_HEADER_BLOCK,
  MAX_OVERSIZE_LISTS,
  STREAM_ERROR_BURST,
} from "../../src/h2/server-session.js";
import type { H2Server, H2ServerOptions, H2ServerStream, H2StreamHandler, HeaderList } from "../../src/h2/types.js";
import { waitFor } from "../support/gateway.js";
import { END_HEADERS, END_STREAM, H, PADDED, PRIORITY_FLAG, REQ, Raw, block, frame, settings, u32 } from "../support/h2-raw-client.js";

/** What the server did with one stream. */
interface Seen {
  stream: H2ServerStream;
  data: string[];
  ended: boolean;
  closed: { code: number; why: string }[];
}

type Behave = (s: H2ServerStream, seen: Seen) => Partial<H2StreamHandler> | void;

const OK: HeaderList = [[":status", "200"]];

/** Answers when the client ends: HEADERS, the body as received, trailers. */
const echo: Behave = (s, rec) => ({
  end() {
    s.respond(OK, false);
    s.write(Buffer.from(rec.data.join("")));
    s.end([["x-done", "1"]]);
  },
});

/** Resets the stream (CANCEL) on its first DATA; a request without DATA is answered as by `echo`. */
const resetOnData: Behave = (s, rec) => ({ ...echo(s, rec), data: () => s.reset(0x8) });

/** A request that gets an answer from `echo`, and the frames it brings: HEADERS, DATA and trailers on `id`. */
async function served(raw: Raw, id: number, fields: [string, string][] = REQ): Promise<void> {
  raw.send(frame(H.HEADERS, END_HEADERS | END_STREAM, id, block(fields)));
  await waitFor(() => raw.of(H.HEADERS).filter((f) => f.stream === id && (f.flags & END_STREAM) !== 0).length === 1, `the reply on stream ${id}`);
}

describe("HTTP/2 conformance and meters of the native server", () => {
  const servers: H2Server[] = [];
  const raws: Raw[] = [];
  after(() => {
    for (const r of raws) r.destroy();
    for (const s of servers) {
      s.stopListening();
      for (const x of s.sessions) x.destroy();
    }
  });

  async function start(behave: Behave, opts: Partial<H2ServerOptions> = {}): Promise<{ port: number; seen: Seen[]; raw: (settingsPayload?: Buffer) => Raw }> {
    const seen: Seen[] = [];
    const server = createH2Server({
      maxConcurrentStreams: 100,
      maxHeaderListSize: 16 * 1024,
      streamHighWaterMark: 64 * 1024,
      ...opts,
      onStream(stream) {
        const rec: Seen = { stream, data: [], ended: false, closed: [] };
        seen.push(rec);
        const extra = behave(stream, rec) ?? {};
        return {
          data(buf, a, b) {
            rec.data.push(buf.toString("latin1", a, b));
            extra.data?.(buf, a, b);
          },
          end() {
            rec.ended = true;
            extra.end?.();
          },
          close(code, why) {
            rec.closed.push({ code, why });
            extra.close?.(code, why);
          },
          drain() {},
        };
      },
    });
    servers.push(server);
    const port = await server.listen(0, "127.0.0.1");
    const raw = (settingsPayload?: Buffer): Raw => {
      const r = new Raw(port).open(settingsPayload);
      raws.push(r);
      return r;
    };
    return { port, seen, raw };
  }

  /** The connection is still served: a new request on `id` gets its reply. */
  async function stillServes(raw: Raw, id: number): Promise<void> {
    await served(raw, id);
    assert.equal(raw.of(H.GOAWAY).length, 0, "no GOAWAY");
  }

  describe("closed-stream state (RFC 9113 5.1)", () => {
    it("DATA after the client's END_STREAM, on a stream still open (half-closed remote): RST_STREAM STREAM_CLOSED", async () => {
      const { raw, seen } = await start(() => ({}));
      const r = raw();
      r.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1, block(REQ)), frame(H.DATA, 0, 1, Buffer.from("late")));
      assert.equal(await r.reset(1), 0x5);
      await waitFor(() => seen[0]?.closed.length === 1, "close");
      assert.deepEqual(seen[0]!.data, []);
    });

    it("DATA after the client's RST_STREAM: RST_STREAM STREAM_CLOSED, the connection goes on", async () => {
      const { raw } = await start(echo);
      const r = raw();
      r.send(frame(H.HEADERS, END_HEADERS, 1, block(REQ)), frame(H.RST_STREAM, 0, 1, u32(8)), frame(H.DATA, END_STREAM, 1, Buffer.from("test")));
      assert.equal(await r.reset(1), 0x5);
      await stillServes(r, 3);
    });

    it("DATA on a stream both sides ended: connection error STREAM_CLOSED", async () => {
      const { raw } = await start(echo);
      const r = raw();
      await served(r, 1);
      r.send(frame(H.DATA, END_STREAM, 1, Buffer.from("test")));
      const g = await r.goaway();
      assert.deepEqual([g.code, g.last], [0x5, 1]);
      assert.match(g.debug, /DATA on closed stream 1/);
    });

    it("DATA in flight on streams we reset is ignored within their windows, and its connection credit comes back", async () => {
      const { raw, seen } = await start(resetOnData);
      const r = raw();
      const ids = [1, 3, 5, 7, 9];
      for (const id of ids) r.send(frame(H.HEADERS, END_HEADERS, id, block(REQ)), frame(H.DATA, 0, id, Buffer.from("x")));
      await waitFor(() => r.resets().length === ids.length, "the five resets");
      // What is left of each 4 MiB stream window, in full frames: 20 MiB in all, more than the 16 MiB connection
      // window, so the server must return the credit of ignored DATA or call the last frames a flow-control error.
      const full = frame(H.DATA, 0, 0, Buffer.alloc(16 * 1024));
      for (const id of ids) {
        full.writeUInt32BE(id, 5);
        for (let i = 0; i < 255; i++) r.send(full);
        r.send(frame(H.DATA, 0, id, Buffer.alloc(16 * 1024 - 1)));
      }
      // An honest client that pumps small messages also has many small frames in flight: no token is spent on them.
      r.send(frame(H.HEADERS, END_HEADERS, 11, block(REQ)), frame(H.DATA, 0, 11, Buffer.from("x")));
      await r.reset(11);
      for (let i = 0; i < 3 * CLOSED_FRAME_BURST; i++) r.send(frame(H.DATA, 0, 11, Buffer.alloc(100)));
      await r.sync();
      const credit = r.of(H.WINDOW_UPDATE).filter((f) => f.stream === 0).reduce((n, f) => n + f.payload.readUInt32BE(0), 0);
      assert.ok(credit >= 16 << 20, `connection credit returned: ${credit}`);
      assert.deepEqual(seen.map((x) => x.data), ids.concat(11).map(() => ["x"]));
      assert.deepEqual(r.resets(), ids.concat(11).map((id) => [id, 0x8]), "no reset for the ignored DATA");
      await stillServes(r, 13);
    });

    it("DATA beyond the window of a stream we reset is metered like any frame on a closed stream", async () => {
      const { raw } = await start(resetOnData);
      const r = raw();
      r.send(frame(H.HEADERS, END_HEADERS, 1, block(REQ)), frame(H.DATA, 0, 1, Buffer.from("x")));
      await r.reset(1);
      const full = frame(H.DATA, 0, 1, Buffer.alloc(16 * 1024));
      // 4 MiB is the window; then 1,000 tokens and a few refills: 2,000 frames past the window (32 MiB) are too many.
      r.send(...Array.from({ length: 256 + 2 * CLOSED_FRAME_BURST }, () => full));
      const g = await r.goaway();
      assert.equal(g.code, 0xb);
      assert.match(g.debug, /closed streams/);
    });

    it("WINDOW_UPDATE, PRIORITY and RST_STREAM on a recently closed stream are accepted without a word", async () => {
      const { raw } = await start(echo);
      const r = raw();
      await served(r, 1);
      r.send(frame(H.WINDOW_UPDATE, 0, 1, u32(100)), frame(H.PRIORITY, 0, 1, Buffer.from([0, 0, 0, 0, 16])), frame(H.RST_STREAM, 0, 1, u32(8)));
      await r.sync();
      assert.deepEqual(r.resets(), []);
      await stillServes(r, 3);
    });

    it("HEADERS on a stream both sides ended (the last stream id again): connection error STREAM_CLOSED", async () => {
      const { raw } = await start(echo);
      const r = raw();
      await served(r, 1);
      r.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1, block(REQ)));
      const g = await r.goaway();
      assert.equal(g.code, 0x5);
      assert.match(g.debug, /HEADERS on closed stream 1/);
    });

    it("HEADERS after the client's RST_STREAM: RST_STREAM STREAM_CLOSED", async () => {
      const { raw } = await start(() => ({}));
      const r = raw();
      r.send(frame(H.HEADERS, END_HEADERS, 1, block(REQ)), frame(H.RST_STREAM, 0, 1, u32(8)), frame(H.HEADERS, END_HEADERS | END_STREAM, 1, block([["x-t", "1"]])));
      assert.equal(await r.reset(1), 0x5);
      await r.sync();
      assert.equal(r.of(H.GOAWAY).length, 0);
    });

    it("trailers in flight on a stream we reset are decoded (the HPACK table stays in step) and ignored", async () => {
      const { raw, seen } = await start(resetOnData);
      const r = raw();
      r.send(frame(H.HEADERS, END_HEADERS, 1, block(REQ)), frame(H.DATA, 0, 1, Buffer.from("x")));
      assert.equal(await r.reset(1), 0x8);
      // Trailers with incremental indexing (0x40): "x-t: v" becomes dynamic entry 62, which the next request names.
      const indexed = Buffer.concat([Buffer.from([0x40, 3]), Buffer.from("x-t"), Buffer.from([1]), Buffer.from("v")]);
      r.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1, indexed));
      r.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 3, Buffer.concat([block(REQ), Buffer.from([0x80 | 62])])));
      await waitFor(() => seen.length === 2, "stream 3");
      assert.deepEqual(seen[1]!.stream.headers.at(-1), ["x-t", "v"]);
      assert.deepEqual(r.resets(), [[1, 0x8]]);
    });

    it("a response that ends before the request: RST_STREAM NO_ERROR asks the client to stop; later DATA is ignored", async () => {
      const { raw, seen } = await start((s) => {
        s.respond(OK, false);
        s.end([["grpc-status", "0"]]);
      });
      const r = raw();
      r.send(frame(H.HEADERS, END_HEADERS, 1, block(REQ)));
      assert.equal(await r.reset(1), 0x0);
      await waitFor(() => seen[0]!.closed.length === 1, "close");
      assert.equal(seen[0]!.closed[0]!.code, 0);
      r.send(frame(H.DATA, END_STREAM, 1, Buffer.from("in flight")));
      await stillServes(r, 3);
      assert.deepEqual(r.resets(), [[1, 0x0]]);
    });

    it("a reply without trailers (end([])) ends on an empty DATA and reads the request to its end: no RST_STREAM", async () => {
      const { raw, seen } = await start((s) => {
        s.respond([[":status", "415"]], false);
        s.write(Buffer.from("not here"));
        s.end([]);
      });
      // The client's window is 0: the body waits for its WINDOW_UPDATE, a byte at a time.
      const r = raw(settings([0x4, 0]));
      r.send(frame(H.HEADERS, END_HEADERS, 1, block(REQ)));
      await waitFor(() => r.of(H.HEADERS).length === 1, "the 415 HEADERS");
      r.send(frame(H.WINDOW_UPDATE, 0, 1, u32(1)));
      await waitFor(() => r.of(H.DATA).length === 1, "one DATA");
      assert.equal(r.of(H.DATA)[0]!.payload.toString(), "n");
      r.send(frame(H.WINDOW_UPDATE, 0, 1, u32(100)), frame(H.DATA, 0, 1, Buffer.from("more")));
      await waitFor(() => r.of(H.DATA).some((f) => (f.flags & END_STREAM) !== 0), "the END_STREAM");
      const last = r.of(H.DATA).at(-1)!;
      assert.deepEqual([last.payload.length, last.flags], [0, END_STREAM]);
      assert.equal(Buffer.concat(r.of(H.DATA).map((f) => f.payload)).toString(), "not here");
      // Half-closed (local): the request is read on; its window rules hold (overflow is FLOW_CONTROL_ERROR).
      r.send(frame(H.DATA, END_STREAM, 1, Buffer.from("end")));
      await waitFor(() => seen[0]!.closed.length === 1, "close");
      assert.deepEqual([seen[0]!.closed[0]!.code, seen[0]!.data.join("")], [0, "moreend"]);
      assert.deepEqual(r.resets(), []);
    });
  });

  describe("flow control (RFC 9113 6.9)", () => {
    it("WINDOW_UPDATE of 0 on an open stream: RST_STREAM PROTOCOL_ERROR; on a closed one too; the connection goes on", async () => {
      const { raw } = await start(echo);
      const r = raw();
      await served(r, 1);
      r.send(frame(H.HEADERS, END_HEADERS, 3, block(REQ)), frame(H.WINDOW_UPDATE, 0, 3, u32(0)));
      assert.equal(await r.reset(3), 0x1);
      r.send(frame(H.WINDOW_UPDATE, 0, 1, u32(0)));
      assert.equal(await r.reset(1), 0x1);
      await stillServes(r, 5);
    });

    it("WINDOW_UPDATE of 0 on the connection: connection error PROTOCOL_ERROR", async () => {
      const { raw } = await start(echo);
      const r = raw();
      r.send(frame(H.WINDOW_UPDATE, 0, 0, u32(0)));
      const g = await r.goaway();
      assert.equal(g.code, 0x1);
      assert.match(g.debug, /WINDOW_UPDATE of 0/);
    });

    it("a stream window over 2^31-1: RST_STREAM FLOW_CONTROL_ERROR on that stream only", async () => {
      const { raw, seen } = await start(() => ({}));
      const r = raw();
      r.send(frame(H.HEADERS, END_HEADERS, 1, block(REQ)), frame(H.WINDOW_UPDATE, 0, 1, u32(0x7fffffff - 65_535)));
      await r.sync();
      assert.deepEqual(r.resets(), [], "exactly 2^31-1 is allowed");
      r.send(frame(H.WINDOW_UPDATE, 0, 1, u32(1)));
      assert.equal(await r.reset(1), 0x3);
      await waitFor(() => seen[0]!.closed.length === 1, "close");
      assert.equal(seen[0]!.closed[0]!.code, 0x3);
      assert.equal(r.of(H.GOAWAY).length, 0);
    });
  });

  describe("priority (RFC 9113 5.3.1)", () => {
    it("HEADERS whose priority names the stream itself: RST_STREAM PROTOCOL_ERROR before onStream", async () => {
      const { raw, seen } = await start(echo);
      const r = raw();
      const prio = Buffer.concat([u32(1), Buffer.from([16])]);
      r.send(frame(H.HEADERS, END_HEADERS | END_STREAM | PRIORITY_FLAG, 1, Buffer.concat([prio, block(REQ)])));
      assert.equal(await r.reset(1), 0x1);
      // Another stream's priority naming stream 1 is fine.
      r.send(frame(H.HEADERS, END_HEADERS | END_STREAM | PRIORITY_FLAG, 3, Buffer.concat([prio, block(REQ)])));
      await waitFor(() => seen.length === 1, "stream 3");
      assert.equal(seen[0]!.stream.id, 3);
    });

    it("PRIORITY naming its own stream: RST_STREAM PROTOCOL_ERROR on an open stream, connection error on an idle one", async () => {
      const { raw, seen } = await start(() => ({}));
      const r = raw();
      r.send(frame(H.HEADERS, END_HEADERS, 1, block(REQ)), frame(H.PRIORITY, 0, 1, Buffer.from([0, 0, 0, 1, 16])));
      assert.equal(await r.reset(1), 0x1);
      await waitFor(() => seen[0]!.closed.length === 1, "close");
      r.send(frame(H.PRIORITY, 0, 9, Buffer.from([0, 0, 0, 9, 16])));
      const g = await r.goaway();
      assert.equal(g.code, 0x1);
      assert.match(g.debug, /depends on itself/);
    });
  });

  describe("malformed requests (RFC 9113 8.1.1, 8.2.1)", () => {
    it("content-length against the DATA: one frame longer, several shorter, END_STREAM on HEADERS; a matching one is served", async () => {
      const { raw, seen } = await start(echo);
      const r = raw();
      const cl = (n: string): [string, string][] => [...REQ, ["content-length", n]];
      r.send(frame(H.HEADERS, END_HEADERS, 1, block(cl("1"))), frame(H.DATA, END_STREAM, 1, Buffer.from("test")));
      r.send(frame(H.HEADERS, END_HEADERS, 3, block(cl("8"))), frame(H.DATA, 0, 3, Buffer.from("te")), frame(H.DATA, END_STREAM, 3, Buffer.from("st")));
      r.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 5, block(cl("3"))));
      r.send(frame(H.HEADERS, END_HEADERS, 7, block(cl("5"))), frame(H.DATA, 0, 7, Buffer.from("te")), frame(H.HEADERS, END_HEADERS | END_STREAM, 7, block([["x-t", "1"]])));
      r.send(frame(H.HEADERS, END_HEADERS, 9, block([...cl("4"), ["content-length", "5"]])));
      r.send(frame(H.HEADERS, END_HEADERS, 11, block(cl("-1"))));
      r.send(frame(H.HEADERS, END_HEADERS, 13, block(cl("4"))), frame(H.DATA, 0, 13, Buffer.from("te")), frame(H.DATA, END_STREAM, 13, Buffer.from("st")));
      await waitFor(() => r.resets().length === 6 && r.of(H.HEADERS).length === 2, "the resets and the reply to 13");
      assert.deepEqual(r.resets().sort((a, b) => a[0] - b[0]), [1, 3, 5, 7, 9, 11].map((id) => [id, 0x1]));
      assert.deepEqual(seen.find((s) => s.stream.id === 13)!.data.join(""), "test");
    });

    it("field values with NUL, CR, LF or edge whitespace, and names with a space, colon or upper case: RST_STREAM PROTOCOL_ERROR", async () => {
      const { raw, seen } = await start(echo);
      const r = raw();
      const bad: [string, string][] = [
        ["x-a", "a\0b"],
        ["x-a", "a\rb"],
        ["x-a", "a\nb"],
        ["x-a", " lead"],
        ["x-a", "trail\t"],
        ["x a", "1"],
        ["x:a", "1"],
        ["X-a", "1"],
        ["", "1"],
      ];
      bad.forEach((f, i) => r.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1 + 2 * i, block([...REQ, f]))));
      r.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1 + 2 * bad.length, block([[":method", "POST"], [":scheme", "http"], [":path", "/a\r\nb"]])));
      await served(r, 3 + 2 * bad.length, [...REQ, ["x-a", "in side"], ["x-b", ""]]);
      await waitFor(() => r.resets().length === bad.length + 1, "the resets");
      assert.deepEqual(r.resets(), Array.from({ length: bad.length + 1 }, (_, i) => [1 + 2 * i, 0x1]));
      assert.deepEqual(seen.map((s) => s.stream.id), [3 + 2 * bad.length]);
    });

    it("trailers from the client with a pseudo-header: RST_STREAM PROTOCOL_ERROR; plain trailers end the request", async () => {
      const { raw, seen } = await start(echo);
      const r = raw();
      r.send(frame(H.HEADERS, END_HEADERS, 1, block(REQ)), frame(H.DATA, 0, 1, Buffer.from("a")), frame(H.HEADERS, END_HEADERS | END_STREAM, 1, block([[":status", "200"]])));
      assert.equal(await r.reset(1), 0x1);
      r.send(frame(H.HEADERS, END_HEADERS, 3, block(REQ)), frame(H.HEADERS, END_HEADERS | END_STREAM, 3, block([["x-t", "1"]])));
      await waitFor(() => seen[1]?.ended === true, "stream 3 ended");
      assert.equal(seen[0]!.ended, false);
    });
  });

  describe("frame layout", () => {
    it("DATA whose pad length equals its payload: connection error PROTOCOL_ERROR (one less is all padding, accepted)", async () => {
      const { raw, seen } = await start(echo);
      const r = raw();
      r.send(frame(H.HEADERS, END_HEADERS, 1, block(REQ)), frame(H.DATA, PADDED, 1, Buffer.from([4, 0, 0, 0, 0])));
      await r.sync();
      assert.equal(r.of(H.GOAWAY).length, 0, "pad length payload-1 is fine");
      r.send(frame(H.DATA, PADDED, 1, Buffer.from([5, 0, 0, 0, 0])));
      const g = await r.goaway();
      assert.equal(g.code, 0x1);
      assert.match(g.debug, /padding/);
      assert.deepEqual(seen[0]!.data, []);
    });

    it(`a header block in ${MAX_CONTINUATIONS} CONTINUATION frames is read; one more is ENHANCE_YOUR_CALM`, async () => {
      const { raw, seen } = await start(echo);
      const r = raw();
      const b = block(REQ);
      const conts = (n: number, id: number): Buffer[] => Array.from({ length: n }, (_, i) => frame(H.CONTINUATION, i === n - 1 ? END_HEADERS : 0, id, i === n - 1 ? b : Buffer.alloc(0)));
      r.send(frame(H.HEADERS, END_STREAM, 1, Buffer.alloc(0)), ...conts(MAX_CONTINUATIONS, 1));
      await waitFor(() => seen.length === 1, "stream 1");
      r.send(frame(H.HEADERS, END_STREAM, 3, Buffer.alloc(0)), ...conts(MAX_CONTINUATIONS + 1, 3));
      const g = await r.goaway();
      assert.equal(g.code, 0xb);
      assert.match(g.debug, new RegExp(`more than ${MAX_CONTINUATIONS} CONTINUATION`));
    });

    it("a response header block larger than the client's MAX_FRAME_SIZE arrives as HEADERS + CONTINUATION, each within it", async () => {
      const big = "v".repeat(40_000);
      const { raw } = await start((s) => ({
        end() {
          s.respond([[":status", "200"], ["x-big", big]], false);
          s.end([["x-done", "1"]]);
        },
      }));
      for (const max of [16_384, 20_000]) {
        const r = raw(max === 16_384 ? undefined : settings([0x5, max]));
        r.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1, block(REQ)));
        await waitFor(() => r.of(H.HEADERS).length === 2, "the reply and its trailers");
        const parts = r.frames.filter((f) => f.stream === 1 && (f.type === H.HEADERS || f.type === H.CONTINUATION));
        assert.deepEqual(parts.map((f) => f.type), [H.HEADERS, H.CONTINUATION, H.CONTINUATION, H.HEADERS], `MAX_FRAME_SIZE ${max}`);
        assert.ok(parts.every((f) => f.payload.length <= max), `every frame within ${max}`);
        assert.equal(parts[0]!.payload.length, max, "the first frame is as large as allowed");
        assert.deepEqual(parts.map((f) => f.flags & END_HEADERS), [0, 0, END_HEADERS, END_HEADERS]);
        r.destroy();
      }
    });

    it("empty DATA frames without END_STREAM are metered: a flood is ENHANCE_YOUR_CALM, a burst of a few hundred is not", async () => {
      const { raw } = await start(echo);
      const r = raw();
      r.send(frame(H.HEADERS, END_HEADERS, 1, block(REQ)), ...Array.from({ length: 300 }, () => frame(H.DATA, 0, 1)));
      await r.sync();
      assert.equal(r.of(H.GOAWAY).length, 0);
      r.send(...Array.from({ length: FLOOD_BURST + 2000 }, () => frame(H.DATA, 0, 1)));
      const g = await r.goaway();
      assert.equal(g.code, 0xb);
      assert.match(g.debug, /too many control frames/);
    });
  });

  describe("meters (red-team findings)", () => {
    for (const [what, f] of [
      ["PING ACKs nobody asked for", () => frame(H.PING, 0x1, 0, Buffer.alloc(8))],
      ["SETTINGS ACKs beyond the one our SETTINGS asked for", () => frame(H.SETTINGS, 0x1, 0)],
    ] as const) {
      it(`${what} are metered like the control frames they are: a flood is ENHANCE_YOUR_CALM`, async () => {
        const { raw } = await start(echo);
        const r = raw();
        r.send(...Array.from({ length: 100 }, f));
        await r.sync();
        assert.equal(r.of(H.GOAWAY).length, 0, "a few are harmless");
        r.send(...Array.from({ length: FLOOD_BURST + 2000 }, f));
        const g = await r.goaway();
        assert.equal(g.code, 0xb);
        assert.match(g.debug, /too many control frames/);
      });
    }
    it("WINDOW_UPDATE + empty DATA on a stream we reset, repeated: GOAWAY ENHANCE_YOUR_CALM", async () => {
      const { raw } = await start(resetOnData);
      const r = raw();
      r.send(frame(H.HEADERS, END_HEADERS, 1, block(REQ)), frame(H.DATA, 0, 1, Buffer.from("x")));
      await r.reset(1);
      const pair = Buffer.concat([frame(H.WINDOW_UPDATE, 0, 1, u32(1)), frame(H.DATA, END_STREAM, 1)]);
      // Each pair costs two tokens; 2,000 pairs are 4x the burst, which at the refill rate would take 15 s.
      r.send(...Array.from({ length: CLOSED_FRAME_BURST * 2 }, () => pair));
      const g = await r.goaway();
      assert.equal(g.code, 0xb);
      assert.match(g.debug, /closed streams/);
    });

    it("the red team's sequence after a completed call (WINDOW_UPDATE + empty DATA END_STREAM on stream 1) ends the connection", async () => {
      const { raw } = await start(echo);
      const r = raw();
      await served(r, 1);
      const pair = Buffer.concat([frame(H.WINDOW_UPDATE, 0, 1, u32(1)), frame(H.DATA, END_STREAM, 1)]);
      r.send(...Array.from({ length: 5000 }, () => pair));
      const g = await r.goaway();
      assert.equal(g.code, 0x5);
    });

    it("WINDOW_UPDATEs alone on a closed stream: GOAWAY ENHANCE_YOUR_CALM past the burst", async () => {
      const { raw } = await start(echo);
      const r = raw();
      await served(r, 1);
      r.send(...Array.from({ length: CLOSED_FRAME_BURST + 2000 }, () => frame(H.WINDOW_UPDATE, 0, 1, u32(1))));
      const g = await r.goaway();
      assert.equal(g.code, 0xb);
      assert.match(g.debug, /closed streams/);
    });

    it("streams refused beyond MAX_CONCURRENT_STREAMS are capped: GOAWAY ENHANCE_YOUR_CALM after about a hundred", async () => {
      const { raw } = await start(() => ({}), { maxConcurrentStreams: 1 });
      const r = raw();
      const b = block(REQ);
      r.send(frame(H.HEADERS, END_HEADERS, 1, b), ...Array.from({ length: 1000 }, (_, i) => frame(H.HEADERS, END_HEADERS | END_STREAM, 3 + 2 * i, b)));
      const g = await r.goaway();
      assert.equal(g.code, 0xb);
      assert.match(g.debug, /too many stream errors/);
      const refused = r.resets().filter(([, c]) => c === 0x7).length;
      assert.ok(refused >= STREAM_ERROR_BURST && refused < 200, `${refused} refused before the GOAWAY`);
    });

    it(`a connection that sends more than ${MAX_OVERSIZE_LISTS} oversize header lists is closed (HPACK bomb)`, async () => {
      const { raw } = await start(echo, { maxHeaderListSize: 8192 });
      const r = raw();
      // Dynamic entry 62 of 4,000 bytes (incremental indexing; the value's length 4000 = 127 + 3873 in 7-bit prefix
      // form), then blocks naming it by one byte each: 10 references are 40 KB decoded from a 120-byte block.
      const entry = Buffer.concat([Buffer.from([0x40, 3]), Buffer.from("x-b"), Buffer.from([0x7f, 0x80 | (3873 & 0x7f), 3873 >> 7]), Buffer.alloc(4000, 0x61)]);
      r.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 1, Buffer.concat([block(REQ), entry])));
      const bomb = Buffer.concat([block(REQ), Buffer.alloc(10, 0x80 | 62)]);
      for (let i = 0; i < MAX_OVERSIZE_LISTS + 1; i++) r.send(frame(H.HEADERS, END_HEADERS | END_STREAM, 3 + 2 * i, bomb));
      const g = await r.goaway();
      assert.equal(g.code, 0xb);
      assert.match(g.debug, /over the size limit/);
      assert.equal(r.resets().filter(([, c]) => c === 0xb).length, MAX_OVERSIZE_LISTS, "the first ones were refused one by one");
    });

    it(`a header block over ${MAX_HEADER_BLOCK} bytes ends the connection even when maxHeaderListSize allows more`, async () => {
      const { raw } = await start(echo, { maxHeaderListSize: 64 << 20 });
      const r = raw();
      const fill = Buffer.alloc(16_384);
      const n = Math.ceil(MAX_HEADER_BLOCK / fill.length);
      r.send(frame(H.HEADERS, 0, 1, fill), ...Array.from({ length: n }, (_, i) => frame(H.CONTINUATION, i === n - 1 ? END_HEADERS : 0, 1, fill)));
      const g = await r.goaway();
      assert.equal(g.code, 0xb);
      assert.match(g.debug, new RegExp(`header block larger than ${MAX_HEADER_BLOCK}`));
    });
  });
});

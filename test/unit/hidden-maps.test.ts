/**
 * The hot classes whose fields take a timestamp keep one hidden map whatever their instances went through. V8 gives a
 * field the representation of its first value; a field that starts as a small integer and later takes a fraction
 * (performance.now(), Date.now()) moves its instance to a new map and deoptimizes every function compiled against
 * the old one. For FrameWriter that happened at the first PING ACK a connection held (every grpc-go client sends
 * PINGs): the whole write path of every connection was compiled again. Checked with V8's own %HaveSameMap in a child
 * process (test/support/hidden-maps-probe.ts).
 *
 * The gRPC server's routes too: every call reads its route's kind, handler and codec, and routes made by an object
 * spread each had a map of their own, so those reads were megamorphic and code compiled for one server's routes
 * failed its map check on another's (the warm-up's private gateway and the real one, docs/warmup.md).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const probe = fileURLToPath(new URL("../support/hidden-maps-probe.ts", import.meta.url));

describe("hidden maps of the hot classes", () => {
  it("a FrameWriter that held a PING ACK, a Subscriber the sweep marked and ConnectionTimers that sent a PING keep their class's map; every gRPC route of two servers shares one", () => {
    const out = execFileSync(process.execPath, ["--allow-natives-syntax", "--import", "tsx", probe], { encoding: "utf8", timeout: 60_000 });
    assert.deepEqual(JSON.parse(out), { FrameWriter: true, Subscriber: true, ConnectionTimers: true, Routes: true });
  });
});

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { isSpanContextValid } from "@opentelemetry/api";
import { parseTraceParent } from "@opentelemetry/core";
import { TraceId, nonZeroWord, parseTraceparent, randomWord, spanHex, xoshiro128ss } from "../../src/observe/trace-ids.js";

/**
 * The reference: what the OpenTelemetry SDK's W3C propagator makes of a header (its regular expression, then the
 * API's validity check), as trace id, span id and flags in hex. The gateway's own parser must agree on every input.
 */
function reference(header: string): string | undefined {
  const sc = parseTraceParent(header);
  if (!sc || !isSpanContextValid(sc)) return undefined;
  return `${sc.traceId}/${sc.spanId}/${sc.traceFlags}`;
}

function ours(header: string): string | undefined {
  const p = parseTraceparent(header);
  return p === undefined ? undefined : `${p.trace.hex}/${spanHex(p.s0, p.s1)}/${p.flags}`;
}

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN = "00f067aa0ba902b7";
const VALID = `00-${TRACE}-${SPAN}-01`;

describe("parseTraceparent agrees with the OpenTelemetry SDK's propagator", () => {
  it("on valid, edge and malformed headers", () => {
    const cases = [
      VALID,
      `00-${TRACE}-${SPAN}-00`,
      `00-${TRACE}-${SPAN}-ff`,
      `00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01`,
      `00-80000000000000000000000000000001-8000000000000001-01`,
      ` ${VALID}`,
      `${VALID} `,
      ` ${VALID} `,
      `\t${VALID}`,
      `\u00a0${VALID}`,
      `  ${VALID}`,
      `${VALID}  `,
      `${VALID}-extra`,
      `01-${TRACE}-${SPAN}-01`,
      `01-${TRACE}-${SPAN}-01-extra-fields`,
      `01-${TRACE}-${SPAN}-01-`,
      `01-${TRACE}-${SPAN}-01x`,
      `fe-${TRACE}-${SPAN}-01-more `,
      `ff-${TRACE}-${SPAN}-01`,
      `00-00000000000000000000000000000000-${SPAN}-01`,
      `00-${TRACE}-0000000000000000-01`,
      `00-${TRACE.toUpperCase()}-${SPAN}-01`,
      `00-${TRACE}-${SPAN.toUpperCase()}-01`,
      `0A-${TRACE}-${SPAN}-01`,
      `00-${TRACE}-${SPAN}-0g`,
      `00-${TRACE.slice(1)}-${SPAN}-01`,
      `00-${TRACE}0-${SPAN}-01`,
      `00_${TRACE}-${SPAN}-01`,
      `00-${TRACE}_${SPAN}-01`,
      `00-${TRACE}-${SPAN}_01`,
      `00-${TRACE.slice(0, 31)}\u00e9-${SPAN}-01`,
      "",
      " ",
      "00",
      VALID.slice(0, 54),
    ];
    for (const h of cases) assert.equal(ours(h), reference(h), JSON.stringify(h));
  });

  it("on random mutations of a valid header (a seeded generator: the same cases every run)", () => {
    let seed = 0x2545f491;
    const next = (n: number): number => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) % n;
    };
    const alphabet = "0123456789abcdefABCDEF- \tgxz0000";
    let valid = 0;
    for (let i = 0; i < 20_000; i++) {
      const chars = [...(next(4) === 0 ? `0${1 + next(9)}-${TRACE}-${SPAN}-01-tail` : VALID)];
      for (let m = next(3); m >= 0; m--) {
        const at = next(chars.length + 1);
        const op = next(3);
        const c = alphabet[next(alphabet.length)]!;
        if (op === 0) chars[at] = c;
        else if (op === 1) chars.splice(at, 0, c);
        else chars.splice(at, 1);
      }
      const h = chars.join("");
      const want = reference(h);
      if (want !== undefined) valid++;
      assert.equal(ours(h), want, JSON.stringify(h));
    }
    // The mutations must reach both sides of the check, or the comparison proves little.
    assert.ok(valid > 1_000 && valid < 19_000, `${valid} valid of 20,000`);
  });
});

describe("id words", () => {
  it("are xoshiro128**: the reference implementation's first words for the seed 1, 2, 3, 4", () => {
    const next = xoshiro128ss(Int32Array.of(1, 2, 3, 4));
    // From the authors' C code (prng.di.unimi.it/xoshiro128starstar.c), as signed 32-bit integers.
    assert.deepEqual(Array.from({ length: 6 }, next), [11520, 0, 5927040, 70819200, 2031721883, 1637235492]);
    assert.throws(() => xoshiro128ss(new Int32Array(4)), /not all zeros/);
  });

  it("make distinct ids with every bit set about half the time", () => {
    const ids = new Set<string>();
    const ones = new Array<number>(32).fill(0);
    const n = 100_000;
    for (let i = 0; i < n; i++) {
      const hi = randomWord();
      const lo = nonZeroWord();
      assert.ok(lo !== 0);
      ids.add(spanHex(hi, lo));
      for (let b = 0; b < 32; b++) ones[b]! += (hi >>> b) & 1;
    }
    assert.equal(ids.size, n);
    for (const [b, k] of ones.entries()) assert.ok(k > 0.48 * n && k < 0.52 * n, `bit ${b} set ${k} times of ${n}`);
    const a = TraceId.random();
    const b = TraceId.random();
    assert.match(a.hex, /^[0-9a-f]{32}$/);
    assert.notEqual(a.hex, b.hex);
  });
});

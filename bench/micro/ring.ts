import { Ring } from "../../src/broker/index.js";
import { figure } from "../lib/figure.js";
import type { Figure, RunMode } from "../lib/schema.js";
import { timeTasks } from "../lib/tiny.js";

/** Events per burst: a subscriber that fell behind by a burst, then drained it into its stream. */
const BURST = 64;
/** Bursts per timed call, so one sample is well above the timer's resolution. */
const REPS = 32;

/**
 * Ring buffer push/pump: push a burst of BURST entries into a subscriber ring, then pump them all out (shift into a
 * sink), per entry. Baseline: the same with a plain Array (push/shift), what a naive queue would do.
 */
export async function ringFigures(mode: RunMode): Promise<Figure[]> {
  const bytes = Buffer.alloc(256);
  const ring = new Ring<Buffer>(1024);
  const arr: Buffer[] = [];
  let sunk = 0;
  const sink = (b: Buffer): void => {
    sunk += b.length;
  };
  const t = await timeTasks(mode, {
    ring() {
      for (let r = 0; r < REPS; r++) {
        for (let i = 0; i < BURST; i++) ring.push(bytes);
        for (let b = ring.shift(); b !== undefined; b = ring.shift()) sink(b);
      }
    },
    array() {
      for (let r = 0; r < REPS; r++) {
        for (let i = 0; i < BURST; i++) arr.push(bytes);
        for (let b = arr.shift(); b !== undefined; b = arr.shift()) sink(b);
      }
    },
  });
  if (sunk === 0) throw new Error("ring benchmark pumped nothing");
  return [
    figure("ring-push-pump", `Ring push + pump, burst of ${BURST}, per event`, t["ring"]!.meanNs / REPS / BURST, {
      unit: "ns",
      baseline: { label: "Array push/shift", value: t["array"]!.meanNs / REPS / BURST },
    }),
  ];
}

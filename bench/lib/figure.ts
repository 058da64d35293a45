import type { Figure, Target } from "./schema.js";

/** Options of figure(). */
export interface FigureOptions {
  unit: string;
  /** Default "lower" (costs, latencies). */
  better?: "lower" | "higher";
  /** The same-run reference. */
  baseline?: { label: string; value: number };
  target?: Target;
  note?: string;
}

/** Build a Figure, computing the ratio to its baseline (value / baseline). */
export function figure(id: string, label: string, value: number, o: FigureOptions): Figure {
  const f: Figure = { id, label, value: round(value), unit: o.unit, better: o.better ?? "lower" };
  if (o.baseline) {
    f.baseline = { label: o.baseline.label, value: round(o.baseline.value) };
    if (o.baseline.value !== 0 && Number.isFinite(o.baseline.value)) f.ratio = round(value / o.baseline.value, 4);
  }
  if (o.target) f.target = o.target;
  if (o.note) f.note = o.note;
  return f;
}

/** A target "value <op> limit" judged now. */
export function targetOf(text: string, value: number | undefined, op: "<=" | "<" | ">=" | ">", limit: number): Target {
  if (value === undefined || !Number.isFinite(value)) return { text, met: null };
  const met = op === "<=" ? value <= limit : op === "<" ? value < limit : op === ">=" ? value >= limit : value > limit;
  return { text, met };
}

/** Round to `digits` significant decimals without turning small numbers into 0. */
export function round(v: number, digits = 3): number {
  if (!Number.isFinite(v) || v === 0) return v;
  const mag = Math.floor(Math.log10(Math.abs(v)));
  const places = Math.max(0, digits - 1 - mag);
  return Number(v.toFixed(Math.min(places, 12)));
}

import { createRequire } from "node:module";
import type { Gauge } from "prom-client";

/**
 * The one place the gateway reads prom-client's private internals. prom-client 15's public `Gauge.get()` is async
 * (it runs collect callbacks), while the OTLP mirror of a gauge's `inc`/`dec` needs the value right after the change,
 * synchronously; so this reads the gauge's private `hashMap` (label hash -> {value, labels}). The accessor checks that
 * shape, and test/unit/prom-client-internals.test.ts exercises it against the real library, failing with the same
 * message as `promClientProblem` when an upgrade changes it.
 *
 * Written against prom-client 15.1.
 */

/** The installed prom-client version ("unknown" if its package.json cannot be read). */
export const PROM_CLIENT_VERSION: string = (() => {
  try {
    return (createRequire(import.meta.url)("prom-client/package.json") as { version: string }).version;
  } catch {
    return "unknown";
  }
})();

/** What `gaugeSeries` reads. */
export const GAUGE_HASHMAP_SHAPE = "Gauge's private hashMap (label hash -> {value, labels})";

/** The message for a shape `what` that prom-client no longer has. */
export function promClientProblem(what: string): string {
  return `prom-client ${PROM_CLIENT_VERSION} changed ${what}; the gateway was written against prom-client 15.1 (see src/main/prom-client-internals.ts)`;
}

/** One labelled series of a gauge and its current value. */
export interface GaugeSeries {
  value: number;
  labels: Record<string, string>;
}

/** Every series of `gauge` with its current value, read synchronously; undefined when prom-client's shape changed. */
export function gaugeSeries(gauge: Gauge): GaugeSeries[] | undefined {
  const map = (gauge as unknown as { hashMap?: unknown }).hashMap;
  if (typeof map !== "object" || map === null) return undefined;
  const out = Object.values(map) as Array<Partial<GaugeSeries> | null>;
  return out.every((e) => e !== null && typeof e === "object" && typeof e.value === "number" && typeof e.labels === "object" && e.labels !== null)
    ? (out as GaugeSeries[])
    : undefined;
}

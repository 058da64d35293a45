/**
 * The shape of `bench/results/<name>.json`: one run of `npm run bench`. Every figure carries the baseline it was
 * measured against in the same run and the ratio to it, so results from different machines are compared by ratio
 * only, never by absolute value.
 */

/** Bump when the file shape changes incompatibly. */
export const RESULT_SCHEMA_VERSION = 1;

/** The machine a run was taken on. */
export interface MachineInfo {
  /** e.g. "AMD EPYC 7B13". */
  cpuModel: string;
  /** Logical CPUs Node sees. */
  cores: number;
  /** e.g. "v20.20.2". */
  node: string;
  /** `${platform}-${arch}`. */
  platform: string;
  /** Total memory, bytes. */
  totalMemBytes: number;
  /** 1-minute load average when the run started and when it ended: how busy the machine was. */
  loadAvgStart: number;
  loadAvgEnd: number;
  /** True when the 1-minute load average at start or end exceeded the core count (figures are noisy). */
  busy: boolean;
}

/** A measured value's reference, measured in the same run. */
export interface Baseline {
  /** What the baseline is, e.g. "direct grpc-js client". */
  label: string;
  value: number;
}

/** A target the figure is judged against and whether this run met it. */
export interface Target {
  /** Human form, e.g. "ratio <= 1.2". */
  text: string;
  /** null when the figure could not be judged (e.g. not measured in this mode). */
  met: boolean | null;
}

/** One reported number. */
export interface Figure {
  /** Stable key, unique in its suite, e.g. "fanout-1000-per-subscriber". */
  id: string;
  /** What was measured, for the table. */
  label: string;
  value: number;
  /** e.g. "ns/op", "us", "req/s", "bytes". */
  unit: string;
  /** Which direction is good. */
  better: "lower" | "higher";
  /** The same-run reference; absent only for figures that are their own reference (e.g. a chosen threshold). */
  baseline?: Baseline;
  /**
   * The measured path over its baseline: value / baseline.value, or for a figure that is a difference ("added
   * latency") the total over the baseline, as the suite states in its label. Absent without a baseline or when it is 0.
   */
  ratio?: number;
  target?: Target;
  /** Anything needed to read the figure (sample count, caveats). */
  note?: string;
}

/** How a suite ended. */
export type SuiteStatus = "ok" | "failed" | "not-available" | "skipped";

/** One suite's outcome. */
export interface SuiteResult {
  /** e.g. "micro", "rest", "codec", "invoke", "fanout". */
  name: string;
  /** One line: what the suite measures. */
  title: string;
  status: SuiteStatus;
  /** Why it failed / is not available / was skipped. */
  reason?: string;
  /** Wall time spent, ms. */
  durationMs: number;
  figures: Figure[];
  /** The suite's own return value when it came from another module, kept verbatim for later reading. */
  raw?: unknown;
}

/** The whole results file. */
export interface RunResult {
  schemaVersion: number;
  /** The file's base name. */
  name: string;
  /** "full", "quick" or "dry-run". */
  mode: RunMode;
  /** ISO time the run started. */
  startedAt: string;
  durationMs: number;
  /** The git commit the run was taken at (with "-dirty" when the tree had changes), or "unknown". */
  commit: string;
  machine: MachineInfo;
  suites: SuiteResult[];
}

/** How long a run is allowed to take. */
export type RunMode = "full" | "quick" | "dry-run";

/** Problems with a results object, empty when it has the documented shape (used by the smoke test). */
export function checkRunResult(v: unknown): string[] {
  const errors: string[] = [];
  const isObj = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null && !Array.isArray(x);
  const num = (x: unknown): boolean => typeof x === "number" && Number.isFinite(x);
  if (!isObj(v)) return ["result must be an object"];
  if (v["schemaVersion"] !== RESULT_SCHEMA_VERSION) errors.push(`schemaVersion must be ${RESULT_SCHEMA_VERSION}`);
  for (const k of ["name", "startedAt", "commit"]) if (typeof v[k] !== "string") errors.push(`${k} must be a string`);
  if (!["full", "quick", "dry-run"].includes(v["mode"] as string)) errors.push("mode must be full, quick or dry-run");
  if (!num(v["durationMs"])) errors.push("durationMs must be a finite number");
  const m = v["machine"];
  if (!isObj(m)) errors.push("machine must be an object");
  else {
    if (typeof m["cpuModel"] !== "string" || m["cpuModel"] === "") errors.push("machine.cpuModel must be a non-empty string");
    if (!num(m["cores"]) || (m["cores"] as number) < 1) errors.push("machine.cores must be a positive number");
    if (typeof m["node"] !== "string" || !String(m["node"]).startsWith("v")) errors.push("machine.node must be a version string");
  }
  const suites = v["suites"];
  if (!Array.isArray(suites)) return [...errors, "suites must be an array"];
  suites.forEach((s: unknown, i) => {
    const at = `suites[${i}]`;
    if (!isObj(s)) return void errors.push(`${at} must be an object`);
    if (typeof s["name"] !== "string") errors.push(`${at}.name must be a string`);
    if (!["ok", "failed", "not-available", "skipped"].includes(s["status"] as string)) errors.push(`${at}.status is invalid`);
    if (!Array.isArray(s["figures"])) return void errors.push(`${at}.figures must be an array`);
    (s["figures"] as unknown[]).forEach((f, j) => {
      const fat = `${at}.figures[${j}]`;
      if (!isObj(f)) return void errors.push(`${fat} must be an object`);
      if (typeof f["id"] !== "string" || typeof f["label"] !== "string" || typeof f["unit"] !== "string") errors.push(`${fat} needs id, label and unit strings`);
      if (!num(f["value"])) errors.push(`${fat}.value must be a finite number`);
      if (f["better"] !== "lower" && f["better"] !== "higher") errors.push(`${fat}.better must be lower or higher`);
      const b = f["baseline"];
      if (b !== undefined) {
        if (!isObj(b) || typeof b["label"] !== "string" || !num(b["value"])) errors.push(`${fat}.baseline needs a label and a finite value`);
        else if ((b["value"] as number) !== 0 && !num(f["ratio"])) errors.push(`${fat}.ratio must be a finite number when there is a baseline`);
      }
    });
  });
  return errors;
}

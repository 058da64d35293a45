/**
 * The fuzz loop (run by test/fuzz/run.ts for a time and by test/fuzz/h2-fuzz.test.ts for a few fixed seeds): inputs
 * `makeInput(seed, i)` sent `concurrency` at a time, each batch followed by the liveness checks of target.ts. A
 * failed check is a finding: the batch and the one before it (the inputs that can have caused it) are saved to
 * test/fuzz/crashes/<seed>-<index>.json with the seed and indices, the gateway is restarted and the run goes on.
 * test/integration/h2-fuzz-regressions.test.ts replays every saved file.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { loadCorpus, makeInput, type FuzzInput } from "./inputs.js";
import { Finding, FuzzTarget, mib, socketsOf } from "./target.js";

export const CRASH_DIR = new URL("./crashes/", import.meta.url);

export interface FuzzOptions {
  seed: number;
  /** Stop after this many inputs, or at `deadline` (epoch ms), whichever is first. */
  count?: number;
  deadline?: number;
  /** First input index (to resume or replay a range). */
  start?: number;
  concurrency?: number;
  /** Save findings to test/fuzz/crashes/ (the test run reports them without writing). */
  save?: boolean;
  progressMs?: number;
  log?: (line: string) => void;
}

export interface FuzzResult {
  inputs: number;
  connections: number;
  findings: { message: string; file?: string; indices: number[] }[];
  maxRss: number;
}

/** A saved finding: the inputs, in the order they ran, and what failed after them. */
export interface CrashFile {
  seed: number;
  finding: string;
  inputs: { index: number; label: string; halfClose: boolean; chunks: string[] }[];
}

export function encodeInput(index: number, input: FuzzInput): CrashFile["inputs"][number] {
  return { index, label: input.label, halfClose: input.halfClose, chunks: input.chunks.map((c) => c.toString("base64")) };
}

export function decodeInput(i: CrashFile["inputs"][number]): FuzzInput {
  return { label: i.label, halfClose: i.halfClose, chunks: i.chunks.map((c) => Buffer.from(c, "base64")) };
}

export async function fuzz(o: FuzzOptions): Promise<FuzzResult> {
  const log = o.log ?? ((l: string) => console.log(l));
  const corpus = loadCorpus();
  const concurrency = o.concurrency ?? 4;
  const result: FuzzResult = { inputs: 0, connections: 0, findings: [], maxRss: 0 };
  let target = await FuzzTarget.start();
  log(`fuzz: seed ${o.seed}, ${corpus.length} corpus seeds, gateway pid ${target.pid} grpc port ${target.port}, baseline RSS ${mib(target.baselineRss)} MiB, ${target.baselineSockets} sockets`);
  let index = o.start ?? 0;
  const end = (o.count ?? Infinity) + index;
  let prev: { index: number; input: FuzzInput }[] = [];
  let lastProgress = Date.now();
  const started = Date.now();
  const progress = (): void => {
    const rss = target.rss();
    log(`fuzz: ${Math.round((Date.now() - started) / 1000)} s, ${result.inputs} inputs, ${result.connections + target.connections} connections, RSS ${mib(rss)} MiB, gateway sockets ${socketsOf(target.pid)}, findings ${result.findings.length}`);
  };
  try {
    while (index < end && (o.deadline === undefined || Date.now() < o.deadline)) {
      const batch = Array.from({ length: Math.min(concurrency, end - index) }, (_, k) => ({ index: index + k, input: makeInput(o.seed, index + k, corpus) }));
      index += batch.length;
      try {
        await Promise.all(batch.map((b) => target.run(b.input)));
        result.inputs += batch.length;
        await target.liveness();
        result.maxRss = Math.max(result.maxRss, target.rss());
      } catch (e) {
        if (!(e instanceof Finding)) throw e;
        const suspects = [...prev, ...batch];
        const f = { message: e.message, indices: suspects.map((s) => s.index), file: undefined as string | undefined };
        log(`fuzz: FINDING after inputs ${f.indices.join(", ")} (seed ${o.seed}): ${e.message}`);
        for (const s of suspects) log(`fuzz:   ${s.input.label}`);
        if (o.save !== false) {
          mkdirSync(CRASH_DIR, { recursive: true });
          const crash: CrashFile = { seed: o.seed, finding: e.message, inputs: suspects.map((s) => encodeInput(s.index, s.input)) };
          const file = fileURLToPath(new URL(`${o.seed}-${batch[0]!.index}.json`, CRASH_DIR));
          writeFileSync(file, JSON.stringify(crash, null, 1) + "\n");
          f.file = file;
          log(`fuzz:   saved to ${file}`);
        }
        result.findings.push(f);
        result.connections += target.connections;
        await target.stop();
        target = await FuzzTarget.start();
        prev = [];
        continue;
      }
      prev = batch;
      if (o.progressMs !== undefined && Date.now() - lastProgress >= o.progressMs) {
        lastProgress = Date.now();
        progress();
      }
    }
    try {
      await target.socketsReleased();
    } catch (e) {
      if (!(e instanceof Finding)) throw e;
      log(`fuzz: FINDING at the end (seed ${o.seed}): ${e.message}`);
      result.findings.push({ message: e.message, indices: [] });
    }
    progress();
  } finally {
    result.connections += target.connections;
    await target.stop();
  }
  return result;
}

/** Replay saved inputs in order against a fresh gateway, checking liveness after each; the first finding, if any. */
export async function replay(inputs: FuzzInput[], log: (l: string) => void = () => undefined): Promise<string | undefined> {
  const target = await FuzzTarget.start();
  try {
    for (const input of inputs) {
      log(`replay: ${input.label}`);
      await target.run(input);
      try {
        await target.liveness();
      } catch (e) {
        if (e instanceof Finding) return `${input.label}: ${e.message}`;
        throw e;
      }
    }
    try {
      await target.socketsReleased();
    } catch (e) {
      if (e instanceof Finding) return e.message;
      throw e;
    }
    return undefined;
  } finally {
    await target.stop();
  }
}

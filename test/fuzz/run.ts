/**
 * The HTTP/2 and gRPC fuzzer's command line (docs/operations.md "Fuzzing"):
 *
 *   FUZZ_SECONDS=120 npx tsx test/fuzz/run.ts          a run for a time, random seed (printed), progress every 10 s
 *   FUZZ_SEED=1234 FUZZ_SECONDS=60 npx tsx test/fuzz/run.ts    the same run again
 *   FUZZ_SEED=1234 FUZZ_INDEX=5678 npx tsx test/fuzz/run.ts    replay one input of that run (FUZZ_COUNT=n: n inputs)
 *   npx tsx test/fuzz/run.ts --replay test/fuzz/crashes/1234-5676.json   replay a saved finding
 *   npx tsx test/fuzz/run.ts --write-corpus             rewrite test/fuzz/corpus/*.bin from inputs.ts's seeds
 *
 * FUZZ_CONCURRENCY (default 4) inputs run at once. Exits 1 when anything was found (saved to test/fuzz/crashes/).
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { CORPUS_DIR, loadCorpus, makeInput, seedCorpus, serialize } from "./inputs.js";
import { decodeInput, fuzz, replay, type CrashFile } from "./fuzz.js";

const env = process.env;
const args = process.argv.slice(2);

async function main(): Promise<number> {
  if (args[0] === "--write-corpus") {
    mkdirSync(CORPUS_DIR, { recursive: true });
    for (const s of seedCorpus()) writeFileSync(new URL(`${s.name}.bin`, CORPUS_DIR), serialize(s.frames, s.settings));
    console.log(`fuzz: wrote ${seedCorpus().length} seeds to ${CORPUS_DIR.pathname}`);
    return 0;
  }
  if (args[0] === "--replay") {
    const crash = JSON.parse(readFileSync(args[1]!, "utf8")) as CrashFile;
    console.log(`fuzz: replaying ${crash.inputs.length} inputs of seed ${crash.seed} (found: ${crash.finding})`);
    const r = await replay(crash.inputs.map(decodeInput), (l) => console.log(l));
    console.log(r === undefined ? "fuzz: replay passed every check" : `fuzz: replay FAILED: ${r}`);
    return r === undefined ? 0 : 1;
  }
  const seed = env["FUZZ_SEED"] ? Number(env["FUZZ_SEED"]) : Math.floor(Math.random() * 2 ** 31);
  if (!Number.isInteger(seed)) throw new Error(`FUZZ_SEED must be an integer, got ${env["FUZZ_SEED"]}`);
  if (env["FUZZ_INDEX"]) {
    const index = Number(env["FUZZ_INDEX"]);
    const count = Number(env["FUZZ_COUNT"] ?? 1);
    const corpus = loadCorpus();
    const inputs = Array.from({ length: count }, (_, k) => makeInput(seed, index + k, corpus));
    console.log(`fuzz: replaying seed ${seed} inputs ${index}..${index + count - 1}`);
    const r = await replay(inputs, (l) => console.log(l));
    console.log(r === undefined ? "fuzz: replay passed every check" : `fuzz: replay FAILED: ${r}`);
    return r === undefined ? 0 : 1;
  }
  const seconds = Number(env["FUZZ_SECONDS"] ?? 60);
  console.log(`fuzz: seed ${seed} (replay with FUZZ_SEED=${seed}), ${seconds} s`);
  const r = await fuzz({
    seed,
    deadline: Date.now() + seconds * 1000,
    ...(env["FUZZ_COUNT"] ? { count: Number(env["FUZZ_COUNT"]) } : {}),
    concurrency: Number(env["FUZZ_CONCURRENCY"] ?? 4),
    progressMs: 10_000,
  });
  console.log(`fuzz: done: ${r.inputs} inputs, ${r.connections} connections, max RSS ${Math.round(r.maxRss / 2 ** 20)} MiB, ${r.findings.length} findings`);
  for (const f of r.findings) console.log(`fuzz: finding: ${f.message}${f.file ? ` (${f.file})` : ""}`);
  return r.findings.length === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error("fuzz: the fuzzer itself failed:", e);
    process.exit(2);
  },
);

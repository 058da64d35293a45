/**
 * Embedded scheduler measurements (standalone: `npx tsx bench/scheduler.ts [--quick]`).
 * 1. Accuracy on the real clock: cron jobs firing every second; lateness = ms past the whole second at delivery.
 * 2. Scale on a fake clock: schedule N jobs (ops/s), then fire all of them once (firings/s through the one timer).
 */
import { createMemoryScheduler } from "../src/runtime/embedded/scheduler.js";
import { FakeClock } from "../test/support/fake-clock.js";

const quick = process.argv.includes("--quick");

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function accuracy(seconds: number, jobs: number): Promise<void> {
  const s = createMemoryScheduler();
  const late: number[] = [];
  s.setHandler(async () => void late.push(Date.now() % 1000));
  for (let i = 0; i < jobs; i++) await s.schedule({ name: `a${i}`, schedule: "* * * * * *", data: "" });
  await new Promise((r) => setTimeout(r, seconds * 1000 + 50));
  s.close();
  late.sort((a, b) => a - b);
  console.log(`accuracy: ${jobs} jobs x ${seconds} s on the real clock: ${late.length} firings, lateness p50 ${pct(late, 50)} ms, p99 ${pct(late, 99)} ms, max ${late.at(-1)} ms`);
}

async function scale(n: number): Promise<void> {
  const clock = new FakeClock();
  const s = createMemoryScheduler({ clock });
  let fired = 0;
  s.setHandler(async () => void fired++);
  let t = performance.now();
  for (let i = 0; i < n; i++) await s.schedule({ name: `j${i}`, schedule: `@every ${60 + (i % 60)}s`, data: "" });
  const schedMs = performance.now() - t;
  t = performance.now();
  clock.advance(120_000);
  const fireMs = performance.now() - t;
  console.log(
    `scale: ${n} jobs scheduled in ${schedMs.toFixed(0)} ms (${Math.round(n / (schedMs / 1000))}/s); ${fired} firings in ${fireMs.toFixed(0)} ms (${Math.round(fired / (fireMs / 1000))}/s); timers pending: ${clock.pending}`,
  );
  s.close();
}

await accuracy(quick ? 3 : 10, 50);
await scale(quick ? 20_000 : 100_000);

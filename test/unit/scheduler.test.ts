import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code } from "../../src/shared/code.js";
import { createMemoryScheduler, type MemoryScheduler } from "../../src/runtime/embedded/scheduler.js";
import { FakeClock } from "../support/fake-clock.js";

const iso = (ms: number | undefined): string | undefined => (ms === undefined ? undefined : new Date(ms).toISOString());

/** A scheduler on a fake clock that records each firing as [name, ISO time, data]. */
function setup(start?: string): { clock: FakeClock; s: MemoryScheduler; fired: Array<[string, string, string]> } {
  const clock = new FakeClock(start);
  const s = createMemoryScheduler({ clock });
  const fired: Array<[string, string, string]> = [];
  s.setHandler(async (name, data) => void fired.push([name, iso(clock.now())!, data]));
  return { clock, s, fired };
}

const at = (fired: Array<[string, string, string]>, name?: string): string[] => fired.filter((f) => !name || f[0] === name).map((f) => f[1]);

async function code(p: Promise<unknown>): Promise<Code> {
  try {
    await p;
  } catch (e) {
    return (e as { code: Code }).code;
  }
  throw new Error("expected a rejection");
}

describe("embedded scheduler (fake clock)", () => {
  it("fires a 6-field cron on its seconds", async () => {
    const { clock, s, fired } = setup();
    await s.schedule({ name: "c", schedule: "*/20 * * * * *", data: "d" });
    clock.advance(60_000);
    assert.deepEqual(at(fired), ["2030-01-01T00:00:20.000Z", "2030-01-01T00:00:40.000Z", "2030-01-01T00:01:00.000Z"]);
    assert.deepEqual(fired[0]!.slice(0, 1).concat(fired[0]![2]), ["c", "d"]);
    s.close();
  });

  it("@every has no drift over many late wake-ups", async () => {
    const { clock, s, fired } = setup();
    clock.lateMs = 37; // every timer runs 37 ms late
    await s.schedule({ name: "e", schedule: "@every 1m30s", data: "" });
    clock.advance(500 * 90_000 + 1000);
    assert.equal(fired.length, 500);
    // each firing happened 37 ms after its exact time: the error never accumulates
    fired.forEach((f, k) => assert.equal(Date.parse(f[1]), Date.parse("2030-01-01T00:00:00Z") + (k + 1) * 90_000 + 37));
    const rec = await s.get("e");
    assert.equal(iso(rec!.lastFiredAt), iso(Date.parse("2030-01-01T00:00:00Z") + 500 * 90_000));
    s.close();
  });

  it("fires descriptors on their boundaries", async () => {
    const { clock, s, fired } = setup("2030-01-01T00:30:00Z");
    await s.schedule({ name: "h", schedule: "@hourly", data: "" });
    await s.schedule({ name: "d", schedule: "@daily", data: "" });
    await s.schedule({ name: "w", schedule: "@weekly", data: "" });
    clock.advanceTo("2030-01-07T00:00:00Z");
    assert.equal(at(fired, "h")[0], "2030-01-01T01:00:00.000Z");
    assert.equal(at(fired, "h").length, 6 * 24 - 1 + 1);
    assert.deepEqual(at(fired, "d"), ["2030-01-02", "2030-01-03", "2030-01-04", "2030-01-05", "2030-01-06", "2030-01-07"].map((d) => `${d}T00:00:00.000Z`));
    assert.deepEqual(at(fired, "w"), ["2030-01-06T00:00:00.000Z"]);
    s.close();
  });

  it("due_time alone fires once, then the job is gone", async () => {
    const { clock, s, fired } = setup();
    await s.schedule({ name: "once", dueTime: "2030-01-01T00:00:05Z", data: "" });
    await s.schedule({ name: "once-rel", dueTime: "90s", data: "" });
    clock.advance(3_600_000);
    assert.deepEqual(at(fired, "once"), ["2030-01-01T00:00:05.000Z"]);
    assert.deepEqual(at(fired, "once-rel"), ["2030-01-01T00:01:30.000Z"]);
    assert.equal(await s.get("once"), undefined);
    assert.deepEqual(await s.list(), []);
    assert.equal(s.timerArmed, false);
    s.close();
  });

  it("a due_time in the past fires at once", async () => {
    const { clock, s, fired } = setup();
    await s.schedule({ name: "late", dueTime: "2020-01-01T00:00:00Z", data: "" });
    clock.advance(0);
    assert.deepEqual(at(fired), ["2030-01-01T00:00:00.000Z"]);
    s.close();
  });

  it("due_time then schedule: first at due_time, then on the schedule", async () => {
    const { clock, s, fired } = setup();
    await s.schedule({ name: "x", dueTime: "2030-01-01T00:00:07Z", schedule: "@every 10s", repeats: 3, data: "" });
    clock.advance(600_000);
    assert.deepEqual(at(fired), ["2030-01-01T00:00:07.000Z", "2030-01-01T00:00:17.000Z", "2030-01-01T00:00:27.000Z"]);
    s.close();
  });

  it("repeats stops after that many firings and removes the job", async () => {
    const { clock, s, fired } = setup();
    await s.schedule({ name: "r", schedule: "@every 1s", repeats: 3, data: "" });
    clock.advance(2500);
    assert.equal((await s.get("r"))!.timesFired, 2);
    clock.advance(60_000);
    assert.equal(fired.length, 3);
    assert.equal(await s.get("r"), undefined);
    s.close();
  });

  it("ttl expires the job", async () => {
    const { clock, s, fired } = setup();
    await s.schedule({ name: "t", schedule: "@every 10s", ttl: "35s", data: "" });
    assert.equal(iso((await s.get("t"))!.expiresAt), "2030-01-01T00:00:35.000Z");
    clock.advance(120_000);
    assert.deepEqual(at(fired), ["2030-01-01T00:00:10.000Z", "2030-01-01T00:00:20.000Z", "2030-01-01T00:00:30.000Z"]);
    assert.equal(await s.get("t"), undefined);
    s.close();
  });

  it("delete stops future firings", async () => {
    const { clock, s, fired } = setup();
    await s.schedule({ name: "a", schedule: "@every 5s", data: "" });
    await s.schedule({ name: "b", schedule: "@every 5s", data: "" });
    clock.advance(10_000);
    await s.delete("a");
    clock.advance(10_000);
    assert.equal(at(fired, "a").length, 2);
    assert.equal(at(fired, "b").length, 4);
    assert.equal(await code(s.delete("a")), Code.NOT_FOUND);
    s.close();
  });

  it("get and list report the spec and the run state", async () => {
    const { clock, s } = setup();
    await s.schedule({ name: "b", schedule: "0 */5 * * * *", ttl: "1h", repeats: 10, data: '{"x":1}' });
    await s.schedule({ name: "a", dueTime: "2030-01-02T00:00:00Z", data: "" });
    clock.advance(301_000);
    const b = await s.get("b");
    assert.deepEqual(
      { ...b, createdAt: iso(b!.createdAt), nextFireAt: iso(b!.nextFireAt), lastFiredAt: iso(b!.lastFiredAt), expiresAt: iso(b!.expiresAt) },
      {
        name: "b",
        schedule: "0 */5 * * * *",
        ttl: "1h",
        repeats: 10,
        data: '{"x":1}',
        createdAt: "2030-01-01T00:00:00.000Z",
        timesFired: 1,
        lastFiredAt: "2030-01-01T00:05:00.000Z",
        nextFireAt: "2030-01-01T00:10:00.000Z",
        expiresAt: "2030-01-01T01:00:00.000Z",
      },
    );
    const list = await s.list();
    assert.deepEqual(list.map((j) => j.name), ["a", "b"]);
    assert.equal(iso(list[0]!.nextFireAt), "2030-01-02T00:00:00.000Z");
    assert.equal(list[0]!.timesFired, 0);
    assert.equal(list[0]!.lastFiredAt, undefined);
    s.close();
  });

  it("refuses an existing name with ALREADY_EXISTS unless overwrite is asked", async () => {
    const { clock, s, fired } = setup();
    await s.schedule({ name: "n", schedule: "@every 10s", data: "1" });
    assert.equal(await code(s.schedule({ name: "n", schedule: "@every 1s", data: "2" })), Code.ALREADY_EXISTS);
    clock.advance(10_000);
    assert.deepEqual(fired.map((f) => f[2]), ["1"]);
    await s.schedule({ name: "n", schedule: "@every 1s", data: "2" }, undefined, { overwrite: true });
    clock.advance(2000);
    assert.deepEqual(fired.map((f) => f[2]), ["1", "2", "2"]);
    s.close();
  });

  it("invalid specs are INVALID_ARGUMENT naming the field and change nothing", async () => {
    const { s } = setup();
    for (const [spec, field] of [
      [{ name: "v", schedule: "* * * * *", data: "" }, "schedule"],
      [{ name: "v", data: "" }, "schedule"],
      [{ name: "v", dueTime: "1s", repeats: 2, data: "" }, "repeats"],
      [{ name: "v", dueTime: "1s", ttl: "1m", data: "" }, "ttl"],
      [{ name: "v", dueTime: "whenever", data: "" }, "due_time"],
      [{ name: "", dueTime: "1s", data: "" }, "name"],
    ] as const) {
      await assert.rejects(s.schedule(spec), (e: { code: Code; message: string }) => e.code === Code.INVALID_ARGUMENT && e.message.startsWith(`${field} `));
    }
    assert.equal(s.size, 0);
    assert.equal(s.timerArmed, false);
    s.close();
  });

  it("keeps one timer for any number of jobs, and none after close", async () => {
    const { clock, s, fired } = setup();
    for (let i = 0; i < 200; i++) await s.schedule({ name: `j${i}`, schedule: `@every ${1 + (i % 7)}s`, data: "" });
    assert.equal(clock.pending, 1);
    clock.advance(7000);
    assert.equal(clock.pending, 1);
    assert.ok(fired.length > 200);
    s.close();
    assert.equal(clock.pending, 0);
    assert.equal(s.timerArmed, false);
    assert.equal(await code(s.schedule({ name: "z", dueTime: "1s", data: "" })), Code.UNAVAILABLE);
    s.close(); // twice is fine
  });

  it("a failing handler does not stop the schedule", async () => {
    const clock = new FakeClock();
    const warned: unknown[] = [];
    const noop = (): void => undefined;
    const s = createMemoryScheduler({ clock, logger: { debug: noop, info: noop, error: noop, warn: (o) => void warned.push(o) } });
    let calls = 0;
    s.setHandler(async () => {
      calls++;
      throw new Error("publish failed");
    });
    await s.schedule({ name: "f", schedule: "@every 1s", data: "" });
    clock.advance(3000);
    await new Promise((r) => setImmediate(r));
    assert.equal(calls, 3);
    assert.equal(warned.length, 3);
    assert.equal((await s.get("f"))!.timesFired, 3);
    s.close();
  });

  it("runs on node:test mock timers with the default clock", async (t) => {
    t.mock.timers.enable({ apis: ["setTimeout", "Date"], now: Date.parse("2030-01-01T00:00:00Z") });
    const s = createMemoryScheduler();
    const fired: string[] = [];
    s.setHandler(async () => void fired.push(new Date().toISOString()));
    await s.schedule({ name: "m", schedule: "*/2 * * * * *", repeats: 3, data: "" });
    // mock.timers.tick runs only timers due at the end of the step: step one period at a time
    for (let i = 0; i < 5; i++) t.mock.timers.tick(2000);
    assert.deepEqual(fired, ["2030-01-01T00:00:02.000Z", "2030-01-01T00:00:04.000Z", "2030-01-01T00:00:06.000Z"]);
    assert.equal(s.size, 0);
    s.close();
  });
});

describe("embedded scheduler at the edge of representable time", () => {
  it("a schedule ends at 9999-12-31T23:59:59.999Z instead of storing a time it cannot hold", async () => {
    const { clock, s, fired } = setup("9999-12-31T23:59:57Z");
    await s.schedule({ name: "last", schedule: "@every 1s", data: "" });
    clock.advance(10_000);
    assert.deepEqual(at(fired, "last"), ["9999-12-31T23:59:58.000Z", "9999-12-31T23:59:59.000Z"]);
    assert.deepEqual(await s.list(), [], "it ended after its last representable firing");
    assert.equal(s.timerArmed, false, "no timer left spinning");
    s.close();
  });

  it("a job due in year 9999 arms timers within setTimeout's 2^31-1 ms and does not hold back the others", async () => {
    const { clock, s, fired } = setup();
    await s.schedule({ name: "far", dueTime: "9999-12-31T23:59:59Z", data: "" });
    await s.schedule({ name: "near", schedule: "@every 1s", repeats: 3, data: "" });
    clock.advance(5_000);
    assert.equal(at(fired, "near").length, 3);
    assert.ok(clock.delays.every((d) => d >= 0 && d <= 2_147_483_647), `delays ${clock.delays.join(", ")}`);
    const far = await s.get("far");
    assert.equal(iso(far!.nextFireAt), "9999-12-31T23:59:59.000Z");
    await s.delete("far");
    assert.equal(s.timerArmed, false);
    s.close();
  });

  it("refuses every time past the limit in-band, naming the field, and stores nothing", async () => {
    const { s } = setup();
    for (const [spec, field] of [
      [{ dueTime: "P300000Y" }, "due_time"],
      [{ dueTime: "P999999999Y" }, "due_time"],
      [{ dueTime: "9999999999h" }, "due_time"],
      [{ schedule: "@every 3000000000h" }, "schedule"],
      [{ schedule: "@hourly", ttl: "9999999999h" }, "ttl"],
    ] as const) {
      await assert.rejects(s.schedule({ name: "x", data: "", ...spec }), (e: Error & { code: Code }) => {
        assert.equal(e.code, Code.INVALID_ARGUMENT);
        assert.ok(e.message.includes(field), e.message);
        return true;
      });
    }
    assert.equal(s.size, 0);
    assert.equal(s.timerArmed, false);
    s.close();
  });
});

describe("due queue", () => {
  it("refuses a NaN due time, which would break the heap order for every other job", async () => {
    const { DueQueue } = await import("../../src/runtime/embedded/due-queue.js");
    const q = new DueQueue();
    q.set("a", 2);
    q.set("b", 1);
    assert.throws(() => q.set("c", NaN), /due time of c is NaN/);
    assert.throws(() => q.set("a", NaN), /NaN/);
    assert.deepEqual(q.peek(), { name: "b", at: 1 });
    assert.equal(q.size, 2);
  });
});

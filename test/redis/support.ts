import type { CloudEvent } from "../../src/shared/cloudevent.js";
import type { RuntimeLogger } from "../../src/runtime/runtime.js";
import { createRedisRuntime, type RedisRuntime, type RedisRuntimeOptions } from "../../src/runtime/redis/index.js";

/** Log lines a runtime wrote (tests assert on what operators would see). */
export interface CapturedLogger extends RuntimeLogger {
  readonly lines: { level: string; obj: object; msg?: string }[];
}

export function captureLogger(): CapturedLogger {
  const lines: { level: string; obj: object; msg?: string }[] = [];
  const at = (level: string) => (obj: object, msg?: string) => void lines.push({ level, obj, ...(msg !== undefined ? { msg } : {}) });
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

/** A started redis runtime on `url` ("a replica"), closed by the caller. */
export async function replica(url: string, opts: Partial<RedisRuntimeOptions> = {}): Promise<RedisRuntime & { logger: CapturedLogger }> {
  const logger = captureLogger();
  const rt = createRedisRuntime({ pubsubName: "pubsub", logger, redisUrl: url, ...opts });
  await rt.start();
  await until(async () => (await rt.health()).status === "Healthy", 5000, "runtime healthy");
  return Object.assign(rt, { logger });
}

/** Poll `cond` every 20 ms until it holds (bounded by `ms`). */
export async function until(cond: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A text event with JSON data, the way the gateway's publish builds one. */
export function event(id: string, data: unknown = { n: id }): CloudEvent {
  return {
    id,
    source: "test",
    spec_version: "1.0",
    type: "test.event",
    attributes: { datacontenttype: { ce_string: "application/json" } },
    text_data: JSON.stringify(data),
    data: "text_data",
  };
}

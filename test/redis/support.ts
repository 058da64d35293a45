import { connect, createServer, type AddressInfo, type Socket } from "node:net";
import type { Redis } from "ioredis";
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

/**
 * Keep the server busy for `ms` with a Lua loop on `holder`'s connection. Commands other connections send meanwhile
 * wait in their sockets and are read, in the order they arrived, once it ends (a CLIENT KILL sent after a write is
 * then run after that write, before its reply is written: the write ran and its reply is lost).
 */
export function holdServer(holder: Redis, ms: number): Promise<unknown> {
  const spin = `local t = redis.call('TIME')
    local s = tonumber(t[1]) * 1000000 + tonumber(t[2])
    while true do
      local n = redis.call('TIME')
      if tonumber(n[1]) * 1000000 + tonumber(n[2]) - s > tonumber(ARGV[1]) then break end
    end
    return 1`;
  return holder.eval(spin, 0, ms * 1000);
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A TCP proxy in front of a Redis server that can hold back the replies of one MULTI (see holdNextMulti). */
export interface RedisProxy {
  readonly url: string;
  /**
   * Hold back what the server sends on the next connection that sends MULTI, until `release()`: that client's read is
   * then in flight for as long as the test wants. `held` resolves once such a MULTI went through.
   */
  holdNextMulti(): { held: Promise<void>; release(): void };
  close(): Promise<void>;
}

export async function startRedisProxy(targetPort: number): Promise<RedisProxy> {
  const sockets = new Set<Socket>();
  let arm: (() => { onHold(resume: () => void): void }) | undefined;
  const server = createServer((client) => {
    const upstream = connect(targetPort, "127.0.0.1");
    sockets.add(client);
    sockets.add(upstream);
    let holding = false;
    const heldBack: Buffer[] = [];
    const resume = (): void => {
      holding = false;
      for (const b of heldBack.splice(0)) client.write(b);
    };
    client.on("data", (chunk: Buffer) => {
      if (arm && /\r\nmulti\r\n/i.test(chunk.toString("latin1"))) {
        const hold = arm();
        arm = undefined;
        holding = true;
        hold.onHold(resume);
      }
      upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      if (holding) heldBack.push(chunk);
      else client.write(chunk);
    });
    const end = (): void => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("close", end);
    upstream.on("close", end);
    client.on("error", end);
    upstream.on("error", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `redis://127.0.0.1:${port}`,
    holdNextMulti() {
      let resume: (() => void) | undefined;
      let released = false;
      let heldResolve!: () => void;
      const held = new Promise<void>((r) => (heldResolve = r));
      arm = () => ({
        onHold(r) {
          resume = r;
          heldResolve();
          if (released) r();
        },
      });
      return {
        held,
        release() {
          released = true;
          resume?.();
        },
      };
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

#!/usr/bin/env node
import { GatewayError } from "../shared/gateway-error.js";
import { createGateway } from "./gateway.js";
import type { GatewayOptions } from "../config/options.js";
import { HELP, parseCli } from "./cli-args.js";
import { tuneV8 } from "./v8-flags.js";
import { CLI_WARMUP_CALLS, CLI_WARMUP_EVENTS } from "./warmup.js";

/** A signal repeated within this many ms of the first is the same signal delivered twice (see onSignal). */
const DUPLICATE_SIGNAL_MS = 1000;
/** On a second signal, how long uWS worker threads get to close their sockets before the process exits. */
const EXIT_THREADS_MS = 1500;

async function main(): Promise<void> {
  let opts: GatewayOptions | "help";
  try {
    opts = parseCli(process.argv.slice(2), process.env);
  } catch (e) {
    process.stderr.write(`platform-gateway: ${(e as Error).message}\nRun with --help for the options.\n`);
    process.exit(2);
  }
  if (opts === "help") {
    process.stdout.write(HELP);
    return;
  }
  // Before the gateway (and its worker threads) start: see v8-flags.ts.
  tuneV8();
  // Like the V8 flags, a process-level choice: an application embedding the gateway asks for a warm-up itself.
  opts.warmupEvents ??= CLI_WARMUP_EVENTS;
  opts.warmupCalls ??= CLI_WARMUP_CALLS;
  if (opts.configPath === undefined) {
    const { existsSync } = await import("node:fs");
    if (existsSync("config/gateway.yaml")) opts.configPath = "config/gateway.yaml";
  }
  // Signal handlers go in before startup so a signal that arrives while starting still shuts down cleanly.
  let firstSignalAt: number | undefined;
  let starting: Promise<Awaited<ReturnType<typeof createGateway>> | undefined> | undefined;
  const onSignal = (sig: NodeJS.Signals): void => {
    if (firstSignalAt !== undefined) {
      // Ctrl-C under `npm start` reaches the gateway twice: from the terminal (same process group) and forwarded by
      // npm a moment later. A repeat that close to the first is that one keypress, not a request to stop at once.
      if (Date.now() - firstSignalAt < DUPLICATE_SIGNAL_MS) return;
      process.stderr.write(`platform-gateway: second ${sig}, exiting now\n`);
      // uWS worker threads must close their sockets before the process exits (Node aborts on a thread's open uWS
      // handles): at once, bounded.
      void (starting ?? Promise.resolve(undefined))
        .then((gw) => Promise.race([gw?.threads?.destroy(), new Promise((r) => setTimeout(r, EXIT_THREADS_MS))]))
        .finally(() => process.exit(130));
      return;
    }
    firstSignalAt = Date.now();
    void (starting ?? Promise.resolve(undefined))
      .then((gw) => gw?.close())
      .then(
        () => process.exit(0),
        (e: unknown) => {
          process.stderr.write(`platform-gateway: shutdown failed: ${(e as Error).message}\n`);
          process.exit(1);
        },
      );
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  starting = createGateway(opts).catch((e: unknown) => {
    const msg = e instanceof GatewayError ? e.rawMessage : (e as Error).message;
    process.stderr.write(`platform-gateway: ${msg}\n`);
    process.exit(1);
  });
  await starting;
}

void main();

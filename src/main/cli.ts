#!/usr/bin/env node
import { parseArgs } from "node:util";
import { GatewayError } from "../shared/gateway-error.js";
import { createGateway } from "./gateway.js";
import { LOG_LEVELS, type LogLevel } from "./logger.js";
import type { GatewayOptions } from "./options.js";

const HELP = `platform-gateway: dynamic gRPC gateway with state, pub/sub and triggers

Usage: platform-gateway [options]

Options (each has an environment variable; the flag wins):
  --config <file>         services configuration, YAML or JSON         GATEWAY_CONFIG (default config/gateway.yaml when present)
  --host <host>           host both servers bind                        GATEWAY_HOST (default 127.0.0.1)
  --grpc-port <port>      gRPC port, 0 = ephemeral                      GATEWAY_GRPC_PORT (default 5000)
  --http-port <port>      REST port, 0 = ephemeral                      GATEWAY_HTTP_PORT (default 8080)
  --sidecar <kind>        embedded | dapr                               GATEWAY_SIDECAR (default embedded)
  --pubsub-name <name>    sidecar pub/sub component name                GATEWAY_PUBSUB_NAME (default: config, else pubsub)
  --api-key <key>         accepted x-api-key, repeatable                GATEWAY_API_KEYS (comma-separated)
  --log-level <level>     ${LOG_LEVELS.join("|")}   GATEWAY_LOG_LEVEL (default info)
  --max-body-bytes <n>    largest REST body                             GATEWAY_MAX_BODY_BYTES (default 4194304)
  --forward-header <h>    header forwarded to backends, repeatable      GATEWAY_FORWARD_HEADERS (comma-separated)
  --shutdown-timeout <ms> bound on graceful shutdown                    GATEWAY_SHUTDOWN_TIMEOUT_MS (default 10000)
  --dapr-host <host>      Dapr sidecar host                             DAPR_HOST (default 127.0.0.1)
  --dapr-grpc-port <port> Dapr sidecar gRPC port                        DAPR_GRPC_PORT (default 50001)
  -h, --help              print this help

Dapr tokens come from DAPR_API_TOKEN (sent to the sidecar) and APP_API_TOKEN (required on sidecar callbacks).
With no API key the gateway accepts every caller and refuses to bind a non-loopback host.
`;

function int(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n)) throw new GatewayError(3, `--${name} must be an integer (got ${JSON.stringify(v)})`);
  return n;
}

function list(v: string | undefined): string[] | undefined {
  return v === undefined ? undefined : v.split(",").map((s) => s.trim()).filter(Boolean);
}

/** Turn argv and the environment into GatewayOptions. */
export function parseCli(argv: string[], env: NodeJS.ProcessEnv): GatewayOptions | "help" {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      config: { type: "string" },
      host: { type: "string" },
      "grpc-port": { type: "string" },
      "http-port": { type: "string" },
      sidecar: { type: "string" },
      "pubsub-name": { type: "string" },
      "api-key": { type: "string", multiple: true },
      "log-level": { type: "string" },
      "max-body-bytes": { type: "string" },
      "forward-header": { type: "string", multiple: true },
      "shutdown-timeout": { type: "string" },
      "dapr-host": { type: "string" },
      "dapr-grpc-port": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) return "help";
  const opts: GatewayOptions = {};
  const set = <K extends keyof GatewayOptions>(k: K, v: GatewayOptions[K] | undefined): void => {
    if (v !== undefined) opts[k] = v;
  };
  set("configPath", values.config ?? env["GATEWAY_CONFIG"]);
  set("host", values.host ?? env["GATEWAY_HOST"]);
  set("grpcPort", int("grpc-port", values["grpc-port"] ?? env["GATEWAY_GRPC_PORT"]));
  set("httpPort", int("http-port", values["http-port"] ?? env["GATEWAY_HTTP_PORT"]));
  set("sidecar", (values.sidecar ?? env["GATEWAY_SIDECAR"]) as GatewayOptions["sidecar"]);
  set("pubsubName", values["pubsub-name"] ?? env["GATEWAY_PUBSUB_NAME"]);
  set("apiKeys", values["api-key"] ?? list(env["GATEWAY_API_KEYS"]));
  set("logLevel", (values["log-level"] ?? env["GATEWAY_LOG_LEVEL"]) as LogLevel | undefined);
  set("maxBodyBytes", int("max-body-bytes", values["max-body-bytes"] ?? env["GATEWAY_MAX_BODY_BYTES"]));
  set("forwardHeaders", values["forward-header"] ?? list(env["GATEWAY_FORWARD_HEADERS"]));
  set("shutdownTimeoutMs", int("shutdown-timeout", values["shutdown-timeout"] ?? env["GATEWAY_SHUTDOWN_TIMEOUT_MS"]));
  set("daprHost", values["dapr-host"] ?? env["DAPR_HOST"]);
  set("daprGrpcPort", int("dapr-grpc-port", values["dapr-grpc-port"] ?? env["DAPR_GRPC_PORT"]));
  return opts;
}

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
  if (opts.configPath === undefined) {
    const { existsSync } = await import("node:fs");
    if (existsSync("config/gateway.yaml")) opts.configPath = "config/gateway.yaml";
  }
  // Signal handlers go in before startup so a signal that arrives while starting still shuts down cleanly.
  let signals = 0;
  let starting: Promise<Awaited<ReturnType<typeof createGateway>> | undefined> | undefined;
  const onSignal = (sig: NodeJS.Signals): void => {
    if (++signals > 1) {
      process.stderr.write(`platform-gateway: second ${sig}, exiting now\n`);
      process.exit(130);
    }
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

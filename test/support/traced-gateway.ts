import { after, before } from "node:test";
import type { GatewayOptions } from "../../src/config/options.js";
import type { TestGateway } from "./gateway.js";
import { startOtlpReceiver, type OtlpReceiver } from "./otlp-receiver.js";
import { useGatewayOn, type RuntimeFixture } from "./runtimes.js";
import type { WsTestClient } from "./web.js";
import type { OrderBackend } from "./backends/order-backend.js";

/** The embedded runtime, whatever $GATEWAY_TEST_RUNTIMES says (suites about threads, not runtimes). */
export const EMBEDDED: RuntimeFixture = { name: "embedded", setup: async () => ({ options: { sidecar: "embedded" }, close: async () => {} }) };

/** What useTracedGatewayOn gives a suite. */
export interface TracedGateway {
  gw(): TestGateway;
  receiver(): OtlpReceiver;
  /** WebSockets the suite opened: terminated after it. */
  sockets: WsTestClient[];
}

/**
 * Inside a `describe`: a real OTLP receiver, and a gateway on `fixture` exporting its spans there every 20 ms, both
 * started in `before()` and closed in `after()` (useGatewayOn).
 */
export function useTracedGatewayOn(fixture: RuntimeFixture, options: GatewayOptions): TracedGateway {
  let receiver: OtlpReceiver | undefined;
  const traced: GatewayOptions = { ...options, traceExportDelayMs: 20 };
  const sockets: WsTestClient[] = [];
  // Registered before useGatewayOn's hook, so the gateway starts with the receiver's URL.
  before(async () => {
    receiver = await startOtlpReceiver();
    traced.otlpTracesEndpoint = receiver.url;
  });
  const gw = useGatewayOn(fixture, traced);
  after(async () => {
    for (const c of sockets) c.ws.terminate();
    await receiver?.close();
  });
  return {
    gw,
    receiver: () => {
      if (!receiver) throw new Error("the OTLP receiver is not started yet (use it inside a test)");
      return receiver;
    },
    sockets,
  };
}

/**
 * Gateway options with the order backend registered as `orders` (one channel) and, given a receiver, spans exported to
 * it every 20 ms (none: tracing off).
 */
export function tracedOrdersOptions(backend: OrderBackend, receiver: OtlpReceiver | undefined, extra: GatewayOptions = {}): GatewayOptions {
  return {
    services: [{ name: "orders", grpc: { host: "127.0.0.1", port: backend.port, channels: 1 } }],
    ...(receiver ? { otlpTracesEndpoint: receiver.url, traceExportDelayMs: 20 } : {}),
    ...extra,
  };
}

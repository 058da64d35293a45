import type { GatewayOverrides } from "../../src/main/gateway.js";
import type { GatewayOptions } from "../../src/main/options.js";

/** A runtime the facility suites run against. Suites loop over `runtimeFixtures` so every suite covers every runtime. */
export interface RuntimeFixture {
  /** "embedded" or "dapr". */
  name: string;
  /**
   * Prepare the runtime (e.g. start the Dapr-protocol test sidecar) and say how to start a gateway on it.
   * `close()` tears down whatever was started.
   */
  setup(): Promise<{ options: Partial<GatewayOptions>; overrides?: GatewayOverrides; close(): Promise<void> }>;
}

const embedded: RuntimeFixture = {
  name: "embedded",
  async setup() {
    return { options: { sidecar: "embedded" }, async close() {} };
  },
};

/** Every runtime fixture. The Dapr fixture (test sidecar) is added by the Dapr runtime work. */
export const runtimeFixtures: RuntimeFixture[] = [embedded];

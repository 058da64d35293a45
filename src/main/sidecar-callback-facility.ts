import type { Facility, GatewayContext } from "./context.js";

/** Sidecar callbacks (Dapr AppCallback services hosted on the gateway gRPC port). PLACEHOLDER until the dapr issue lands. */
export function createSidecarCallbackFacility(_ctx: GatewayContext): Facility {
  return {};
}

import type { Facility, GatewayContext } from "./context.js";

/** Dynamic dispatch facility (platform.Gateway + /v1/gateway and /v1/grpc routes, backends). PLACEHOLDER until the dynamic dispatch issue lands. */
export function createDispatchFacility(_ctx: GatewayContext): Facility {
  return {};
}

import type { Facility, GatewayContext } from "./context.js";

/** State facility (platform.State + /v1/state routes). PLACEHOLDER until the state issue lands. */
export function createStateFacility(_ctx: GatewayContext): Facility {
  return {};
}

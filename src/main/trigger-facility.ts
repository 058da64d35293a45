import type { Facility, GatewayContext } from "./context.js";

/** Trigger facility (platform.Trigger + /v1/trigger routes). PLACEHOLDER until the trigger issue lands. */
export function createTriggerFacility(_ctx: GatewayContext): Facility {
  return {};
}

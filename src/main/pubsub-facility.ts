import type { Facility, GatewayContext } from "./context.js";

/** Pub/sub facility (Pubsub + /v1/pubsub routes, broker). PLACEHOLDER until the pub/sub issue lands. */
export function createPubsubFacility(_ctx: GatewayContext): Facility {
  return {};
}

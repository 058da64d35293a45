import type { GatewayContext } from "../ops/context.js";
import type { Facility } from "./facility.js";
import { stateGrpc } from "../grpc/state.js";
import { createStateOps } from "../ops/state.js";
import { stateRoutes } from "../rest/state.js";

/** State facility: `platform.State` over gRPC and the `/v1/state` routes, over one set of shared operations. */
export function createStateFacility(ctx: GatewayContext): Facility {
  const ops = createStateOps(ctx);
  return { grpc: { "platform.State": stateGrpc(ops) }, routes: stateRoutes(ops, ctx.options.maxUnreadReplyBytes) };
}

import type { GatewayContext } from "../ops/context.js";
import type { Facility } from "./facility.js";
import { triggerGrpc } from "../grpc/trigger.js";
import { configuredCronJobs, startCronApplier, type CronApplier } from "../ops/trigger-crons.js";
import { createTriggerOps } from "../ops/trigger.js";
import { triggerRoutes } from "../rest/trigger.js";

/**
 * Trigger facility: `platform.Trigger` and the `/v1/trigger` routes, the one job handler that turns each firing into
 * an event on the trigger's target topic, and the services config's `jobs.crons` scheduled as triggers at start.
 */
export function createTriggerFacility(ctx: GatewayContext): Facility {
  const ops = createTriggerOps(ctx);
  ctx.runtime.jobs.setHandler((name, data) => ops.fire(name, data));
  let applier: CronApplier | undefined;
  const stop = (): void => applier?.stop();
  return {
    grpc: { "platform.Trigger": triggerGrpc(ops, ctx.logger) },
    routes: triggerRoutes(ops),
    async start() {
      // A bad cron entry fails startup (thrown here); a runtime not ready yet is retried in the background.
      const specs = configuredCronJobs(ctx.services);
      applier = startCronApplier(ctx.runtime.jobs, specs, ctx.logger);
      await applier.firstPass;
    },
    async close() {
      stop();
    },
    destroy: stop,
  };
}

import { inBandError, inBandOk, type InBandStatus } from "../shared/status.js";
import { GatewayError } from "../shared/gateway-error.js";
import { Code } from "../shared/code.js";
import type { Logger } from "../observe/logger.js";
import type { TriggerOps, TriggerRecord } from "../ops/trigger.js";
import type { TriggerHandlers } from "../gen/gateway/platform/Trigger.js";
import type { GrpcImpl } from "./server.js";


/**
 * Run `op` and report its outcome in-band, as docs/contract.md "In-band or error status" requires for ScheduleTrigger (and the other trigger calls
 * follow): the gRPC status is OK and `status.success` is false with the code name and message on failure.
 */
async function inBand<T extends object>(logger: Logger, method: string, op: () => Promise<T>, empty: T): Promise<T & { status: InBandStatus }> {
  try {
    return { status: inBandOk(), ...(await op()) };
  } catch (e) {
    const err = GatewayError.from(e);
    if (err.code === Code.INTERNAL || err.code === Code.UNKNOWN) logger.error({ err: e, method }, "trigger operation failed");
    return { ...empty, status: inBandError(err) };
  }
}

/** `platform.Trigger` over gRPC: ScheduleTrigger, GetTrigger, DeleteTrigger, ListTriggers, all with in-band errors. */
export function triggerGrpc(ops: TriggerOps, logger: Logger): GrpcImpl<TriggerHandlers> {
  return {
    ScheduleTrigger: (req, { signal }) =>
      inBand(logger, "ScheduleTrigger", async () => (await ops.schedule(req, signal), {}), {}),
    GetTrigger: (req, { signal }) =>
      inBand<{ trigger: TriggerRecord | null }>(logger, "GetTrigger", async () => ({ trigger: await ops.get(req.name, signal) }), { trigger: null }),
    DeleteTrigger: (req, { signal }) =>
      inBand(logger, "DeleteTrigger", async () => (await ops.delete(req.name, signal), {}), {}),
    ListTriggers: (_req, { signal }) =>
      inBand(logger, "ListTriggers", async () => ({ triggers: await ops.list(signal) }), { triggers: [] }),
  };
}

import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import type { JobsPort, JobSpec } from "../runtime/jobs-port.js";
import type { ServiceRegistry } from "../config/services.js";
import type { Logger } from "../observe/logger.js";
import { toJobSpec, toTriggerRecord } from "./trigger.js";

/** Delay between attempts when the runtime cannot take the configured crons yet (sidecar still starting). */
const RETRY_MS = 5_000;

/**
 * Turn every `jobs.crons` entry of the services config into a trigger spec. Throws one INVALID_ARGUMENT listing
 * every bad entry (naming the service, the index and the field) and every name used twice: a bad config fails startup.
 */
export function configuredCronJobs(services: ServiceRegistry, now = Date.now()): JobSpec[] {
  const problems: string[] = [];
  const specs: JobSpec[] = [];
  const seen = new Map<string, string>();
  for (const svc of services.all) {
    (svc.jobs?.crons ?? []).forEach((c, i) => {
      const where = `service "${svc.name}".jobs.crons[${i}]`;
      const earlier = seen.get(c.name);
      if (earlier) return void problems.push(`${where}: trigger name "${c.name}" is also used by ${earlier}`);
      seen.set(c.name, where);
      try {
        specs.push(toJobSpec({ name: c.name, target_topic: c.targetTopic, schedule: c.schedule }, now));
      } catch (e) {
        problems.push(`${where}: ${GatewayError.from(e).rawMessage}`);
      }
    });
  }
  if (problems.length > 0) throw new GatewayError(Code.INVALID_ARGUMENT, `invalid cron jobs in the services config: ${problems.join("; ")}`);
  return specs;
}

/**
 * Make each configured cron a trigger. The config wins: an existing trigger of the same name with the same schedule
 * and target topic is left as is (keeping its counters across restarts with a persistent scheduler); one that differs
 * is replaced. Returns the specs that could not be applied because the runtime failed (not because of the spec).
 */
export async function applyCronJobs(jobs: JobsPort, specs: JobSpec[], logger: Logger, signal?: AbortSignal): Promise<JobSpec[]> {
  const failed: JobSpec[] = [];
  for (const spec of specs) {
    try {
      const existing = await jobs.get(spec.name, signal);
      if (existing) {
        const rec = toTriggerRecord(existing);
        if (existing.schedule === spec.schedule && existing.data === spec.data && !existing.dueTime && !existing.repeats && !existing.ttl) {
          logger.info({ trigger: spec.name }, "configured cron already scheduled; left as is");
          continue;
        }
        await jobs.delete(spec.name, signal).catch((e: unknown) => {
          if (GatewayError.from(e).code !== Code.NOT_FOUND) throw e;
        });
        logger.warn({ trigger: spec.name, previous: rec ?? { data: existing.data } }, "configured cron replaces an existing trigger of the same name");
      }
      await jobs.schedule(spec, signal);
      logger.info({ trigger: spec.name, schedule: spec.schedule }, "configured cron scheduled");
    } catch (e) {
      logger.error({ trigger: spec.name, err: GatewayError.from(e) }, "configured cron could not be scheduled; retrying");
      failed.push(spec);
    }
  }
  return failed;
}

/** A background loop applying configured crons until all are in or it is stopped. */
export interface CronApplier {
  /** Resolves after the first pass (failures then retry in the background). */
  readonly firstPass: Promise<void>;
  /** Stop retrying. Safe to call twice. */
  stop(): void;
}

/** Apply `specs` now, retrying the ones the runtime refused every RETRY_MS until done or stopped. */
export function startCronApplier(jobs: JobsPort, specs: JobSpec[], logger: Logger): CronApplier {
  const ac = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const pass = async (pending: JobSpec[]): Promise<void> => {
    if (ac.signal.aborted || pending.length === 0) return;
    const failed = await applyCronJobs(jobs, pending, logger, ac.signal);
    if (failed.length > 0 && !ac.signal.aborted) {
      timer = setTimeout(() => void pass(failed), RETRY_MS);
      timer.unref();
    }
  };
  return {
    firstPass: pass(specs),
    stop() {
      ac.abort();
      if (timer) clearTimeout(timer);
    },
  };
}

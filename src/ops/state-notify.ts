import { randomUUID } from "node:crypto";
import { SPEC_VERSION, type CloudEvent } from "../shared/cloudevent.js";
import type { GatewayContext } from "./context.js";
import type { CounterMetric } from "../observe/metrics.js";
import type { ChangeInput } from "./state-types.js";

/** Topic of Tier 0 (infrastructure) state change events. */
export const STATE_CHANGE_TOPIC = "state.change";
/** Source of Tier 0 events. */
export const STATE_CHANGE_SOURCE = "urn:com.platform.api";
/** Tier 0 event types by action. */
export const STATE_CHANGE_TYPES = { save: "com.platform.api.state-saved", delete: "com.platform.api.state-deleted" } as const;
/** The Error-level log text of a lost notification (docs/state.md "Delivery and failures"). */
export const PUBLISH_FAILED_MESSAGE = "State change publish failed after a successful write";

/** Which notification a write publishes. */
export type ChangeTier = "tier0" | "tier1";
export type ChangeAction = "save" | "delete";

/** Tier 1 when `change` carries both a topic and a cloudevent; Tier 0 otherwise (docs/state.md "Change notifications"). */
export function tierOf(change: ChangeInput | null | undefined): ChangeTier {
  return change && change.topic && change.cloudevent ? "tier1" : "tier0";
}

/** The Tier 0 payload (docs/state.md "Change notifications"), members in the documented order. */
export interface Tier0Payload {
  service: string;
  key?: string;
  keys?: string[];
  action: ChangeAction;
  value?: string;
}

/** A Tier 0 CloudEvent: fresh id, JSON payload as text_data with `datacontenttype: application/json`. */
export function tier0Event(payload: Tier0Payload): CloudEvent {
  return {
    id: randomUUID(),
    source: STATE_CHANGE_SOURCE,
    spec_version: SPEC_VERSION,
    type: STATE_CHANGE_TYPES[payload.action],
    attributes: { datacontenttype: { ce_string: "application/json", attr: "ce_string" } },
    text_data: JSON.stringify(payload),
    data: "text_data",
  };
}

/** One notification to publish after a successful write. */
export interface ChangeNotice {
  service: string;
  action: ChangeAction;
  change: ChangeInput | null | undefined;
  /** Builds the Tier 0 payload (only called for Tier 0). */
  payload: () => Tier0Payload;
  /** Log fields naming what was written: `{key}` or `{keys}`. */
  subject: { key: string } | { keys: string[] };
}

/** Publishes state change notifications with the delivery rules of docs/state.md "Delivery and failures": at most once, never failing the write. */
export interface ChangeNotifier {
  /** Publish; resolves in every case (a failure is logged and counted). */
  notify(notice: ChangeNotice): Promise<void>;
}

/** Create the notifier of one gateway: its two counters and the runtime's publish. */
export function createChangeNotifier(ctx: GatewayContext): ChangeNotifier {
  const labels = ["service", "action", "tier"] as const;
  const publishes: CounterMetric<(typeof labels)[number]> = ctx.metrics.counter(
    "platform_api_state_change_publishes_total",
    "State change notifications attempted after a successful write, by service, action (save/delete) and tier (tier0/tier1)",
    labels,
  );
  const failures: CounterMetric<(typeof labels)[number]> = ctx.metrics.counter(
    "platform_api_state_change_publish_failures_total",
    "State change notifications lost because the publish failed after a successful write, by service, action and tier",
    labels,
  );
  // Running counts per label set, repeated in the failure log line so one line tells how bad it is.
  const counts = new Map<string, { attempts: number; failures: number }>();

  return {
    async notify(n) {
      const tier = tierOf(n.change);
      const topic = tier === "tier1" ? n.change!.topic! : STATE_CHANGE_TOPIC;
      const event = tier === "tier1" ? n.change!.cloudevent! : tier0Event(n.payload());
      const l = { service: n.service, action: n.action, tier };
      const id = `${n.service}\u0000${n.action}\u0000${tier}`;
      let c = counts.get(id);
      if (!c) counts.set(id, (c = { attempts: 0, failures: 0 }));
      c.attempts++;
      publishes.inc(l);
      try {
        // No caller signal: the write already happened, so its notification is attempted even if the caller left.
        await ctx.runtime.pubsub.publish(topic, event);
      } catch (e) {
        c.failures++;
        failures.inc(l);
        ctx.logger.error(
          { ...l, ...n.subject, topic, err: e, publishAttempts: c.attempts, publishFailures: c.failures },
          PUBLISH_FAILED_MESSAGE,
        );
      }
    },
  };
}

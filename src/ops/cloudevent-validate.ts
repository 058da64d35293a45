import { randomUUID } from "node:crypto";
import { SPEC_VERSION, type CloudEvent } from "../shared/cloudevent.js";
import { invalidArgument } from "../shared/gateway-error.js";
import { echo } from "../shared/echo.js";

/** RFC 3986 scheme followed by ':' and at least one character; no whitespace, control or excluded characters. */
const ABSOLUTE_URI = /^[A-Za-z][A-Za-z0-9+.-]*:[^\s\x00-\x1f\x7f<>"{}|\\^`]+$/;

/** True when `s` is an absolute URI (has a scheme): `https://host/path` and `urn:ns:name` are, `a/b` is not. */
export function isAbsoluteUri(s: string): boolean {
  return ABSOLUTE_URI.test(s);
}

/**
 * Longest topic name, in UTF-16 code units, on every front (publish, subscribe, triggers). Topic names become broker
 * and history keys and come back in replies, so they are bounded like every other input; 1024 is far above what
 * brokers use in practice (Kafka allows 249).
 */
export const MAX_TOPIC_CHARS = 1024;

/** What is wrong with a topic name, or undefined when it is usable. */
export function topicProblem(topic: string): string | undefined {
  if (topic === "") return "must not be empty";
  if (topic.length > MAX_TOPIC_CHARS) return `must be at most ${MAX_TOPIC_CHARS} characters, got ${topic.length}`;
  return undefined;
}

/**
 * Check a publish request (docs/pubsub.md "Publish"): the topic is non-empty, the cloudevent is
 * present, its source is non-empty and an absolute URI, its spec version is empty or "1.0". Throws INVALID_ARGUMENT naming the field; nothing else about
 * the topic or the event is checked.
 */
export function validatePublish(topic: string | undefined | null, event: CloudEvent | undefined | null): asserts event is CloudEvent {
  if (typeof topic !== "string" || topic === "") throw invalidArgument("topic", "must not be empty");
  const problem = topicProblem(topic);
  if (problem) throw invalidArgument("topic", problem);
  if (!event) throw invalidArgument("cloudevent", "is required");
  if (typeof event.source !== "string" || event.source === "") throw invalidArgument("cloudevent.source", "must not be empty");
  if (!isAbsoluteUri(event.source)) {
    throw invalidArgument("cloudevent.source", `'${echo(event.source)}' is not an absolute URI (it needs a scheme, e.g. https://host/path or urn:ns:name)`);
  }
  // The wire format is CloudEvents 1.0; an event claiming another version would reach subscribers mislabelled.
  if (event.spec_version && event.spec_version !== SPEC_VERSION) {
    throw invalidArgument("cloudevent.spec_version", `'${echo(event.spec_version)}' is not supported; the gateway speaks CloudEvents ${SPEC_VERSION} (leave it empty for ${SPEC_VERSION})`);
  }
}

/** The event as published: a fresh UUID when `id` is empty and spec version "1.0" when `spec_version` is empty. */
export function withPublishDefaults(event: CloudEvent): CloudEvent {
  if (event.id && event.spec_version) return event;
  return { ...event, id: event.id || randomUUID(), spec_version: event.spec_version || SPEC_VERSION };
}

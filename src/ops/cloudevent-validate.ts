import { randomUUID } from "node:crypto";
import { attributeField, attributeNameProblem, SPEC_VERSION, type CloudEvent } from "../shared/cloudevent.js";
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
 * Check an event about to be published (docs/pubsub.md "Publish"), the one check for every path that publishes a
 * caller's event: PublishEvent on each front (gRPC, REST structured/binary, WebSocket) and a Tier 1 state change
 * event (before its write). The topic is non-empty and at most MAX_TOPIC_CHARS; the cloudevent is present; its source
 * is non-empty and an absolute URI; its spec version is empty or "1.0"; every attribute name passes
 * attributeNameProblem. Throws INVALID_ARGUMENT naming the field, under `where` when given (`change` makes
 * `change.topic`, `change.cloudevent.spec_version`, `change.cloudevent.attributes.<name>`); nothing else about the
 * topic or the event is checked.
 */
export function validatePublish(topic: string | undefined | null, event: CloudEvent | undefined | null, where = ""): asserts event is CloudEvent {
  const f = (name: string): string => (where ? `${where}.${name}` : name);
  if (typeof topic !== "string" || topic === "") throw invalidArgument(f("topic"), "must not be empty");
  const problem = topicProblem(topic);
  if (problem) throw invalidArgument(f("topic"), problem);
  if (!event) throw invalidArgument(f("cloudevent"), "is required");
  if (typeof event.source !== "string" || event.source === "") throw invalidArgument(f("cloudevent.source"), "must not be empty");
  if (!isAbsoluteUri(event.source)) {
    throw invalidArgument(f("cloudevent.source"), `'${echo(event.source)}' is not an absolute URI (it needs a scheme, e.g. https://host/path or urn:ns:name)`);
  }
  // The wire format is CloudEvents 1.0; an event claiming another version would reach subscribers mislabelled.
  if (event.spec_version && event.spec_version !== SPEC_VERSION) {
    throw invalidArgument(f("cloudevent.spec_version"), `'${echo(event.spec_version)}' is not supported; the gateway speaks CloudEvents ${SPEC_VERSION} (leave it empty for ${SPEC_VERSION})`);
  }
  // The fronts that parse names themselves (REST, WebSocket) refuse bad ones in their own terms first; gRPC hands the
  // decoded map as is, so this is where its names are checked, and no front can skip it.
  for (const name of Object.keys(event.attributes ?? {})) {
    const nameProblem = attributeNameProblem(name);
    if (nameProblem) throw invalidArgument(attributeField(f("cloudevent.attributes"), name), nameProblem);
  }
}

/** The event as published: a fresh UUID when `id` is empty and spec version "1.0" when `spec_version` is empty. */
export function withPublishDefaults(event: CloudEvent): CloudEvent {
  if (event.id && event.spec_version) return event;
  return { ...event, id: event.id || randomUUID(), spec_version: event.spec_version || SPEC_VERSION };
}

import { hash } from "node:crypto";
import { invalidArgument } from "../shared/gateway-error.js";
import { seqOfStreamId, streamIdOf } from "../shared/stream-id.js";

/**
 * How a hub writes and reads positions. Plain data, so it crosses to the uWS worker threads with the rest of a thread's
 * start-up data.
 * - `epoch`: `<epoch>-<seq>`, numbers this process issued, exact only here. With `marks` (the Dapr runtime, where
 *   every replica reads every event of its topics in the same per-topic order), an event's position also carries
 *   `-<mark>`, a short hash of the event's identity, so another replica that holds the same event finds it.
 * - `stream`: the runtime's cluster-wide stream entry ids (`<ms>-<n>`, src/shared/stream-id.ts), the same on every
 *   replica, so a position resumes exactly on any of them.
 */
export type PositionScheme = { kind: "epoch"; epoch: string; marks: boolean } | { kind: "stream" };

/** A parsed position. */
export interface Position {
  /** The epoch it was issued in; "" for a stream position, which every process understands. */
  epoch: string;
  seq: number;
  /** The identity hash of the event it names (epoch positions with marks), when it names one. */
  mark?: string;
}

const EPOCH_POSITION = /^([0-9a-f]{12})-(\d{1,15})(?:-([0-9a-f]{12}))?$/;

/** The text of position `seq` (an event's, with its mark when the scheme has marks). */
export function formatPosition(scheme: PositionScheme, seq: number, mark?: string): string {
  if (scheme.kind === "stream") return streamIdOf(seq);
  return mark !== undefined && scheme.marks ? `${scheme.epoch}-${seq}-${mark}` : `${scheme.epoch}-${seq}`;
}

/**
 * Parse a position; INVALID_ARGUMENT naming `field` when it is none. A well-formed position of the other scheme
 * (e.g. from before the gateway changed runtime) parses too, with an epoch no hub calls its own: it resumes
 * `recovered: false` instead of failing the subscribe.
 *
 * The two forms overlap: an epoch is 12 hex digits, and about 0.36% of epochs are all decimal digits, so
 * `123456789012-42` is both an epoch position and a stream id. Both schemes read the epoch form first: a stream id of
 * that form needs a 12-digit millisecond part, a Redis clock between 1973 and September 2001 (the stream ids the redis
 * runtime issues are its server time in ms, 13 digits until the year 2286, or the single `0-0` before any event), so
 * on the stream scheme such a text is another runtime's or process's epoch position and resumes `recovered: false`,
 * never a stream position replayed from the stream's start.
 */
export function parsePosition(scheme: PositionScheme, field: string, text: string): Position {
  const m = EPOCH_POSITION.exec(text);
  if (m) return m[3] === undefined ? { epoch: m[1]!, seq: Number(m[2]) } : { epoch: m[1]!, seq: Number(m[2]), mark: m[3] };
  const seq = seqOfStreamId(text);
  if (seq !== undefined) return { epoch: "", seq };
  const expected = scheme.kind === "stream" ? "<ms>-<n>" : "<epoch>-<offset>";
  throw invalidArgument(field, `'${text.slice(0, 64)}' is not a position (expected ${expected} as sent in an event id)`);
}

/** Whether a position was issued under this scheme (and so can resume exactly here). */
export function isOwnPosition(scheme: PositionScheme, p: Position): boolean {
  return scheme.kind === "stream" ? p.epoch === "" : p.epoch === scheme.epoch;
}

/** The identity hash of an event on a topic: CloudEvents identify an event by source and id. */
export function eventMark(topic: string, source: string, id: string): string {
  return hash("sha1", `${topic}\0${source}\0${id}`, "hex").slice(0, 12);
}

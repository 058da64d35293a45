import { inBandOk } from "../shared/status.js";
import { invalidArgument } from "../shared/gateway-error.js";
import { echo } from "../shared/echo.js";
import type { TriggerInput, TriggerOps } from "../ops/trigger.js";
import { json, type RestRequest, type Route } from "../http/router.js";

/**
 * Body fields of POST /v1/trigger/{name}: snake_case, with camelCase aliases. A Map, not an object literal: a key
 * such as "constructor", "toString" or "__proto__" must be an unknown field, not one inherited from Object.prototype.
 */
const FIELDS: ReadonlyMap<string, keyof TriggerInput> = new Map<string, keyof TriggerInput>([
  ["name", "name"],
  ["target_topic", "target_topic"],
  ["targetTopic", "target_topic"],
  ["schedule", "schedule"],
  ["due_time", "due_time"],
  ["dueTime", "due_time"],
  ["repeats", "repeats"],
  ["ttl", "ttl"],
]);

/** The fields an unknown-field error lists (name is implied by the path). */
const EXPECTED = [...FIELDS.keys()].filter((k) => k !== "name").join(", ");

/** A JSON value as an error message may quote it: serialized, then cut by echo(). */
const quote = (value: unknown): string => echo(JSON.stringify(value));

/** Read the POST body into a TriggerInput: unknown fields, wrong types and a name differing from the path are errors. */
export function parseTriggerBody(name: string, body: Record<string, unknown>): TriggerInput {
  const input = new Map<keyof TriggerInput, unknown>();
  const given = new Map<keyof TriggerInput, string>();
  for (const [key, value] of Object.entries(body)) {
    const field = FIELDS.get(key);
    if (!field) throw invalidArgument(echo(key), `is not a trigger field; expected ${EXPECTED}`);
    const before = given.get(field);
    if (before !== undefined) throw invalidArgument(field, `is given twice (as ${before} and ${key})`);
    given.set(field, key);
    if (value === null) continue;
    if (field === "repeats") {
      if (typeof value !== "number" || !Number.isInteger(value)) throw invalidArgument("repeats", `must be a whole number (got ${quote(value)})`);
    } else if (typeof value !== "string") throw invalidArgument(field, `must be a string (got ${quote(value)})`);
    input.set(field, value);
  }
  const bodyName = input.get("name");
  if (bodyName !== undefined && bodyName !== name) {
    throw invalidArgument("name", `in the body ("${echo(bodyName)}") differs from the name in the path ("${echo(name)}")`);
  }
  return { ...(Object.fromEntries(input) as Partial<TriggerInput>), name, target_topic: (input.get("target_topic") as string | undefined) ?? "" };
}

/** `/v1/trigger` routes: schedule (POST), get (GET), delete (DELETE) one by name, and list (GET). */
export function triggerRoutes(ops: TriggerOps): Route[] {
  const name = (req: RestRequest): string => req.params["name"] ?? "";
  return [
    {
      method: "POST",
      path: "/v1/trigger/{name}",
      handler: async (req) => {
        await ops.schedule(parseTriggerBody(name(req), req.json()), req.signal);
        return json({ status: inBandOk() });
      },
    },
    { method: "GET", path: "/v1/trigger/{name}", handler: async (req) => json({ status: inBandOk(), trigger: await ops.get(name(req), req.signal) }) },
    {
      method: "DELETE",
      path: "/v1/trigger/{name}",
      handler: async (req) => {
        await ops.delete(name(req), req.signal);
        return json({ status: inBandOk() });
      },
    },
    { method: "GET", path: "/v1/trigger", handler: async (req) => json({ status: inBandOk(), triggers: await ops.list(req.signal) }) },
  ];
}

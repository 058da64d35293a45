import { inBandOk } from "../shared/status.js";
import { invalidArgument } from "../shared/gateway-error.js";
import type { TriggerInput, TriggerOps } from "../ops/trigger.js";
import { json, type RestRequest, type Route } from "../http/router.js";

/** Body fields of POST /v1/trigger/{name}: snake_case, with camelCase aliases. */
const FIELDS: Record<string, keyof TriggerInput> = {
  name: "name",
  target_topic: "target_topic",
  targetTopic: "target_topic",
  schedule: "schedule",
  due_time: "due_time",
  dueTime: "due_time",
  repeats: "repeats",
  ttl: "ttl",
};

/** Read the POST body into a TriggerInput: unknown fields, wrong types and a name differing from the path are errors. */
export function parseTriggerBody(name: string, body: Record<string, unknown>): TriggerInput {
  const input: Record<string, unknown> = {};
  const given: Record<string, string> = {};
  for (const [key, value] of Object.entries(body)) {
    const field = FIELDS[key];
    if (!field) throw invalidArgument(key, `is not a trigger field; expected ${Object.keys(FIELDS).filter((k) => k !== "name").join(", ")}`);
    if (given[field]) throw invalidArgument(field, `is given twice (as ${given[field]} and ${key})`);
    given[field] = key;
    if (value === null) continue;
    if (field === "repeats") {
      if (typeof value !== "number" || !Number.isInteger(value)) throw invalidArgument("repeats", `must be a whole number (got ${JSON.stringify(value)})`);
    } else if (typeof value !== "string") throw invalidArgument(field, `must be a string (got ${JSON.stringify(value)})`);
    input[field] = value;
  }
  if (input["name"] !== undefined && input["name"] !== name) {
    throw invalidArgument("name", `in the body ("${String(input["name"])}") differs from the name in the path ("${name}")`);
  }
  return { ...(input as Partial<TriggerInput>), name, target_topic: (input["target_topic"] as string | undefined) ?? "" };
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

// CloudEvent rules the console checks before sending, the same as the gateway's (src/ops/cloudevent-validate.ts).

/** RFC 3986 scheme, ':' and at least one character; no whitespace, control or excluded characters. */
const ABSOLUTE_URI = /^[A-Za-z][A-Za-z0-9+.-]*:[^\s\x00-\x1f\x7f<>"{}|\\^`]+$/;

/** The gateway's message for a bad `source`, or "" when it is fine. */
export function sourceProblem(source) {
  if (source === "") return "cloudevent.source must not be empty";
  if (!ABSOLUTE_URI.test(source)) return `cloudevent.source '${source.slice(0, 100)}' is not an absolute URI (it needs a scheme, e.g. https://host/path or urn:ns:name)`;
  return "";
}

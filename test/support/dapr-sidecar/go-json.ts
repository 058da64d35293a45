/**
 * How Go re-encodes JSON that daprd decoded into `interface{}` (numbers become float64, objects Go maps). Used by the
 * test sidecar wherever daprd or a store re-encodes a value, so a test sees what a real sidecar would return.
 */

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function goString(s: string, escapeHtml: boolean): string {
  // encoding/json escapes <, > and & (HTMLEscape is on by default) and U+2028/U+2029; JSON.stringify does neither.
  let out = JSON.stringify(s).replace(/[\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
  if (escapeHtml) out = out.replace(/[<>&]/g, (c) => `\\u00${c.charCodeAt(0).toString(16)}`);
  return out;
}

/**
 * Go's `encoding/json.Marshal` of a decoded value (`pkg/runtime/pubsub/subscriptions.go` GRPCEnvelopeFromSubscriptionMessage
 * `json.Marshal(data)`, the in-memory state store): map keys sorted, `<>&` escaped, numbers as float64 (so integers
 * past 2^53 come back rounded). `text` is parsed with float64 numbers first, like `json.Unmarshal` into interface{}.
 */
export function goJsonMarshal(text: string): string {
  return encode(JSON.parse(text) as Json, { escapeHtml: true, floatDigits: undefined });
}

/**
 * json-iterator's ConfigFastest, which contrib `state/redis` uses: no HTML escaping, floats cut to 6 decimals
 * (MarshalFloatWith6Digits), Go map order (random in Go; sorted here, so still not the caller's order).
 */
export function jsoniterFastestMarshal(text: string): string {
  return encode(JSON.parse(text) as Json, { escapeHtml: false, floatDigits: 6 });
}

function encode(v: Json, o: { escapeHtml: boolean; floatDigits: number | undefined }): string {
  if (v === null) return "null";
  if (typeof v === "boolean") return String(v);
  if (typeof v === "number") {
    if (o.floatDigits !== undefined && !Number.isInteger(v)) return String(Number(v.toFixed(o.floatDigits)));
    return String(v);
  }
  if (typeof v === "string") return goString(v, o.escapeHtml);
  if (Array.isArray(v)) return `[${v.map((x) => encode(x, o)).join(",")}]`;
  const keys = Object.keys(v).sort();
  return `{${keys.map((k) => `${goString(k, o.escapeHtml)}:${encode(v[k]!, o)}`).join(",")}}`;
}

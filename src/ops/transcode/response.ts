/** The reply of a transcoded call: the response body (`response_body` selecting a field) and the error body shapes. */
import { ScalarType, type DescField } from "@bufbuild/protobuf";
import { codeName, httpStatusOf } from "../../shared/code.js";
import type { GatewayError } from "../../shared/gateway-error.js";
import type { TranscodingConfig } from "../../config/services.js";
import type { TranscodeRule } from "./rule.js";

/** The JSON an unset field has in a selected `response_body` (the converter omits unset fields). */
function defaultJson(f: DescField): string {
  switch (f.fieldKind) {
    case "list":
      return "[]";
    case "map":
    case "message":
      return "{}";
    case "enum":
      return JSON.stringify(f.enum.values[0]?.name ?? 0);
    default:
      if (f.scalar === ScalarType.STRING || f.scalar === ScalarType.BYTES) return '""';
      if (f.scalar === ScalarType.BOOL) return "false";
      if (f.scalar === ScalarType.INT64 || f.scalar === ScalarType.UINT64 || f.scalar === ScalarType.SINT64 || f.scalar === ScalarType.FIXED64 || f.scalar === ScalarType.SFIXED64) return '"0"';
      return "0";
  }
}

/** The response body of `rule` from the converter's JSON: the whole message as given, or the `response_body` field. */
export function transcodeResponse(rule: TranscodeRule, json: string): string {
  const f = rule.responseField;
  if (!f) return json;
  const v = (JSON.parse(json) as Record<string, unknown>)[f.jsonName];
  return v === undefined ? defaultJson(f) : JSON.stringify(v);
}

/** The error body in the rule's shape: grpc-gateway's `{code, message, details}` or Google's `{"error": {...}}`. */
export function transcodeErrorBody(shape: TranscodingConfig["errors"], e: GatewayError): string {
  if (shape === "google") return JSON.stringify({ error: { code: httpStatusOf(e.code), message: e.rawMessage, status: codeName(e.code), details: [] } });
  return JSON.stringify({ code: e.code, message: e.rawMessage, details: [] });
}

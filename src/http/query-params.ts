import { invalidArgument } from "../shared/gateway-error.js";
import { echo } from "../shared/echo.js";

/**
 * The one boolean query parameter rule of the REST front (`?refresh`, `?include_value`, `?publish_change`, ...):
 * - absent: false;
 * - `?x`, `?x=`, `?x=true`, `?x=1`: true (a bare flag means "on", as in `?include_value`);
 * - `?x=false`, `?x=0`: false;
 * - anything else (`?x=yes`, `?x=TRUE`): 400 INVALID_ARGUMENT naming the parameter, so a typo never reads as false.
 * `value` is what `URLSearchParams.get` returned (null when absent).
 */
export function booleanParam(name: string, value: string | null): boolean {
  if (value === null) return false;
  if (value === "" || value === "true" || value === "1") return true;
  if (value === "false" || value === "0") return false;
  throw invalidArgument(`query parameter ${name}`, `must be true or false, got '${echo(value)}'`);
}

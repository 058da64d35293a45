/**
 * The job name rule of Dapr's Scheduler, applied by the gateway on every runtime so the embedded default accepts
 * exactly the trigger names production (daprd + Scheduler) accepts.
 *
 * The Scheduler (go-etcd-cron `internal/api/validator/validator.go`, `Validator.JobName`) first strips `_`, `:`, `-`
 * and spaces, then checks every `||` segment of `app||<namespace>||<app id>||<name>` with Kubernetes'
 * `IsDNS1123Subdomain`: lower-case letters, digits, `-` and `.`, each dot-separated label starting and ending with a
 * letter or digit, at most 253 characters. A refused name comes back from daprd as INTERNAL "failed to schedule job
 * due to: ... job name is invalid"; the gateway refuses it in-band instead, naming the rule.
 *
 * One deliberate difference: go-etcd-cron lower-cases the name before the check, but the gateway refuses upper-case
 * letters (docs/triggers.md lists `Nightly` as refused): stricter is safe, and a name that differs from another only by case
 * would be two triggers on one runtime and a confusing pair on the other.
 */

import { echo } from "../../shared/echo.js";

/** Longest DNS-1123 subdomain (k8s.io/apimachinery `validation.DNS1123SubdomainMaxLength`). */
export const DNS1123_SUBDOMAIN_MAX = 253;

const DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
/** k8s.io/apimachinery `validation.dns1123SubdomainFmt`. */
const DNS1123_SUBDOMAIN = new RegExp(`^${DNS1123_LABEL}(\\.${DNS1123_LABEL})*$`);

/**
 * The problem with a job name under the Scheduler's rule, or undefined when it is accepted. The text completes
 * "name ...", e.g. `"a..b" is not a DNS-1123 subdomain ...`.
 */
export function jobNameProblem(name: string): string | undefined {
  // Validator.JobName: the sanitizer removes these before the DNS-1123 check.
  const sanitized = name.replace(/[_: -]/g, "");
  if (sanitized.length > DNS1123_SUBDOMAIN_MAX) return `is ${name.length} characters long; Dapr's Scheduler allows at most ${DNS1123_SUBDOMAIN_MAX}`;
  if (!DNS1123_SUBDOMAIN.test(sanitized)) {
    return (
      `"${echo(name, 64)}" is not a DNS-1123 subdomain, as Dapr's Scheduler requires: use lower-case letters, digits, "-" and "." ` +
      `(plus "_" and ":"), starting and ending with a letter or digit, no ".." and no "." at either end`
    );
  }
  return undefined;
}

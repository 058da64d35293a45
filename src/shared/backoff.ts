/**
 * The one retry backoff of the gateway and its client: exponential with a cap and symmetric jitter. Used by the
 * client's subscription reconnects (REST/WebSocket/SSE and gRPC) and the Dapr adapter's resubscribes. (grpc-js keeps its
 * own channel reconnect backoff; the gateway and the client only set its bounds.)
 */
export interface BackoffPolicy {
  /** Delay before the first retry, ms. */
  readonly initialDelayMs: number;
  /** Upper bound of any delay, jitter included, ms. */
  readonly maxDelayMs: number;
  /** Growth factor per failed attempt (>= 1). */
  readonly multiplier: number;
  /** Random spread as a fraction of the delay, 0-1: the delay is scaled by a factor in [1 - jitter, 1 + jitter]. */
  readonly jitter: number;
}

/**
 * The delay before retry `attempt` (0-based): `initialDelayMs * multiplier^attempt`, capped at maxDelayMs, scaled by a
 * random factor in [1 - jitter, 1 + jitter], capped again and rounded to whole ms. `random` is for tests.
 */
export function backoffDelay(p: BackoffPolicy, attempt: number, random: () => number = Math.random): number {
  // Past ~1000 attempts the power is Infinity: the cap applies (and a zero initial delay stays zero, not NaN).
  const base = p.initialDelayMs <= 0 ? 0 : Math.min(p.maxDelayMs, p.initialDelayMs * Math.pow(p.multiplier, attempt));
  const spread = base * p.jitter * (2 * random() - 1);
  return Math.max(0, Math.min(p.maxDelayMs, Math.round(base + spread)));
}

/** A job as the scheduler stores it (Dapr's Job without failure policy). */
export interface JobSpec {
  /** Unique name. */
  name: string;
  /** 6-field cron, `@every <duration>` or a descriptor such as `@hourly`. */
  schedule?: string;
  /** First fire time: RFC 3339 or a duration from now. */
  dueTime?: string;
  /** Number of firings; 0 or unset = unlimited. */
  repeats?: number;
  /** RFC 3339 or a duration. */
  ttl?: string;
  /** Opaque payload handed back on each firing (JSON text). */
  data: string;
}

/** What the scheduler knows about a stored job beyond its spec (fields the runtime cannot tell are undefined). */
export interface JobRecord extends JobSpec {
  /** Next fire time, epoch ms. */
  nextFireAt?: number;
  /** Firings so far. */
  timesFired?: number;
  /** Last firing, epoch ms. */
  lastFiredAt?: number;
  /** Creation time, epoch ms. */
  createdAt?: number;
  /** Expiry time (from ttl), epoch ms. */
  expiresAt?: number;
}

/** Called on each firing; rejecting counts as a failed delivery (the schedule continues). */
export type JobHandler = (name: string, data: string) => Promise<void>;

/**
 * The sidecar scheduler. Errors are GatewayErrors: invalid spec INVALID_ARGUMENT naming the field, existing name
 * ALREADY_EXISTS, sidecar unreachable UNAVAILABLE.
 */
export interface JobsPort {
  /** Register the firing handler (one per runtime; the gateway sets it once at startup). */
  setHandler(handler: JobHandler): void;
  schedule(job: JobSpec, signal?: AbortSignal): Promise<void>;
  /** The job, or undefined when no job has that name. */
  get(name: string, signal?: AbortSignal): Promise<JobRecord | undefined>;
  /** Delete; NOT_FOUND when no job has that name. */
  delete(name: string, signal?: AbortSignal): Promise<void>;
  list(signal?: AbortSignal): Promise<JobRecord[]>;
  /** How many jobs are stored, when the runtime can tell cheaply (else the caller counts list()). */
  count?(signal?: AbortSignal): Promise<number>;
}

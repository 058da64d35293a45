import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import type { JobsPort } from "../jobs-port.js";

/** In-process scheduler. PLACEHOLDER until the trigger issue lands: every call is UNIMPLEMENTED. */
export interface MemoryScheduler extends JobsPort {
  close(): void;
}

export function createMemoryScheduler(): MemoryScheduler {
  const no = async (): Promise<never> => {
    throw new GatewayError(Code.UNIMPLEMENTED, "the embedded scheduler is not implemented yet");
  };
  return { setHandler: () => undefined, schedule: no, get: no, delete: no, list: no, close: () => undefined };
}

import { Code } from "../../shared/code.js";
import { GatewayError } from "../../shared/gateway-error.js";
import type { StatePort } from "../state-port.js";

/** In-process state store. PLACEHOLDER until the state issue lands: every call is UNIMPLEMENTED. */
export function createMemoryStateStore(): StatePort {
  const no = async (): Promise<never> => {
    throw new GatewayError(Code.UNIMPLEMENTED, "the embedded state store is not implemented yet");
  };
  return { get: no, getBulk: no, save: no, delete: no, deleteBulk: no, query: no };
}

/**
 * gRPC status codes, their canonical names, and the HTTP status each maps to on REST
 * (grpc-gateway's mapping, see docs/operations.md "Errors").
 */
export enum Code {
  OK = 0,
  CANCELLED = 1,
  UNKNOWN = 2,
  INVALID_ARGUMENT = 3,
  DEADLINE_EXCEEDED = 4,
  NOT_FOUND = 5,
  ALREADY_EXISTS = 6,
  PERMISSION_DENIED = 7,
  RESOURCE_EXHAUSTED = 8,
  FAILED_PRECONDITION = 9,
  ABORTED = 10,
  OUT_OF_RANGE = 11,
  UNIMPLEMENTED = 12,
  INTERNAL = 13,
  UNAVAILABLE = 14,
  DATA_LOSS = 15,
  UNAUTHENTICATED = 16,
}

/** The canonical name of a code, e.g. `codeName(Code.NOT_FOUND) === "NOT_FOUND"`. */
export function codeName(code: Code): string {
  return Code[code] ?? "UNKNOWN";
}

/** The code for a canonical name, or undefined for an unknown name. */
export function codeFromName(name: string): Code | undefined {
  const v = (Code as unknown as Record<string, number | undefined>)[name];
  return typeof v === "number" ? (v as Code) : undefined;
}

const httpByCode: Partial<Record<Code, number>> = {
  [Code.OK]: 200,
  [Code.CANCELLED]: 499,
  [Code.INVALID_ARGUMENT]: 400,
  [Code.DEADLINE_EXCEEDED]: 504,
  [Code.NOT_FOUND]: 404,
  [Code.ALREADY_EXISTS]: 409,
  [Code.PERMISSION_DENIED]: 403,
  [Code.RESOURCE_EXHAUSTED]: 429,
  [Code.FAILED_PRECONDITION]: 400,
  [Code.ABORTED]: 409,
  [Code.OUT_OF_RANGE]: 400,
  [Code.UNIMPLEMENTED]: 501,
  [Code.UNAVAILABLE]: 503,
  [Code.UNAUTHENTICATED]: 401,
};

/** HTTP status for a gRPC code (grpc-gateway mapping; anything unlisted is 500). */
export function httpStatusOf(code: Code): number {
  return httpByCode[code] ?? 500;
}

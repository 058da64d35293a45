/**
 * The REST / client form of a method's message schema (docs/contract.md "Method schema"): what `GetMethodSchema` and
 * `GET /v1/grpc/{service}/schema/{method}` answer. Shared by the server (src/backends, src/main) and the client.
 */

/** One field of a message schema. */
export interface FieldSchema {
  name: string;
  /** Scalar type name ("string", "int64", ...), or "message" / "enum" / "map". */
  type: string;
  /** Fully qualified message or enum type name; empty for scalars. */
  typeName: string;
  isRepeated: boolean;
  isOptional: boolean;
}

/** The fields of a method's input or output message. */
export interface MethodSchema {
  inputTypeName: string;
  outputTypeName: string;
  /** Which message `fields` describes. */
  schemaType: "input" | "output";
  fields: FieldSchema[];
}

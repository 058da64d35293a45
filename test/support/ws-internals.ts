import { createRequire } from "node:module";
import { Socket } from "node:net";
import type WebSocket from "ws";

/**
 * The one place the tests reach into the `ws` library's private internals: the net.Socket under a client WebSocket
 * (`_socket`), which a test pauses to play a subscriber that stops reading, or corks to send several frames in one TCP
 * write. ws has no public way to do either.
 * Throws "ws <version> changed WebSocket._socket" when an upgrade changes it, so the test using it fails saying why.
 */
export function wsSocket(ws: WebSocket): Socket {
  const s = (ws as unknown as { _socket?: unknown })._socket;
  if (s instanceof Socket) return s;
  let version = "unknown";
  try {
    version = (createRequire(import.meta.url)("ws/package.json") as { version: string }).version;
  } catch {
    // keep "unknown"
  }
  throw new Error(`ws ${version} changed WebSocket._socket (no longer the connection's net.Socket); see test/support/ws-internals.ts`);
}

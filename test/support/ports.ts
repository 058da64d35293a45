import { createServer } from "node:net";
import { readFileSync } from "node:fs";

/**
 * A TCP port on 127.0.0.1 that was free a moment ago, for a server a test must name before it starts (a gateway whose
 * sidecar is told the app port up front, a backend restarted on the same port).
 *
 * Picked outside the kernel's ephemeral range, at random, and checked by binding it. A port the kernel picked for a
 * `listen(0)` comes from that range, and so does every outgoing connection's local port: between release and the
 * caller's bind, any other socket in any test process could take it (CI saw EADDRINUSE that way). Below the range only
 * another caller of this function can, and the random pick makes that rare.
 */
export async function freePort(): Promise<number> {
  const [low] = ephemeralRange();
  const from = 10_000;
  const to = Math.max(from + 1000, low) - 1;
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = from + Math.floor(Math.random() * (to - from + 1));
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port found in ${from}-${to} after 50 tries`);
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
}

/** Linux's ip_local_port_range; the IANA dynamic range elsewhere. */
function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number);
    if (low && high) return [low, high];
  } catch {
    // not Linux
  }
  return [49152, 65535];
}

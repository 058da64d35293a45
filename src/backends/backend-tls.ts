import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import net from "node:net";
import tls from "node:tls";
import * as grpc from "@grpc/grpc-js";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";

/**
 * TLS to a backend (a service's `grpc.tls` in the services config): the CA its certificate must chain to (default the
 * system roots), a client certificate and key when it requires mutual TLS, and the name its certificate must carry
 * when that is not the dialled host (an IP address, a name behind a load balancer). Paths are read once, when the
 * backend is created; the same settings serve the gateway's own HTTP/2 client (unary calls) and grpc-js (streams,
 * reflection, the transparent proxy, health).
 */
export interface BackendTlsConfig {
  ca?: string;
  cert?: string;
  key?: string;
  serverName?: string;
}

/** BackendTlsConfig with the files read. */
export interface BackendTls {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  serverName?: string;
}

function read(file: string, field: string): Buffer {
  try {
    return readFileSync(file);
  } catch (e) {
    throw new GatewayError(Code.INVALID_ARGUMENT, `${field}: ${JSON.stringify(file)} cannot be read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}

/**
 * Read and check `c` (`where` names it in errors, e.g. "services[0].grpc.tls"): cert and key come together, every file
 * parses, the key matches the certificate. Throws a GatewayError INVALID_ARGUMENT naming the field; never shows a key.
 */
export function loadBackendTls(c: BackendTlsConfig, where: string): BackendTls {
  if ((c.cert === undefined) !== (c.key === undefined)) {
    throw new GatewayError(Code.INVALID_ARGUMENT, `${where}: cert and key go together (a client certificate for mutual TLS needs its key)`);
  }
  const out: BackendTls = {};
  if (c.ca !== undefined) {
    out.ca = read(c.ca, `${where}.ca`);
    try {
      new X509Certificate(out.ca);
    } catch (e) {
      throw new GatewayError(Code.INVALID_ARGUMENT, `${where}.ca: ${JSON.stringify(c.ca)} is not a PEM certificate: ${(e as Error).message}`);
    }
  }
  if (c.cert !== undefined && c.key !== undefined) {
    out.cert = read(c.cert, `${where}.cert`);
    out.key = read(c.key, `${where}.key`);
    try {
      tls.createSecureContext({ cert: out.cert, key: out.key });
    } catch (e) {
      throw new GatewayError(Code.INVALID_ARGUMENT, `${where}.key: ${JSON.stringify(c.key)} is not a usable private key for ${where}.cert ${JSON.stringify(c.cert)}: ${(e as Error).message}`);
    }
  }
  if (c.serverName !== undefined) out.serverName = c.serverName;
  return out;
}

/** tls.connect options for the gateway's own HTTP/2 client: ALPN h2, SNI (not for an IP address, RFC 6066), TLS 1.2+. */
export function h2ConnectOptions(t: BackendTls, host: string): tls.ConnectionOptions {
  const name = t.serverName ?? host;
  return {
    ALPNProtocols: ["h2"],
    minVersion: "TLSv1.2",
    ...(net.isIP(name) === 0 ? { servername: name } : {}),
    // Verify against the configured name even when it is an IP (no SNI sent then).
    checkServerIdentity: (_host, cert) => tls.checkServerIdentity(name, cert),
    ...(t.ca ? { ca: t.ca } : {}),
    ...(t.cert && t.key ? { cert: t.cert, key: t.key } : {}),
  };
}

/** grpc-js credentials and channel options for the same settings. */
export function grpcCredentials(t: BackendTls): { credentials: grpc.ChannelCredentials; options: grpc.ChannelOptions } {
  return {
    credentials: grpc.credentials.createSsl(t.ca ?? null, t.key ?? null, t.cert ?? null),
    options: t.serverName ? { "grpc.ssl_target_name_override": t.serverName, "grpc.default_authority": t.serverName } : {},
  };
}

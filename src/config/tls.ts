import { X509Certificate } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import tls from "node:tls";
import { Code } from "../shared/code.js";
import { GatewayError } from "../shared/gateway-error.js";
import type { Logger } from "../observe/logger.js";

/**
 * The gateway's own certificate (options tlsCert, tlsKey, tlsClientCa): read, checked and watched here, for both ports.
 * The gRPC port (src/h2/server.ts) takes the loaded bytes as a Node secure context; the uWS port (rest/router.ts)
 * takes the file names (uSockets reads them itself), so both are checked here first and uWS only ever sees a pair
 * Node accepted. Nothing read from the key file is ever logged: errors say which file failed and OpenSSL's reason.
 */

/** The PEM files the gateway serves TLS with. */
export interface TlsFiles {
  cert: string;
  key: string;
  /** CA bundle client certificates must chain to (mutual TLS). */
  clientCa?: string;
}

/** A checked certificate pair, read from `files`. */
export interface LoadedTls {
  files: TlsFiles;
  cert: Buffer;
  key: Buffer;
  ca?: Buffer;
  /** Of the leaf certificate, for logs. */
  serial: string;
  subject: string;
  validTo: string;
}

/** TLS 1.2 is the oldest version either port accepts (uSockets has the same floor). */
export const TLS_MIN_VERSION = "TLSv1.2";

/** How often certificate files are checked for a change, ms. A change is loaded once it has held for one period. */
export const TLS_RELOAD_INTERVAL_MS = 2000;

function readPem(file: string, what: string): Buffer {
  try {
    return readFileSync(file);
  } catch (e) {
    throw new GatewayError(Code.INVALID_ARGUMENT, `${what} ${JSON.stringify(file)} cannot be read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}

/**
 * Read and check the pair (and the client CA): each file must parse, the key must match the certificate. `names` says
 * how the caller knows each file (a flag, a config field) for the error. Throws a GatewayError INVALID_ARGUMENT.
 */
export function loadTls(files: TlsFiles, names: { cert: string; key: string; clientCa: string } = { cert: "tlsCert", key: "tlsKey", clientCa: "tlsClientCa" }): LoadedTls {
  const cert = readPem(files.cert, names.cert);
  const key = readPem(files.key, names.key);
  const ca = files.clientCa === undefined ? undefined : readPem(files.clientCa, names.clientCa);
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(cert);
  } catch (e) {
    throw new GatewayError(Code.INVALID_ARGUMENT, `${names.cert} ${JSON.stringify(files.cert)} is not a PEM certificate: ${(e as Error).message}`);
  }
  if (ca !== undefined) {
    try {
      new X509Certificate(ca);
    } catch (e) {
      throw new GatewayError(Code.INVALID_ARGUMENT, `${names.clientCa} ${JSON.stringify(files.clientCa)} is not a PEM certificate: ${(e as Error).message}`);
    }
  }
  try {
    // Parses the key and checks it against the certificate (OpenSSL's reason names neither's contents).
    tls.createSecureContext({ cert, key, ...(ca ? { ca } : {}), minVersion: TLS_MIN_VERSION });
  } catch (e) {
    throw new GatewayError(
      Code.INVALID_ARGUMENT,
      `${names.key} ${JSON.stringify(files.key)} is not a usable private key for ${names.cert} ${JSON.stringify(files.cert)}: ${(e as Error).message}` +
        (/bad decrypt/.test((e as Error).message) ? " (an encrypted key is not supported: give the key unencrypted, readable by the gateway only)" : ""),
    );
  }
  return { files, cert, key, ...(ca ? { ca } : {}), serial: leaf.serialNumber, subject: leaf.subject.replace(/\n/g, ", "), validTo: leaf.validTo };
}

/** A certificate this close to its expiry (or past it) is logged as a warning at start and on each reload. */
export const TLS_EXPIRY_WARNING_MS = 14 * 24 * 3600_000;

/** Log that `t` is served (`msg`), and warn when it has expired or expires within TLS_EXPIRY_WARNING_MS. */
export function logServing(logger: Logger, t: LoadedTls, msg: string): void {
  logger.info(describeTls(t), msg);
  const left = Date.parse(t.validTo) - Date.now();
  if (left < TLS_EXPIRY_WARNING_MS) {
    logger.warn({ ...describeTls(t), daysLeft: Math.floor(left / 86_400_000) }, left <= 0 ? "TLS certificate has expired: clients will refuse it" : "TLS certificate expires soon");
  }
}

/** What a log line may say about a loaded pair. */
export function describeTls(t: LoadedTls): Record<string, string> {
  return { cert: t.files.cert, serial: t.serial, subject: t.subject, validTo: t.validTo, ...(t.files.clientCa ? { clientCa: t.files.clientCa } : {}) };
}

/** The Node TLS server options for a loaded pair: TLS 1.2+, and with a client CA, a client certificate is required. */
export function serverTlsOptions(t: LoadedTls): tls.TlsOptions {
  return {
    cert: t.cert,
    key: t.key,
    minVersion: TLS_MIN_VERSION,
    ...(t.ca ? { ca: t.ca, requestCert: true, rejectUnauthorized: true } : { requestCert: false }),
  };
}

function signature(files: TlsFiles): string {
  return [files.cert, files.key, files.clientCa]
    .map((f) => {
      if (f === undefined) return "";
      try {
        // stat follows symlinks: a Kubernetes secret update (a swapped ..data link) changes the target's inode.
        const s = statSync(f);
        return `${s.ino}:${s.size}:${s.mtimeMs}`;
      } catch {
        return "missing";
      }
    })
    .join("|");
}

/** A running watch of certificate files; stop() ends it. */
export interface TlsWatch {
  stop(): void;
}

/**
 * Check `current.files` every `intervalMs`; when their inode, size or mtime changed and then held still for one more
 * period (a cert and key written one after the other are read together), load and check the new pair and hand it to
 * `apply` (unless the bytes are the same as before). A pair that does not load (or that `apply` refuses by throwing) is logged as a warning with the reason and
 * the old one stays in use; the same broken files are not reported again until they change. The timer is unref'd.
 */
export function watchTls(current: LoadedTls, apply: (next: LoadedTls) => void, logger: Logger, intervalMs = TLS_RELOAD_INTERVAL_MS): TlsWatch {
  let seen = signature(current.files);
  let pending: string | undefined;
  const timer = setInterval(() => {
    const now = signature(current.files);
    if (now === seen) {
      pending = undefined;
      return;
    }
    if (pending !== now) {
      pending = now;
      return;
    }
    seen = now;
    pending = undefined;
    let next: LoadedTls;
    try {
      next = loadTls(current.files);
      // Rewritten with the same bytes (a touch, a sync job): nothing to serve anew.
      if (next.cert.equals(current.cert) && next.key.equals(current.key) && (next.ca ?? Buffer.alloc(0)).equals(current.ca ?? Buffer.alloc(0))) return;
      apply(next);
    } catch (e) {
      logger.warn({ cert: current.files.cert, key: current.files.key, reason: GatewayError.from(e).rawMessage }, "TLS certificate change not applied; the previous certificate stays in use");
      return;
    }
    current = next;
    logServing(logger, next, "TLS certificate reloaded");
  }, intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

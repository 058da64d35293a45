/**
 * X.509 material made at test time (node:crypto cannot sign certificates): a CA, a server certificate for 127.0.0.1
 * and localhost, and a client certificate, each signed by the CA, written as PEM files in a fresh temp directory.
 * RSA 2048 (node-forge generates keys in JS: a few hundred ms each), valid from a day ago for a year (issueServer: any
 * number of days).
 */
import { createHash, X509Certificate } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import forge from "node-forge";

export interface Pem {
  cert: string;
  key: string;
  /** The certificate's serial, upper-case hex as node:crypto's X509Certificate reports it. */
  serial: string;
}

export interface TestPki {
  dir: string;
  ca: Pem;
  server: Pem;
  client: Pem;
  /** Paths of the PEM files in `dir`. */
  files: { ca: string; caKey: string; serverCert: string; serverKey: string; clientCert: string; clientKey: string };
  /** A further server certificate from the same CA (another serial), e.g. to rotate to; valid for `days` (default 365). */
  issueServer(cn?: string, days?: number): Pem;
  /** A client certificate from the same CA. */
  issueClient(cn?: string): Pem;
}

let serialCounter = 1;

function serialHex(): string {
  // Positive (leading nibble < 8) and unique within the process.
  return (0x10000000 + Date.now() % 0x0fffffff).toString(16) + (serialCounter++).toString(16).padStart(4, "0");
}

function sign(
  subjectCn: string,
  keys: forge.pki.rsa.KeyPair,
  issuer: { cert: forge.pki.Certificate; key: forge.pki.rsa.PrivateKey } | undefined,
  extensions: object[],
  days = 365,
): forge.pki.Certificate {
  const cert = forge.pki.createCertificate();
  cert.publicKey = keys.publicKey;
  cert.serialNumber = serialHex();
  cert.validity.notBefore = new Date(Date.now() - 24 * 3600_000);
  cert.validity.notAfter = new Date(Date.now() + days * 24 * 3600_000);
  cert.setSubject([{ name: "commonName", value: subjectCn }]);
  cert.setIssuer(issuer ? issuer.cert.subject.attributes : [{ name: "commonName", value: subjectCn }]);
  cert.setExtensions(extensions);
  cert.sign(issuer ? issuer.key : keys.privateKey, forge.md.sha256.create());
  return cert;
}

function pem(cert: forge.pki.Certificate, key: forge.pki.rsa.PrivateKey): Pem {
  const certPem = forge.pki.certificateToPem(cert);
  return { cert: certPem, key: forge.pki.privateKeyToPem(key), serial: new X509Certificate(certPem).serialNumber };
}

/** Make a CA with a server and a client certificate, written to a new temp directory. */
export function makeTestPki(): TestPki {
  const caKeys = forge.pki.rsa.generateKeyPair(2048);
  const caCert = sign("gateway test CA", caKeys, undefined, [
    { name: "basicConstraints", cA: true, critical: true },
    { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
  ]);
  const issuer = { cert: caCert, key: caKeys.privateKey };
  const issueServer = (cn = "gateway test server", days = 365): Pem => {
    const keys = forge.pki.rsa.generateKeyPair(2048);
    const cert = sign(cn, keys, issuer, [
      { name: "basicConstraints", cA: false },
      { name: "keyUsage", digitalSignature: true, keyEncipherment: true, critical: true },
      { name: "extKeyUsage", serverAuth: true },
      { name: "subjectAltName", altNames: [{ type: 7, ip: "127.0.0.1" }, { type: 2, value: "localhost" }] },
    ], days);
    return pem(cert, keys.privateKey);
  };
  const issueClient = (cn = "gateway test client"): Pem => {
    const keys = forge.pki.rsa.generateKeyPair(2048);
    const cert = sign(cn, keys, issuer, [
      { name: "basicConstraints", cA: false },
      { name: "keyUsage", digitalSignature: true, keyEncipherment: true, critical: true },
      { name: "extKeyUsage", clientAuth: true },
    ]);
    return pem(cert, keys.privateKey);
  };
  const ca = pem(caCert, caKeys.privateKey);
  const server = issueServer();
  const client = issueClient();
  const dir = mkdtempSync(join(tmpdir(), "gw-tls-"));
  const files = {
    ca: join(dir, "ca.pem"),
    caKey: join(dir, "ca-key.pem"),
    serverCert: join(dir, "server.pem"),
    serverKey: join(dir, "server-key.pem"),
    clientCert: join(dir, "client.pem"),
    clientKey: join(dir, "client-key.pem"),
  };
  writeFileSync(files.ca, ca.cert);
  writeFileSync(files.caKey, ca.key, { mode: 0o600 });
  writeFileSync(files.serverCert, server.cert);
  writeFileSync(files.serverKey, server.key, { mode: 0o600 });
  writeFileSync(files.clientCert, client.cert);
  writeFileSync(files.clientKey, client.key, { mode: 0o600 });
  return { dir, ca, server, client, files, issueServer, issueClient };
}

/** base64 SHA-256 of a certificate's SubjectPublicKeyInfo: Chromium's --ignore-certificate-errors-spki-list pin. */
export function spkiHash(certPem: string): string {
  const spki = new X509Certificate(certPem).publicKey.export({ type: "spki", format: "der" });
  return createHash("sha256").update(spki).digest("base64");
}

import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

let root: string | undefined;

/** The package root (the folder holding `proto/`), found from this file whether run from src/ (tsx) or dist/. */
export function packageRoot(): string {
  if (root) return root;
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "proto", "platform", "status.proto"))) {
    const up = dirname(dir);
    if (up === dir) throw new Error("platform-gateway: cannot find the proto/ folder above " + fileURLToPath(import.meta.url));
    dir = up;
  }
  return (root = dir);
}

/** Absolute path of the gateway's proto folder. */
export function protoDir(): string {
  return join(packageRoot(), "proto");
}

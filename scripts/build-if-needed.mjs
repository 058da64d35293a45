// `npm start` runs this first: regenerate src/gen/ from the protos when they changed (scripts/gen-protos.mjs, quiet
// when up to date), then compile to dist/ only when a source (generated code included) is newer than the build.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

const stamp = "dist/src/main/cli.js";
function newest(dir) {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}
if (existsSync("scripts/gen-protos.mjs") && existsSync("proto")) {
  execFileSync(process.execPath, ["scripts/gen-protos.mjs"], { stdio: "inherit" });
}
const built = existsSync(stamp) ? statSync(stamp).mtimeMs : 0;
const sources = Math.max(newest("src"), statSync("tsconfig.json").mtimeMs, statSync("tsconfig.build.json").mtimeMs);
if (sources > built) {
  process.stderr.write("platform-gateway: compiling to dist/ (npm run build)\n");
  execFileSync(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "tsconfig.build.json"], { stdio: "inherit" });
}

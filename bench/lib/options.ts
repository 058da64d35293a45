import type { RunMode } from "./schema.js";
import { validateResultName } from "./results.js";

/** Command-line options of bench/run.ts. */
export interface RunOptions {
  /** full (default, ~10 min), quick (--quick, ~1 min) or dry-run (--dry-run: tiny counts, wiring only). */
  mode: RunMode;
  /** Suites to run (--only a,b); empty means all. */
  only: string[];
  /** Results file base name (--name); default "<mode>-<time>". */
  name: string | undefined;
  /** Where results go (--out-dir); default bench/results. */
  outDir: string | undefined;
  /** Which markdown file to regenerate (--markdown); default BENCHMARKS.md; "none" skips it. */
  markdown: string | undefined;
  /** --list: load every suite (external modules included), print whether it is available, run nothing. */
  list: boolean;
  /** --help */
  help: boolean;
}

/** Usage text. */
export const USAGE = `usage: npm run bench -- [--quick | --dry-run] [--only <suite>[,<suite>...]] [--name <name>] [--out-dir <dir>] [--markdown <file>|none] [--list]

  (default)      full run, about 10 minutes
  --quick        about 1 minute
  --dry-run      tiny iteration counts: checks the wiring (the smoke test uses it); external load suites are
                 loaded and checked, not run
  --only         suites to run: micro, rest, codec, invoke, fanout, web-fanout, peers
  --name         results file base name (default <mode>-<UTC time>)
  --out-dir      directory for <name>.json (default bench/results)
  --markdown     file whose generated section is rewritten (default BENCHMARKS.md; none to skip)
  --list         load every suite and say whether it is available; run nothing
`;

/** Parse argv (without node and script); throws an Error naming the bad argument. */
export function parseRunOptions(argv: readonly string[], suites: readonly string[]): RunOptions {
  const o: RunOptions = { mode: "full", only: [], name: undefined, outDir: undefined, markdown: undefined, list: false, help: false };
  let quick = false;
  let dry = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const [flag, inline] = arg.startsWith("--") && arg.includes("=") ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [arg, undefined];
    const value = (): string => {
      const v = inline ?? argv[++i];
      if (v === undefined || v === "") throw new Error(`${flag} needs a value`);
      return v;
    };
    switch (flag) {
      case "--quick":
        quick = true;
        break;
      case "--dry-run":
        dry = true;
        break;
      case "--only":
        for (const s of value().split(",").map((x) => x.trim()).filter(Boolean)) {
          if (!suites.includes(s)) throw new Error(`--only: unknown suite '${s}' (suites: ${suites.join(", ")})`);
          o.only.push(s);
        }
        break;
      case "--name":
        o.name = validateResultName(value());
        break;
      case "--out-dir":
        o.outDir = value();
        break;
      case "--markdown":
        o.markdown = value();
        break;
      case "--list":
        o.list = true;
        break;
      case "--help":
      case "-h":
        o.help = true;
        break;
      default:
        throw new Error(`unknown argument '${arg}'\n${USAGE}`);
    }
  }
  o.mode = dry ? "dry-run" : quick ? "quick" : "full";
  return o;
}

// ESLint 10 flat config (`npm run lint`): @eslint/js and typescript-eslint "recommended", without type-aware rules
// (`npm run typecheck` already runs the compiler in strict mode, and type-aware linting would triple the lint time).
// Where a recommended rule is turned down, the reason is beside it.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

/** Node's globals, for the few plain .cjs/.mjs files (TypeScript files get theirs from @types/node). */
const nodeGlobals = Object.fromEntries(
  ["require", "module", "process", "Buffer", "console", "setTimeout", "clearTimeout", "setInterval", "clearInterval", "setImmediate", "URL"].map((g) => [g, "readonly"]),
);

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", "bench/results/", "src/console/static/", "src/gen/", "test/support/protos/gen/", "coverage/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      // A leading underscore marks a binding kept on purpose (a `for (const _ of ...)` drain, a destructured field
      // dropped from a rest copy).
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", ignoreRestSiblings: true }],
      // grpc-js generic clients (makeGenericClientConstructor) have their methods looked up by name at run time;
      // `Function` is the honest type of such a lookup, called right after with the arguments the proto defines.
      "@typescript-eslint/no-unsafe-function-type": "off",
      // Input checks match control characters on purpose (topic names, header values).
      "no-control-regex": "off",
      // `let x` declared before the closures that read it and assigned once they exist (a handle, an AbortController
      // made after the first await): const cannot express that order.
      "prefer-const": ["error", { ignoreReadBeforeAssign: true }],
      "@typescript-eslint/no-unused-expressions": ["error", { allowTernary: true, allowShortCircuit: true }],
      // Requests and replies of proto-loader's untyped definitions reach handlers as `any` until the handlers take the
      // types generated from proto/ (issue 14 item 1): a warning in src/ so each one stays visible.
      "@typescript-eslint/no-explicit-any": "warn",
    },
  },
  {
    // Tests and benches drive generic grpc-js clients and parse arbitrary replies: `any` is what those give back,
    // and each test asserts the shape it reads.
    files: ["test/**", "bench/**"],
    rules: { "@typescript-eslint/no-explicit-any": "off" },
  },
  {
    files: ["**/*.cjs"],
    languageOptions: { sourceType: "commonjs", globals: nodeGlobals },
    rules: { "@typescript-eslint/no-require-imports": "off" },
  },
  { files: ["**/*.mjs"], languageOptions: { globals: nodeGlobals } },
);

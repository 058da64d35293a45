# Platform Gateway image (deploy/dapr/deployment.yaml runs it next to daprd).
#   docker build -t platform-gateway:latest .
#   docker run --rm -p 5000:5000 -p 8080:8080 -e GATEWAY_API_KEYS=... -e APP_API_TOKEN=... platform-gateway:latest
# Two stages: the first compiles TypeScript with the dev dependencies, the second holds only the compiled dist/,
# the protos, the web console's static files and the production dependencies (npm ci --omit=dev).

FROM node:20-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY proto ./proto
COPY scripts ./scripts
COPY src ./src
# npm run build generates src/gen/ from proto/ and @dapr/dapr's protos first (scripts/gen-protos.mjs: buf and
# proto-loader-gen-types, both dev dependencies installed above), then compiles.
RUN npm run build

FROM node:20-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
# proto/ is read at runtime (src/shared/paths.ts finds it above dist/).
COPY proto ./proto
# The console's browser files are read at startup from src/main/console/static (src/main/console/index.ts); without
# them the gateway exits at startup (ENOENT).
COPY src/main/console/static ./src/main/console/static
COPY --from=build /app/dist ./dist
USER node
EXPOSE 5000 8080
# Exec form, no shell and no npm in between: node is PID 1 and receives SIGTERM itself; the gateway handles it
# (src/main/cli.ts: drain, then exit within --shutdown-timeout). Node reaps no zombies, but the gateway starts no
# child processes (worker threads only); add `docker run --init` / tini if you wrap it in a script that does.
# ENTRYPOINT + CMD rather than one CMD so Kubernetes `args:` (deployment.yaml) replace only the flags.
# 0.0.0.0 needs TLS (GATEWAY_TLS_CERT / GATEWAY_TLS_KEY, mounted files) or GATEWAY_ALLOW_PLAINTEXT=true when something in
# front terminates TLS; without either the gateway refuses to start, saying so.
ENTRYPOINT ["node", "dist/src/main/cli.js"]
CMD ["--host", "0.0.0.0", "--grpc-port", "5000", "--http-port", "8080"]

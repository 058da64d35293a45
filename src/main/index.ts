/** Embedding API: start a gateway in-process. */
export { createGateway, GATEWAY_SERVICES, type Gateway, type GatewayOverrides } from "./gateway.js";
export { validateGatewayOptions, type GatewayOptions, DEFAULT_FORWARD_HEADERS } from "../config/options.js";
export type { ServiceConfig } from "../config/services.js";

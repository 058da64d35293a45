import { httpRequest } from "./http-request.js";

/** Poll until `ok` holds (bounded). */
export async function until(what: string, ok: () => Promise<boolean> | boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The gateway has the library's routes once GET on a shelf's books is no longer 404. */
export async function routesLoaded(base: string, path = "/v1/shelves/warmup/books", headers: Record<string, string> = {}): Promise<void> {
  await until("the transcoding routes", async () => (await httpRequest(base, "GET", path, undefined, headers)).status !== 404);
}


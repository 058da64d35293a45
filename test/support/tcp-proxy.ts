import { createServer, connect, type AddressInfo, type Socket } from "node:net";

/** A TCP proxy on 127.0.0.1 in front of a local port that can drop every connection, as a network cut would. */
export interface TcpProxy {
  port: number;
  /** Client connections accepted so far, and open now. */
  accepted(): number;
  open(): number;
  /** Destroy every open connection (both sides); new connections are still accepted. */
  dropAll(): void;
  close(): void;
}

/** Start a proxy to 127.0.0.1:`target`. */
export function startTcpProxy(target: number): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const clients = new Set<Socket>();
  let accepted = 0;
  const server = createServer((client) => {
    accepted++;
    clients.add(client);
    client.on("close", () => clients.delete(client));
    const upstream = connect(target, "127.0.0.1");
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => undefined);
    }
    client.pipe(upstream).pipe(client);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  const dropAll = (): void => {
    for (const s of sockets) s.destroy();
  };
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({
        port: (server.address() as AddressInfo).port,
        accepted: () => accepted,
        open: () => clients.size,
        dropAll,
        close: () => {
          dropAll();
          server.close();
        },
      }),
    ),
  );
}

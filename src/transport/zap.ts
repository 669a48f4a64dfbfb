/**
 * A ZAP handler (ZeroMQ RFC 27) that admits only the listed CURVE client keys. Without it a
 * CURVE server encrypts but lets in any client that knows the server's public key.
 */
import * as zmq from "zeromq";

const ZAP_ENDPOINT = "inproc://zeromq.zap.01";

/** A client the ZAP handler turned away: its address (ip:port as libzmq gives it) and its key (Z85). */
export type ZapDenied = (address: string, clientKey: string) => void;

/** Makes `socket` a CURVE server; with authorizedClients, starts the ZAP handler that admits only them. */
export async function curveServer(
  socket: zmq.Router,
  curve: { publicKey: string; secretKey: string; authorizedClients?: string[] | undefined },
  onDenied?: ZapDenied,
): Promise<{ close(): void } | undefined> {
  const zap = curve.authorizedClients ? await startZapHandler(curve.authorizedClients, socket.context, onDenied) : undefined;
  socket.curveServer = true;
  socket.curveSecretKey = curve.secretKey;
  socket.curvePublicKey = curve.publicKey;
  if (zap) socket.zapDomain = "memlane";
  return zap;
}

export async function startZapHandler(authorized: readonly string[], context: zmq.Context, onDenied?: ZapDenied): Promise<{ close(): void }> {
  const allowed = new Set(authorized);
  const socket = new zmq.Reply({ context, linger: 0 });
  await socket.bind(ZAP_ENDPOINT);
  void (async () => {
    try {
      for await (const frames of socket) {
        // [version, requestId, domain, address, identity, mechanism, ...credentials]
        const [version, requestId, , address, , mechanism, key] = frames;
        const ok = mechanism?.toString() === "CURVE" && key !== undefined && key.length === 32 && allowed.has(z85(key));
        if (!ok) {
          try {
            onDenied?.(address?.toString() ?? "?", key && key.length === 32 ? z85(key) : "?");
          } catch {
            // counting must never stop the handler
          }
        }
        await socket.send([
          version ?? "1.0",
          requestId ?? "",
          ok ? "200" : "400",
          ok ? "OK" : "client key not authorized",
          ok && key ? z85(key) : "",
          "",
        ]);
      }
    } catch {
      // closed with the broker
    }
  })();
  return { close: () => socket.close() };
}

const Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

/** Z85 text of a key (length a multiple of 4), as zmq.curveKeyPair() writes keys. */
export function z85(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i + 4 <= bytes.length; i += 4) {
    let value = ((bytes[i]! << 24) | (bytes[i + 1]! << 16) | (bytes[i + 2]! << 8) | bytes[i + 3]!) >>> 0;
    let chunk = "";
    for (let j = 0; j < 5; j++) {
      chunk = Z85[value % 85]! + chunk;
      value = Math.floor(value / 85);
    }
    out += chunk;
  }
  return out;
}

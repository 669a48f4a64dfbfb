// The transport layer's public surface (src/index.ts re-exports from here).
export { Broker, type Expectation, type Peer, type PeerHandler } from "./broker.ts";
export type { BrokerOptions, CurveServerKeys } from "./endpoint.ts";
export {
  decodeMessage,
  decodeTensors,
  encodeEnvelope,
  encodeMessage,
  encodeTensors,
  type DecodeResult,
  type Decoded,
  type ProtocolViolation,
  type Tensor,
  type TensorData,
} from "./codec.ts";
export * from "./protocol.ts";

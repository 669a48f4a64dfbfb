/**
 * The digits CNN trained three ways, one after the other so that they do not share the CPU:
 * in one process, with DDP on 2 ranks, and with FSDP on 2 ranks (torch.distributed.run, c10d
 * rendezvous, gloo). The report sets each rank's memory per phase beside the single process's,
 * with the parameter, gradient and optimizer-state bytes each held (docs/distributed.md).
 * The FSDP model is then exported and deployed on ONNX Runtime like any trained one.
 *
 *   memlane run pipelines/digits-ddp.ts
 */
import { pipeline } from "../src/index.ts";

const common = { arch: "digits-cnn", epochs: 8, seed: 0, batchSize: 32 } as const;

export default pipeline("digits-ddp", { threads: 1 })
  .train({ ...common, name: "train-single", minAccuracy: 0.9 })
  .train({ ...common, name: "train-ddp", after: ["train-single"], distributed: { nproc: 2, strategy: "ddp", backend: "gloo" }, minAccuracy: 0.9 })
  .train({ ...common, name: "train-fsdp", after: ["train-ddp"], distributed: { nproc: 2, strategy: "fsdp", backend: "gloo" }, minAccuracy: 0.9 })
  .export({ from: "train-fsdp" })
  .benchmark("python-ort");

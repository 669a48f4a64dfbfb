// NCCL on a machine without CUDA: refused, unless allowCpuFallback (the second stage).
import { pipeline } from "../../../src/index.ts";

export default pipeline("dist-nccl", { threads: 1 })
  .train({ name: "fallback", arch: "digits-cnn", epochs: 1, seed: 0, retries: 0, distributed: { nproc: 2, strategy: "ddp", backend: "nccl", allowCpuFallback: true } })
  .train({ name: "refused", after: ["fallback"], arch: "digits-cnn", epochs: 1, seed: 0, retries: 0, distributed: { nproc: 2, strategy: "ddp", backend: "nccl" } });

// tiny-gpt in one process, with FSDP and with DDP on 2 gloo ranks: few steps, enough to compare.
import { pipeline } from "../../../src/index.ts";

const common = { arch: "tiny-gpt", epochs: 1, stepsPerEpoch: 30, seed: 0, batchSize: 16, retries: 0 } as const;

export default pipeline("dist-gpt", { threads: 1 })
  .train({ ...common, name: "train-single" })
  .train({ ...common, name: "train-fsdp", after: ["train-single"], distributed: { nproc: 2, strategy: "fsdp" } })
  .train({ ...common, name: "train-ddp", after: ["train-fsdp"], distributed: { nproc: 2, strategy: "ddp" } });

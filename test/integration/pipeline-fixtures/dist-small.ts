// Small enough for `npm test`: the digits CNN in one process, then with DDP and FSDP on 2 gloo ranks.
import { pipeline } from "../../../src/index.ts";

const common = { arch: "digits-cnn", epochs: 3, seed: 0, batchSize: 32, retries: 0 } as const;

export default pipeline("dist-small", { threads: 1 })
  .train({ ...common, name: "train-single" })
  .train({ ...common, name: "train-ddp", after: ["train-single"], distributed: { nproc: 2, strategy: "ddp" } })
  .train({ ...common, name: "train-fsdp", after: ["train-ddp"], distributed: { nproc: 2, strategy: "fsdp" } });

// The multi-host test's pipeline: the digits CNN with DDP on 2 gloo ranks, one on each of two
// hosts (`distributed.nnodes: 2`; the endpoint comes from `memlane run --rdzv-endpoint`).
// MEMLANE_TEST_EPOCHS lengthens it for the test that kills a remote rank mid-training.
import { pipeline } from "../../../src/index.ts";

const epochs = Number(process.env.MEMLANE_TEST_EPOCHS ?? 2);

export default pipeline("two-hosts", { threads: 1 })
  .train({ arch: "digits-cnn", epochs, seed: 0, batchSize: 32, retries: 0, distributed: { nproc: 1, nnodes: 2, strategy: "ddp", backend: "gloo" } });

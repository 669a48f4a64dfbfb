/**
 * Zoo cases whose native row memlane-rt cannot produce yet, each with the reason its row must
 * give. The suite stays strict around them: their python-ort and node-ort rows must run and
 * match, the native row must fail for exactly this reason (any other failure fails the case),
 * and a listed case that starts passing fails too, so that this list only ever shrinks
 * honestly. Every entry is a gap of issue 9 that is still open; docs/zoo.md lists them.
 */
export const NATIVE_GAPS: Readonly<Record<string, RegExp>> = Object.freeze({
  // None open: the 16 of 2026-11-22 (the batch off axis 0 in vit_small and nn.TransformerEncoder,
  // nn.LSTM's layout 0 with h_n/c_n, GatherND in transformers' dynamo masks, GPT-2's rank-3
  // Gemm) run natively now. A new gap goes here as `"model.exporter": /reason/`.
});

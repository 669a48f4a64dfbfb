/**
 * Zoo cases whose native row memlane-rt cannot produce yet, each with the reason its row must
 * give. The suite stays strict around them: their python-ort and node-ort rows must run and
 * match, the native row must fail for exactly this reason (any other failure fails the case),
 * and a listed case that starts passing fails too, so that this list only ever shrinks
 * honestly. Every entry is a gap of issue 9 that is still open; docs/zoo.md lists them.
 */
export const NATIVE_GAPS: Readonly<Record<string, RegExp>> = Object.freeze({
  // The batch leaves axis 0: torchvision's encoder (and nn.TransformerEncoder with batch_first
  // False) transposes [B, S, E] to [S, B, E]; MatMul, LayerNorm and Transpose still want the
  // batch first there.
  "vit_small.legacy": /Transpose node "[^"]+": perm \[1,0,2\] moves/,
  "vit_small.dynamo": /Transpose node "[^"]+": perm \[1,0,2\] moves/,
  "transformer_encoder_postnorm_sf.legacy": /MatMul node/,
  "transformer_encoder_postnorm_sf.dynamo": /MatMul node/,
  "transformer_encoder_postnorm_bf.legacy": /Transpose node/,
  "transformer_encoder_postnorm_bf.dynamo": /Transpose node/,
  "transformer_encoder_prenorm_sf.legacy": /LayerNormalization node/,
  "transformer_encoder_prenorm_sf.dynamo": /LayerNormalization node/,
  "transformer_encoder_prenorm_bf.legacy": /Transpose node/,
  "transformer_encoder_prenorm_bf.dynamo": /Transpose node/,
  // nn.LSTM's layout 0 keeps the batch on axis 1 (and these use h_n): no batch-first rewrite.
  "lstm.legacy": /LSTM node "[^"]+": layout 0 puts the batch on axis 1/,
  "lstm.dynamo": /LSTM node "[^"]+": layout 0 puts the batch on axis 1/,
  // transformers' dynamo exports build their attention masks with GatherND.
  "bert.dynamo": /op GatherND \(node/,
  "distilbert.dynamo": /op GatherND \(node/,
  "gpt2.dynamo": /op GatherND \(node/,
  // GPT-2's Conv1D is a Gemm on a [B, S, E] activation (rank 3), which the Gemm lowering refuses.
  "gpt2.legacy": /Gemm node "[^"]+"/,
});

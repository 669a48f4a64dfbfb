// LayerNormalization over contiguous rows, as a plain function (no plan types) so that it
// can be tested and reused whatever the tensor structs look like.
#pragma once

#include <cstdint>

namespace memlane::cpu {

// For each of `rows` rows of `n` floats: y = (x - mean) / sqrt(var + eps) * scale + bias,
// var the biased (population) variance as ONNX defines it. scale and bias hold n floats;
// bias may be null. x may equal y.
void layernorm_rows(const float* x, float* y, int64_t rows, int64_t n, const float* scale, const float* bias,
                    float eps);

}  // namespace memlane::cpu

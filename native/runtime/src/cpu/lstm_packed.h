// The AVX-512 LSTM (lstm_packed.cc): W, R and the biases repacked once at build so that one
// time step of 16 hidden units is one register-blocked product over the previous h, the gate
// arithmetic (sigmoid, tanh, the cell update) done on the accumulators before they leave the
// registers. lstm.cc picks it where the CPU has AVX-512F and keeps lstm() as the portable path.
//
// Gate-interleaved columns: hidden units are padded to Hp (a multiple of 16) and the 4 * Hp
// gate columns ordered (block jb of 16 units, gate g in ONNX order i, o, f, c, lane l), so
// one block's four gates are 64 consecutive floats. Padded units have zero weights and bias:
// their gates are sigmoid(0) and tanh(0), which keep their c and h at exactly 0.
#pragma once

#include <cstdint>
#include <vector>

#include "cpu/cnn_ops.h"
#include "cpu/aligned_floats.h"

namespace memlane::cpu {

class ThreadPool;

struct LstmPacked {
  int D = 1;
  int64_t H = 0, Hp = 0, I = 0;
  AlignedFloats w;     // [I, D * 4Hp]: W^T, columns gate-interleaved (one product for every direction)
  AlignedFloats r;     // [D][Hp / 16][H][64]: R^T, per block of 16 units its 64 gate columns per k
  AlignedFloats bias;  // [D * 4Hp]: Wb + Rb, gate-interleaved (zeros without B), added by the projection
};

// W [D, 4H, I], R [D, 4H, H], bias [D, 8H] or null, as lstm() takes them.
LstmPacked lstm_pack(const float* W, const float* R, const float* bias, int D, int64_t H, int64_t I);

// Workspace floats of lstm_packed: the projection [S * B, D * 4Hp] and per direction h twice
// (the step reads one, writes the other) and c, [B, Hp] each.
int64_t lstm_packed_workspace_floats(const LstmDims& d, const LstmPacked& p);

// lstm() (cnn_ops.h: the same dims, strides and outputs) from packed weights. Needs
// simd::have_avx512(). With a pool of 2+ threads the directions, or groups of batch rows,
// run as independent tasks; one long recurrence over a large R splits each step's blocks of
// units across the pool instead (MEMLANE_LSTM_SPLIT=tasks|cols|none forces one, for A/B).
void lstm_packed(const LstmDims& d, const LstmPacked& p, const float* x, float* y, float* yh, float* yc,
                 float* workspace, ThreadPool* pool);

}  // namespace memlane::cpu

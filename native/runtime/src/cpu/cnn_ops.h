// Plain kernels of the CNN / data-movement ops and LSTM over raw pointers with explicit
// dims and strides (no Plan types), so that they outlive changes to the plan's tensor
// structs; each lives in its own file, with its Kernel/factory wrapper next to it.
#pragma once

#include <cstdint>

namespace memlane::cpu {

class ThreadPool;  // lstm() splits its input projection on it (sgemm_pool.h)

// clip_hard.cc: elementwise over n floats (x and y do not alias).
void clip(const float* x, float* y, int64_t n, float lo, float hi);
void hard_sigmoid(const float* x, float* y, int64_t n, float alpha, float beta);  // clamp(a*x+b, 0, 1)
void hard_swish(const float* x, float* y, int64_t n);                              // x * clamp(x/6+0.5, 0, 1)
void silu(const float* x, float* y, int64_t n);                                    // x * sigmoid(x)

// pad.cc: y = pad(x) over `rank` dims (the batch included, its pads 0). pads: rank begins
// then rank ends, each may be negative (a crop). mode 0 constant, 1 reflect, 2 edge.
inline constexpr int kPadMaxRank = 8;
void pad_nd(const float* x, float* y, int rank, const int64_t* in_dims, const int64_t* pads, int mode,
            float value);

// split.cc: x [outer, sum(parts) * inner] into ys[k] [outer, parts[k] * inner].
void split_axis(const float* x, float* const* ys, int64_t outer, const int64_t* parts, int n_parts,
                int64_t inner);

// lstm.cc: one ONNX LSTM layer (gates i, o, f, c; sigmoid/tanh/tanh; no peepholes, no clip).
// X rows are contiguous [I] vectors; row (t, b) is x + (t * x_t + b * x_b) * I. Y element
// (t, d, b, h) is y + t * y_t + d * y_d + b * y_b + h (H contiguous); Y_h / Y_c element
// (d, b, h) is at d * s_d + b * s_b + h. Any of y, yh, yc may be null; h0/c0 null = zeros.
struct LstmDims {
  int64_t S = 0, B = 0, I = 0, H = 0;
  int D = 1;             // directions: 1 or 2
  bool reverse = false;  // with D = 1: run backwards in time
  int64_t x_t = 0, x_b = 0;            // in rows of I
  int64_t y_t = 0, y_d = 0, y_b = 0;   // in floats
  int64_t s_d = 0, s_b = 0;            // Y_h / Y_c, in floats
};
// `d` for a batch of B in plan v1's batch-first layout (layout 1): row (t, b) of X is b * S + t,
// Y [B, S, D, H], Y_h / Y_c [B, D, H]. The LSTM and GRU kernels run with these strides.
LstmDims batch_first_dims(LstmDims d, int64_t B);
// Workspace floats lstm() needs: the input projection of every step plus the recurrent state.
int64_t lstm_workspace_floats(const LstmDims& d);
// W [D, 4H, I], R [D, 4H, H], bias [D, 8H] (Wb then Rb; null = zeros).
void lstm(const LstmDims& d, const float* x, const float* W, const float* R, const float* bias,
          float* y, float* yh, float* yc, float* workspace,
          ThreadPool* pool = nullptr);

// gru.cc: one ONNX GRU layer (gates z, r, h; sigmoid/tanh), LstmDims' strides, Y_h's at s_d/s_b.
// W [D, 3H, I], R [D, 3H, H], bias [D, 6H] (Wb then Rb; null = zeros). linear_before_reset:
// the reset gate scales h·Rh^T + Rbh (torch's nn.GRU) instead of h before the product.
int64_t gru_workspace_floats(const LstmDims& d);
void gru(const LstmDims& d, bool linear_before_reset, const float* x, const float* W, const float* R,
         const float* bias, float* y, float* yh, float* workspace, ThreadPool* pool = nullptr);

// transpose_nd.cc: y = x.transpose(perm) over `rank` (<= 6) dims, the batch included and free
// to move (plan v1's factory still refuses perm[0] != 0: its per-sample layout needs the batch first).
inline constexpr int kTransposeMaxRank = 6;
void transpose_nd(const float* x, float* y, int rank, const int64_t* dims, const int* perm);
// Float words the transposes move an element of `elem_bytes` as (4 bytes: one; 8, int64: two,
// an extra last axis that stays in place); 0 for a size they do not move (1-byte bools).
inline int transpose_words(int64_t elem_bytes) { return elem_bytes == 8 ? 2 : elem_bytes == 4 ? 1 : 0; }
// The same transpose over the fewest axes: input axes that stay neighbours in the output (perm
// [..., a, a+1, ...]) become one, size-1 axes go. Writes dims and perm of `*rank_out` axes
// (at most rank, at least 1; rank <= 2 x kTransposeMaxRank). Channel shuffles ([N, 2, C, H, W] -> [N, C, 2, H, W]) then copy
// whole H x W planes instead of W-float rows through index arithmetic.
void merge_transpose_axes(int rank, const int64_t* dims, const int* perm, int* rank_out, int64_t* mdims, int* mperm);

}  // namespace memlane::cpu

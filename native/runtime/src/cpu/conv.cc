// Conv (2-D, NCHW): im2col + sgemm (sgemm_pool.h); 1x1/stride-1/no-pad convs multiply the input
// directly. This file: make_conv (which path a conv takes), run() / run_paths (the dispatch, and
// the OpenBLAS pointwise path) and the workspace sizing; the other paths live by concern in
// conv_pointwise.cc, conv_avx512_paths.cc and conv_im2col.cc (conv_kernel.h says which).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cpu/conv_depthwise.h"
#include "cpu/conv_direct.h"
#include "cpu/conv_flat.h"
#include "cpu/conv_grouped_blocked.h"
#include "cpu/conv_grouped_blocked_isa.h"
#include "cpu/conv_kernel.h"
#include "cpu/conv_winograd.h"
#include "cpu/conv_winograd_avx2.h"
#include "cpu/env_count.h"
#include "cpu/kernel.h"
#include "cpu/plan_queries.h"
#include "cpu/sgemm_pool.h"
#include "cpu/simd/avx2_gemm.h"
#include "cpu/simd/avx512.h"
#include "cpu/simd/pw_lanes.h"
#include "plan/concat_in_place.h"

namespace memlane::cpu {
namespace conv_detail {

// Columns a pointwise product panel takes: its M x cols output about 256 KiB (L2-resident),
// at least 256 columns (OpenBLAS call and packing overhead). MEMLANE_CONV_PANEL overrides
// (a tuning aid; 0 = the whole map in one product).
int64_t ConvKernel::pointwise_panel() const {
  static const int64_t forced = env_count("MEMLANE_CONV_PANEL", -1);
  if (forced == 0) return g.P();
  if (forced > 0) return forced;
  return std::max<int64_t>(256, (65536 / std::max<int64_t>(g.M, 1)) / 64 * 64);
}

// The channels-in-lanes path reads only its panels (W and the bias); Winograd reads U, except
// on maps it takes two samples at a time (8x8), where a lone sample (every batch-1 run) goes
// to the direct kernel on W.
std::vector<const float*> ConvKernel::repacked_weights() const {
  if (grouped) return {w, b};
  if (pointwise_lanes) return {w, b};
  if (pixel_rows) return {w};
  if (winograd && conv_winograd_samples(g.OH, g.OW) == 1) return {w};
  if (winograd_avx2) return {w};
  return {};
}

const char* ConvKernel::path() const {
  if (grouped) return grouped->isa->name;
  if (pointwise_lanes) return "pointwise_lanes";
  if (pointwise_simd) return "pointwise_simd";
  if (pointwise) return "pointwise_blas";
  if (winograd) return "winograd";
  if (winograd_avx2) return "winograd_avx2";
  if (direct) return "direct";
  if (pixel_rows) return "pixel_rows";
  if (flat) return "flat";
  return padded ? "padded" : "im2col";
}

uint64_t ConvKernel::path_floats(int64_t maxBatch) const {
  if (grouped) return grouped->workspace_floats();
  if (pointwise) return split_input_fits() ? uint64_t(threads) * g.M * g.P() : 0;  // the threads' partial sums
  if (pixel_rows) return pixel_rows_floats();
  if (winograd)
    return uint64_t(conv_winograd_samples(g.OH, g.OW) * conv_direct_floats(g.C, Hp, Wp, 2, 3, 1) +
                    threads * conv_winograd_scratch(g.C, g.M));
  if (winograd_avx2) return uint64_t(winograd_avx2_pad_slice() + threads * winograd_avx2_scratch_floats(wg));
  if (direct) return uint64_t(conv_direct_floats(g.C, Hp, Wp, g.sw, g.kw, g.dw));
  if (flat)
    return uint64_t(padded_input_floats() +
                    threads * conv_flat_scratch(g.OH, Wp));
  if (padded) return padded_ws(g.group == 1 ? padded_chunk(maxBatch) : 1);
  int64_t s = chunk(maxBatch);
  if (g.group == 1 && s > 1) return uint64_t(g.K() + g.M) * g.P() * s;
  return uint64_t(g.K()) * g.P();
}

void ConvKernel::run(const RunCtx& c) const {
  if (!copy_input && !subsample) return run_paths(c);
  if (subsample) gather_strided(c, c.workspace);
  else std::memcpy(c.workspace, x.at(c), sizeof(float) * uint64_t(c.batch * g.C * g.H * g.W));
  RunCtx after = c;
  after.workspace = c.workspace + input_copy_floats(c.batch);
  run_paths(after);
}

void ConvKernel::run_paths(const RunCtx& c) const {
  const float* X = input(c);
  float* Y = y.at(c);
  const int64_t in_sz = g.C * g.P(), out_sz = g.M * g.P(), P = g.P();  // (pointwise: H x W = P, or subsampled)
  if (grouped) return grouped->run(c, X, Y);
  if (pointwise_lanes) return run_pointwise_lanes(c);
  if (pointwise_simd) return run_pointwise_simd(c);
  if (pointwise) {
    // Column panels of the product whose output (M x cols) fits in L2, each with its bias and
    // activation applied while it is there, instead of one product then a pass over all of Y.
    // (With intra-op threads the pool splits each product; narrow panels would starve it.)
    const int64_t cols = c.pool->threads() > 1 ? P : pointwise_panel();
    const bool epi = b || relu || act.kind != ConvAct::kNone;
    for (int64_t n = 0; n < c.batch; ++n) {
      float* yn = Y + n * out_sz;
      for (int64_t p0 = 0; p0 < P; p0 += cols) {
        const int64_t pc = std::min(cols, P - p0);
        sgemm_pool(c.pool, false, g.M, pc, g.C, 1.f, w, g.C, X + n * in_sz + p0, P, 0.f, yn + p0, P);
        if (epi)
          for (int64_t m = 0; m < g.M; ++m) bias_act(yn + m * P + p0, yn + m * P + p0, P, b ? b + m : nullptr, 1, pc, relu, act);
      }
    }
    return;
  }
  if (!run_product(c) && act.kind != ConvAct::kNone) conv_activate(Y, c.batch * out_sz, act);
}

}  // namespace conv_detail

std::unique_ptr<Kernel> make_conv(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  using namespace conv_detail;  // ConvKernel, ConvGeom and the path constants (conv_kernel.h)
  if (!need_inputs(op, 2, 3, st, msg)) return nullptr;
  const TensorInfo& X = bc.info(op.inputs[0]);
  const TensorInfo& Wt = bc.info(op.inputs[1]);
  const TensorInfo& Y = bc.info(op.outputs[0]);
  if (X.is_weight() || !Wt.is_weight()) return unsupported(op, "expects an activation X and a weight W", st, msg);
  if (X.shape.size() != 4 || Wt.shape.size() != 4 || Y.shape.size() != 4)
    return unsupported(op, "only 2-D convolution (rank-4 X, W, Y) is supported; X " + shape_str(X.shape) +
                               ", W " + shape_str(Wt.shape), st, msg);
  const OpAttrs& a = op.attrs;
  auto k = std::make_unique<ConvKernel>();
  ConvGeom& g = k->g;
  g = {X.shape[1], X.shape[2], X.shape[3], Wt.shape[0], Y.shape[2], Y.shape[3], a.kernel[0], a.kernel[1],
       a.strides[0], a.strides[1], a.pads[0], a.pads[1], a.dilations[0], a.dilations[1], a.group};
  if (g.group < 1 || g.C % g.group || g.M % g.group || Wt.shape[1] != g.Cg())
    return unsupported(op, "group " + std::to_string(g.group) + " does not divide C=" + std::to_string(g.C) +
                               " and M=" + std::to_string(g.M) + " with W " + shape_str(Wt.shape), st, msg);
  if (Wt.shape[2] != g.kh || Wt.shape[3] != g.kw)
    return unsupported(op, "kernel attr [" + std::to_string(g.kh) + "," + std::to_string(g.kw) +
                               "] differs from W " + shape_str(Wt.shape), st, msg);
  if (g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1 || a.pads[0] < 0 || a.pads[1] < 0 || a.pads[2] < 0 || a.pads[3] < 0)
    return unsupported(op, "strides and dilations must be >= 1, pads >= 0", st, msg);
  const int64_t eoh = (g.H + a.pads[0] + a.pads[2] - (g.dh * (g.kh - 1) + 1)) / g.sh + 1;
  const int64_t eow = (g.W + a.pads[1] + a.pads[3] - (g.dw * (g.kw - 1) + 1)) / g.sw + 1;
  if (Y.shape[1] != g.M || eoh != g.OH || eow != g.OW)
    return unsupported(op, "output shape " + shape_str(Y.shape) + " differs from the computed [-1," +
                               std::to_string(g.M) + "," + std::to_string(eoh) + "," + std::to_string(eow) + "]", st, msg);
  k->x = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  k->w = Wt.data;
  if (op.inputs.size() > 2 && op.inputs[2] != kAbsentInput) {
    const TensorInfo& B = bc.info(op.inputs[2]);
    if (!B.is_weight() || B.elements() != g.M)
      return unsupported(op, "bias must be a weight of M=" + std::to_string(g.M) + " elements, got " + shape_str(B.shape), st, msg);
    k->b = B.data;
  }
  k->relu = a.activation == Activation::kRelu;
  // A folded Relu / Clip / HardSwish / SiLU (the backend's activation_epilogue): every path
  // takes it; Relu joins the paths' own relu, the others run after the product (conv_act.h).
  const bool fuse = std::getenv("MEMLANE_NO_FUSION") == nullptr;
  const bool depthwise = g.group == g.C && g.M == g.C && g.C > 1 && std::getenv("MEMLANE_CONV_NO_DEPTHWISE") == nullptr;
  // Output over the input: the depthwise kernel copies each channel into its scratch plane
  // before writing that channel's output, so in place is safe there when the output is
  // exactly the input's bytes and a channel's output as large as its input. Every other path
  // reads X after writing Y: it takes a copy of X first (copy_input), where the output is at
  // least as large as X (else the copy would cost more than the activation's own pass).
  // (MEMLANE_CONV_NO_IN_PLACE=1 refuses both: A/B timing.)
  // A depthwise conv on the grouped kernel (strided to small maps without AVX-512: below) is
  // not in-place safe: its bands and its threads' row pieces read input rows (the taps' halo)
  // that another band or thread has already overwritten. It takes the copy as the other paths
  // do. (A strided conv's output is smaller than its input: no activation writes over it.)
  const bool in_place_ok = std::getenv("MEMLANE_CONV_NO_IN_PLACE") == nullptr;
  const bool dw_grouped = depthwise && grouped_blocked_takes_depthwise(g.OH, g.OW, g.sh, g.sw);
  const auto dw_over_input = [&](const ConvEpilogue* e) {
    return depthwise && !dw_grouped && e->over_input_exact && g.OH * g.OW == g.H * g.W && in_place_ok;
  };
  const auto copy_over_input = [&] {
    return (!depthwise || dw_grouped) && g.M * g.OH * g.OW >= g.C * g.H * g.W && in_place_ok;
  };
  if (const ConvEpilogue* e = bc.epilogue;
      e && e->residual < 0 && fuse && a.activation == Activation::kNone &&
      (!e->over_input || dw_over_input(e) || copy_over_input())) {
    k->copy_input = e->over_input && (!depthwise || dw_grouped);
    k->y = bc.ref(e->output);
    if (e->act.kind == ConvAct::kRelu) k->relu = true;
    else k->act = e->act;
    e->taken = true;
  }
  // Depthwise (one filter a channel): its own kernel (conv_depthwise.h), or, strided to small
  // maps without AVX-512, the channel-blocked grouped kernel, 8 channels in the lanes
  // (conv_grouped_blocked.h: grouped_blocked_takes_depthwise). MEMLANE_CONV_NO_DEPTHWISE=1 keeps
  // it on the grouped im2col path (ctest runs the ops both ways).
  const GroupedGeom gg{g.C, g.H, g.W, g.M, g.OH, g.OW, g.kh, g.kw, g.sh, g.sw, g.pt, g.pl, g.dh, g.dw, g.group};
  if (depthwise) {
    if (dw_grouped) {
      k->grouped = make_grouped_blocked(gg, k->w, k->b, k->folded_act(), bc.threads);
      if (k->grouped) return k;
    }
    const DwGeom dg{g.H, g.W, g.OH, g.OW, g.kh, g.kw, g.sh, g.sw, g.pt, g.pl, g.dh, g.dw};
    ConvAct act = k->act;
    if (k->relu) act.kind = ConvAct::kRelu;
    return make_depthwise_kernel(dg, g.C, k->x, k->y, k->w, k->b, act, bc.threads);
  }
  // Grouped convs with 2+ channels a group: the channel-blocked kernel (conv_grouped_blocked.h)
  // where it exists, else the paths below (direct group by group, or im2col).
  if (g.group > 1 && g.Cg() > 1) {
    k->grouped = make_grouped_blocked(gg, k->w, k->b, k->folded_act(), bc.threads);
    if (k->grouped) return k;
  }
  // Strided 1x1 convs run on a gathered copy of the pixels they read (subsample): on the
  // pixel-rows path their 16-64 taps made each tile's store cost as much as its product
  // (RegNet's 32 -> 64 stride-2 projection 2.1x ORT's time in the model).
  // MEMLANE_CONV_NO_SUBSAMPLE=1 keeps them there (A/B; ctest runs the ops both ways).
  static const bool subsample_ok = std::getenv("MEMLANE_CONV_NO_SUBSAMPLE") == nullptr;
  k->pointwise = g.kh == 1 && g.kw == 1 && (subsample_ok || (g.sh == 1 && g.sw == 1)) && g.group == 1 && a.pads[0] == 0 &&
                 a.pads[1] == 0 && a.pads[2] == 0 && a.pads[3] == 0;
  k->subsample = k->pointwise && (g.sh > 1 || g.sw > 1);
  // MEMLANE_CONV_PW_BLAS=1 keeps every pointwise conv on OpenBLAS (A/B timing; ctest runs both).
  // The pixels-in-lanes kernels: AVX-512's, else AVX2+FMA's (simd/avx2_gemm.h).
  const bool pw_simd_kernel = simd::have_avx512() || simd::have_avx2_gemm();
  static const int64_t pw_simd_min_p =
      env_count("MEMLANE_CONV_PW_SIMD_MINP", simd::have_avx512() ? kPwSimdMinP : kPwSimdMinPAvx2);
  k->pointwise_simd = k->pointwise && g.P() >= pw_simd_min_p && pw_simd_kernel &&
                      std::getenv("MEMLANE_CONV_PW_BLAS") == nullptr;
  // MEMLANE_CONV_NO_PW_LANES=1 keeps small maps on the pixels-in-lanes paths (ctest runs both).
  static const int64_t lanes_max_p = env_count("MEMLANE_CONV_PW_LANES_MAXP", kPwLanesMaxP);
  k->pointwise_lanes = k->pointwise && g.P() <= lanes_max_p && pw_lanes_fit(g.M, g.P()) && simd::have_avx512() &&
                       std::getenv("MEMLANE_CONV_PW_BLAS") == nullptr && std::getenv("MEMLANE_CONV_NO_PW_LANES") == nullptr;
  if (k->pointwise_lanes) k->pwl = simd::pw_lanes_pack(k->w, k->b, g.M, g.C);
  if (k->pointwise_lanes || k->pointwise_simd) {
    k->threads = std::max(1, bc.threads);
    // (A Concat whose inputs lie in place copied nothing: their writers' split holds.)
    const Op* before = producer(*bc.plan, op.inputs[0]);
    k->input_split_by_channels = before && ((before->type == OpType::kConcat && before->attrs.axis == 1 &&
                                             !concat_copies_nothing(*bc.plan, *before)) ||
                                            before->type == OpType::kMaxPool || before->type == OpType::kAveragePool);
  }
  // MEMLANE_CONV_NO_PADDED=1 forces the bounds-checked im2col (ctest runs the ops both ways).
  k->padded = !k->pointwise && g.sh == 1 && g.sw == 1 && std::getenv("MEMLANE_CONV_NO_PADDED") == nullptr;
  k->pb = a.pads[2];
  k->pr = a.pads[3];
  k->Hp = g.H + a.pads[0] + a.pads[2];
  k->Wp = g.W + a.pads[1] + a.pads[3];
  // MEMLANE_CONV_NO_DIRECT=1 keeps the im2col paths (ctest runs the ops that way too).
  // (1x1 convs stay on sgemm: without taps to reuse, the direct kernel is broadcast-bound.)
  // Grouped convs (RegNet, ResNeXt: 8-64 channels a group) run group by group on it too.
  // Ungrouped convs take it only with the taps it unrolls (3x3, 7x7 stride 2): with taps read
  // from a loop it ran at 1.3-2.1x ORT's time on single 5x5 and 7x7 stride-1 convs and at 1.9x
  // on a 2x2 stride-2 one, where the flat grid (stride 1) and the pixel rows (strided) run at
  // 1.0-1.2x (docs/native-cpu.md). MEMLANE_CONV_DIRECT_ANY_TAPS=1: the old rule (A/B timing).
  static const bool any_taps = std::getenv("MEMLANE_CONV_DIRECT_ANY_TAPS") != nullptr;
  const bool unrolled = (g.kh == 3 && g.kw == 3) || (g.kh == 7 && g.kw == 7 && g.sw == 2);
  k->direct = !k->pointwise && g.kh * g.kw > 1 && (g.group == 1 || g.Cg() >= 4) &&
              (g.group > 1 || unrolled || any_taps) && conv_direct_supported(g.OH, g.OW, g.sw) &&
              std::getenv("MEMLANE_CONV_NO_DIRECT") == nullptr && !(bc.conv_avoid & kAvoidDirect);
  // MEMLANE_CONV_NO_WINOGRAD=1 keeps such convs on the direct kernel (ctest runs both).
  // Maps of fewer than 64 Winograd tiles (14x14 and smaller) whose U (16 x C x M floats) is 1
  // MiB or more go to pixel rows instead, which reads W once a call; Winograd's 16 products
  // stream U for too few tiles. Per op, 1 thread, Intel Xeon: resnet18's 14x14 256 -> 256
  // convs 0.72-0.80x Winograd's time; squeezenet1_1's 13x13 64 -> 256 0.92-0.96x, its 48 -> 192
  // (U 0.56 MiB) 1.04-1.06x, so those stay. MEMLANE_CONV_WINOGRAD_SMALL_MAPS=1: Winograd keeps
  // them all (A/B timing).
  static const bool winograd_small_maps = std::getenv("MEMLANE_CONV_WINOGRAD_SMALL_MAPS") != nullptr;
  const bool few_tiles = ((g.OH + 1) / 2) * ((g.OW + 1) / 2) < 64 && g.C * g.M >= 16384 &&
                         g.M >= kPixelRowsMinChannels && simd::have_avx512();
  k->winograd = k->direct && g.group == 1 && g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 &&
                conv_winograd_supported(g.C, g.M, g.OH, g.OW) && std::getenv("MEMLANE_CONV_NO_WINOGRAD") == nullptr &&
                !(bc.conv_avoid & kAvoidWinograd) && (!few_tiles || winograd_small_maps);
  // Without AVX-512 (no direct kernel, no Winograd above) the same convs take the AVX2 Winograd
  // kernel (conv_winograd_avx2.h) where it fills its lanes; else the padded-grid sgemm below.
  // MEMLANE_CONV_NO_WINOGRAD=1 keeps them there too (ctest runs both).
  // Grouped convs too, group by group, where the channel-blocked grouped kernel above is off.
  k->wg = {g.Cg(), g.H, g.W, g.Mg(), g.OH, g.OW, g.pt, g.pl};
  k->winograd_avx2 = !k->winograd && !simd::have_avx512() && g.kh == 3 && g.kw == 3 && g.sh == 1 &&
                     g.sw == 1 && g.dh == 1 && g.dw == 1 && conv_winograd_avx2_supported(k->wg) &&
                     winograd_avx2_weights_fit(uint64_t(16 * g.M * g.Cg()) * sizeof(float)) &&
                     std::getenv("MEMLANE_CONV_NO_WINOGRAD") == nullptr && !(bc.conv_avoid & kAvoidWinograd);
  if (k->winograd_avx2) {
    k->padded = false;
    k->U.reserve(size_t(16 * g.M * g.Cg()));
    for (int64_t gi = 0; gi < g.group; ++gi) {  // [group][16][Mg][Cg]
      const std::vector<float> u = conv_winograd_weights(k->w + gi * g.Mg() * g.K(), g.Mg(), g.Cg());
      k->U.insert(k->U.end(), u.begin(), u.end());
    }
    k->threads = std::max(1, bc.threads);
  }
  // Without AVX-512, stride-1 convs on maps under kAvx2PaddedMinP pixels leave the padded grid
  // (OpenBLAS over OH x Wp columns: 9 for 7 on a 7x7 map) for im2col on the AVX2 kernel, which
  // runs big-K products blocked (conv_im2col.cc). MEMLANE_CONV_AVX2_PADDED_MINP=N moves the line
  // (A/B); ctest runs both paths (MEMLANE_CONV_NO_PADDED).
  static const int64_t avx2_padded_min_p = env_count("MEMLANE_CONV_AVX2_PADDED_MINP", kAvx2PaddedMinP);
  if (k->padded && !simd::have_avx512() && simd::have_avx2_gemm() && g.P() < avx2_padded_min_p) k->padded = false;
  // MEMLANE_CONV_NO_FLAT=1 keeps small stride-1 maps on the padded-grid sgemm (ctest runs both).
  k->flat = k->padded && !k->direct && g.group == 1 && g.kh * g.kw > 1 && g.kh * g.kw <= kConvFlatMaxTaps &&
            conv_flat_available() && std::getenv("MEMLANE_CONV_NO_FLAT") == nullptr && !(bc.conv_avoid & kAvoidFlat);
  // Pixel rows (conv_pixel_rows.cc): the strided convs no direct kernel unrolls, and every other
  // ungrouped conv with 64+ output channels, but Winograd's and those the direct kernel keeps:
  // 3x3 stride 1, and few taps (C x kh x kw < 64: 3-channel 3x3 stems, where a tile's store
  // costs as much as its 27 multiply-adds a channel: squeezenet1_1's 3 -> 64 stride-2 stem 1.26x
  // ORT on direct, 1.48x on pixel rows). At 32 or fewer output channels the 32-channel panels are
  // half idle or the pixels-in-lanes direct kernel fills its vectors better. Measured on single
  // convs and per op in whole models against the other paths and ORT, 1 thread: see
  // docs/native-cpu.md. MEMLANE_CONV_NO_PIXEL_ROWS=1 keeps the paths above (A/B; ctest runs both).
  // (3x3 stride 1 on maps of fewer than 64 Winograd tiles: pixel rows, above)
  const bool keep_direct =
      k->direct && ((g.sh == 1 && g.sw == 1 && g.kh == 3 && g.kw == 3 && !few_tiles) || g.K() < kPixelRowsMinTaps);
  // (taps are int32 offsets into one sample's padded input: far beyond any real conv's size)
  const bool taps_fit = g.C * k->Hp * k->Wp < int64_t(1) << 31;
  k->pixel_rows = !k->pointwise && g.group == 1 && !k->winograd && !keep_direct && taps_fit && simd::have_avx512() &&
                  (g.M >= kPixelRowsMinChannels || (!k->padded && !k->direct)) &&
                  std::getenv("MEMLANE_CONV_NO_PIXEL_ROWS") == nullptr && !(bc.conv_avoid & kAvoidPixelRows);
  if (k->pixel_rows) {
    k->padded = k->direct = k->flat = false;
    k->taps = pixel_rows_taps(g, k->Hp, k->Wp);
    k->panels = simd::shared_panels(bc.panels, k->w, g.K(), g.M, true);
  }
  if (k->winograd || k->flat || k->pixel_rows) k->threads = std::max(1, bc.threads);
  if (k->winograd) {
    // (odd maps: whole tiles read one more zero row / column than the pads give; the direct
    // fallback of a lone sample reads the same layout's first OH + 2 rows)
    k->Hp = conv_winograd_pad(g.OH);
    k->Wp = conv_winograd_pad(g.OW);
    k->U = conv_winograd_weights(k->w, g.M, g.C);
    k->threads = std::max(1, bc.threads);
  }
  // Fused residual Add (+ Relu): only the AVX-512 spatial paths, AVX2's Winograd and the SIMD pointwise ones
  // (RegNet's and ResNet-50's block ends, MobileNet's projections) have the epilogue. The backend has
  // checked that the conv's and the Add's outputs have no other reader and that `output`
  // neither overlaps X nor partly overlaps the residual (an identical region is fine: each
  // element is read before it is written).
  if (const ConvEpilogue* e = bc.epilogue; e && e->residual >= 0 &&
                                           (k->direct || k->winograd || k->winograd_avx2 || k->flat || k->pixel_rows || k->pointwise_lanes ||
                                            k->pointwise_simd) && !k->relu &&
                                           a.activation == Activation::kNone && fuse) {
    const TensorInfo& R = bc.info(e->residual);
    if (!R.is_weight() && R.shape == Y.shape) {
      k->res = bc.ref(e->residual);
      k->has_res = true;
      k->y = bc.ref(e->output);
      k->relu = e->relu;
      e->taken = true;
    }
  }
  return k;
}

}  // namespace memlane::cpu

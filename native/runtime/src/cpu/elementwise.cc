// Where (three-way broadcast), Not, Cast and Expand (a broadcasting copy; its input may be a
// weight, e.g. ViT's class token expanded over the batch), on any plan dtype.
#include <cstring>
#include <type_traits>

#include "cpu/broadcast.h"

namespace memlane::cpu {
namespace {

template <typename T>
class WhereKernel final : public Kernel {
 public:
  Broadcast bc;
  TensorRef cond, x, z, y;
  void run(const RunCtx& c) const override {
    const BroadcastLoop L = bc.resolve(c.batch);
    const uint8_t* C = cond.as<uint8_t>(c);
    const T* X = x.as<T>(c);
    const T* Z = z.as<T>(c);
    T* Y = y.as<T>(c);
    const int r = L.rank - 1;
    const int64_t sc = r >= 0 ? L.s[0][r] : 0, sx = r >= 0 ? L.s[1][r] : 0, sz = r >= 0 ? L.s[2][r] : 0;
    for_each_row(c, L, 3, [&](int64_t row, const int64_t* off, int64_t len) {
      const uint8_t* cr = C + off[0];
      const T *xr = X + off[1], *zr = Z + off[2];
      T* yr = Y + row * len;
      if (sc == 1 && sx == 0 && sz == 0) {  // a mask of two constants (BERT's attention mask): vectorises
        const T a = xr[0], b = zr[0];
        for (int64_t i = 0; i < len; ++i) yr[i] = cr[i] ? a : b;
        return;
      }
      for (int64_t i = 0; i < len; ++i) yr[i] = cr[i * sc] ? xr[i * sx] : zr[i * sz];
    });
  }
};

// Expand: y = x broadcast; elements copied as unsigned words of the dtype's size.
template <typename W>
class ExpandKernel final : public Kernel {
 public:
  Broadcast bc;
  TensorRef x, y;
  void run(const RunCtx& c) const override {
    const BroadcastLoop L = bc.resolve(c.batch);
    const W* X = x.as<W>(c);
    W* Y = y.as<W>(c);
    const int64_t sx = L.rank ? L.s[0][L.rank - 1] : 0;
    for_each_row(c, L, 1, [&](int64_t row, const int64_t* off, int64_t len) {
      W* yr = Y + row * len;
      const W* xr = X + off[0];
      if (sx == 1) std::memcpy(yr, xr, sizeof(W) * size_t(len));
      else
        for (int64_t i = 0; i < len; ++i) yr[i] = xr[0];
    });
  }
};

// Cast and Not: same element count, contiguous.
struct MapBase : Kernel {
  TensorRef x, y;
  int64_t per_sample = 0;
  bool logical_not = false;
};

template <typename From, typename To>
class MapKernel final : public MapBase {
 public:
  void run(const RunCtx& c) const override {
    const From* X = x.as<From>(c);
    To* Y = y.as<To>(c);
    const int64_t n = per_sample * c.batch;
    if (logical_not) {
      for (int64_t i = 0; i < n; ++i) Y[i] = To(!X[i]);
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<To, uint8_t>) Y[i] = X[i] != From(0);  // bool: any non-zero
      else Y[i] = To(X[i]);
    }
  }
};

template <typename From>
std::unique_ptr<MapBase> cast_from(DType to) {
  switch (to) {
    case DType::kFloat32: return std::make_unique<MapKernel<From, float>>();
    case DType::kInt64: return std::make_unique<MapKernel<From, int64_t>>();
    case DType::kInt32: return std::make_unique<MapKernel<From, int32_t>>();
    default: return std::make_unique<MapKernel<From, uint8_t>>();
  }
}

std::unique_ptr<MapBase> cast_kernel(DType from, DType to) {
  switch (from) {
    case DType::kFloat32: return cast_from<float>(to);
    case DType::kInt64: return cast_from<int64_t>(to);
    case DType::kInt32: return cast_from<int32_t>(to);
    default: return cast_from<uint8_t>(to);
  }
}

MapBase* set_map(MapBase* m, const BuildCtx& bc, const Op& op) {
  m->x = bc.ref(op.inputs[0]);
  m->y = bc.ref(op.outputs[0]);
  m->per_sample = bc.info(op.inputs[0]).elements();
  return m;
}

template <template <typename> class K>
std::unique_ptr<Kernel> by_size(DType t) {
  switch (dtype_size(t)) {
    case 8: return std::make_unique<K<uint64_t>>();
    case 4: return std::make_unique<K<uint32_t>>();
    default: return std::make_unique<K<uint8_t>>();
  }
}

}  // namespace

std::unique_ptr<Kernel> make_elementwise(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  const TensorInfo& Y = bc.info(op.outputs[0]);
  std::string why;
  switch (op.type) {
    case OpType::kWhere: {
      if (!need_inputs(op, 3, 3, st, msg)) return nullptr;
      const DType t = bc.info(op.inputs[1]).dtype;
      if (bc.info(op.inputs[0]).dtype != DType::kBool || bc.info(op.inputs[2]).dtype != t || Y.dtype != t)
        return unsupported(op, "needs a bool condition and x, y, output of one dtype", st, msg);
      std::unique_ptr<Kernel> k;
      auto fill = [&](auto* w) {
        if (!w->bc.init(Y, {&bc.info(op.inputs[0]), &bc.info(op.inputs[1]), &bc.info(op.inputs[2])}, &why)) return false;
        w->cond = bc.ref(op.inputs[0]);
        w->x = bc.ref(op.inputs[1]);
        w->z = bc.ref(op.inputs[2]);
        w->y = bc.ref(op.outputs[0]);
        return true;
      };
      bool ok;
      switch (t) {
        case DType::kFloat32: { auto w = std::make_unique<WhereKernel<float>>(); ok = fill(w.get()); k = std::move(w); break; }
        case DType::kInt64: { auto w = std::make_unique<WhereKernel<int64_t>>(); ok = fill(w.get()); k = std::move(w); break; }
        case DType::kInt32: { auto w = std::make_unique<WhereKernel<int32_t>>(); ok = fill(w.get()); k = std::move(w); break; }
        default: { auto w = std::make_unique<WhereKernel<uint8_t>>(); ok = fill(w.get()); k = std::move(w); break; }
      }
      if (!ok) return unsupported(op, why, st, msg);
      return k;
    }
    case OpType::kExpand: {
      if (!need_inputs(op, 1, 1, st, msg)) return nullptr;
      const TensorInfo& X = bc.info(op.inputs[0]);
      if (X.dtype != Y.dtype) return unsupported(op, "input and output differ in dtype", st, msg);
      std::unique_ptr<Kernel> k = by_size<ExpandKernel>(X.dtype);
      bool ok = false;
      auto fill = [&](auto* e) {
        ok = e->bc.init(Y, {&X}, &why);
        e->x = bc.ref(op.inputs[0]);
        e->y = bc.ref(op.outputs[0]);
      };
      switch (dtype_size(X.dtype)) {
        case 8: fill(static_cast<ExpandKernel<uint64_t>*>(k.get())); break;
        case 4: fill(static_cast<ExpandKernel<uint32_t>*>(k.get())); break;
        default: fill(static_cast<ExpandKernel<uint8_t>*>(k.get())); break;
      }
      if (!ok) return unsupported(op, why, st, msg);
      return k;
    }
    case OpType::kNot:
    case OpType::kCast: {
      if (!need_inputs(op, 1, 1, st, msg)) return nullptr;
      const TensorInfo& X = bc.info(op.inputs[0]);
      if (X.is_weight() || X.elements() != Y.elements()) return unsupported(op, "needs an activation of the output's size", st, msg);
      if (op.type == OpType::kNot) {
        if (X.dtype != DType::kBool || Y.dtype != DType::kBool) return unsupported(op, "Not takes and gives bool", st, msg);
        auto k = std::make_unique<MapKernel<uint8_t, uint8_t>>();
        set_map(k.get(), bc, op)->logical_not = true;
        return k;
      }
      if (Y.dtype != op.attrs.to) return unsupported(op, "output dtype differs from `to`", st, msg);
      std::unique_ptr<MapBase> k = cast_kernel(X.dtype, Y.dtype);
      set_map(k.get(), bc, op);
      return k;
    }
    default:
      return unsupported(op, "not an element-wise op", st, msg);
  }
}

}  // namespace memlane::cpu

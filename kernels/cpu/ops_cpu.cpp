// CPU implementations of every op, so that machines without a GPU build, load and test the
// whole API through `kernels`. Same formulas as the CUDA kernels, fp32 accumulation, rows
// spread over threads with at::parallel_for.
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "../ltx_kernels.h"

namespace ltx {
namespace {

int64_t row_offset(const RowMap& m, int64_t r) {
  if (m.inner == 1) return r * m.outer_stride;
  return (r / m.inner) * m.outer_stride + (r % m.inner) * m.inner_stride;
}

float gelu_tanh_f(float x) {
  const float k0 = 0.7978845608028654f;
  const float k1 = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(k0 * (x + k1 * x * x * x)));
}

// Rows per parallel_for task: about 32k elements of work each.
int64_t grain(int64_t width) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(width, 1)); }

template <typename T>
void norm_rows(const NormParams& p) {
  const int64_t h = p.hidden;
  const T* w = static_cast<const T*>(p.weight);
  at::parallel_for(0, p.rows, grain(h), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* x = static_cast<const T*>(p.x.ptr) + row_offset(p.x, r);
      T* out = static_cast<T*>(p.out) + r * h;
      // Statistics in double: a float running sum over a long row (20000 elements around an
      // offset of 3) drifts by more than fp32's tolerance against the float64 reference.
      double mean_d = 0.0;
      double acc = 0.0;
      if (p.kind == NormKind::AdaLnLayer) {
        for (int64_t i = 0; i < h; ++i) mean_d += static_cast<double>(x[i]);
        mean_d /= static_cast<double>(h);
        for (int64_t i = 0; i < h; ++i) {
          const double d = static_cast<double>(x[i]) - mean_d;
          acc += d * d;
        }
      } else {
        for (int64_t i = 0; i < h; ++i) {
          const double f = static_cast<double>(x[i]);
          acc += f * f;
        }
      }
      const float mean = static_cast<float>(mean_d);
      const float rstd = static_cast<float>(1.0 / std::sqrt(acc / static_cast<double>(h) + p.eps));
      const T* a = nullptr;
      const T* b = nullptr;
      if (p.kind == NormKind::GatedResidual) {
        a = static_cast<const T*>(p.residual.ptr) + row_offset(p.residual, r);
        b = static_cast<const T*>(p.gate.ptr) + row_offset(p.gate, r);
      } else if (p.kind != NormKind::Rms) {
        a = static_cast<const T*>(p.scale.ptr) + row_offset(p.scale, r);
        b = static_cast<const T*>(p.shift.ptr) + row_offset(p.shift, r);
      }
      for (int64_t i = 0; i < h; ++i) {
        float y = (static_cast<float>(x[i]) - mean) * rstd;
        if (w != nullptr) y *= static_cast<float>(w[i]);
        switch (p.kind) {
          case NormKind::Rms:
            break;
          case NormKind::GatedResidual:
            y = static_cast<float>(a[i]) + std::tanh(static_cast<float>(b[i])) * y;
            break;
          case NormKind::AdaLnRms:
          case NormKind::AdaLnLayer:
            y = y * (1.0f + static_cast<float>(a[i])) + static_cast<float>(b[i]);
            break;
        }
        out[i] = static_cast<T>(y);
      }
    }
  });
}

template <typename T, typename C>
void rope_rows(const RopeParams& p) {
  const int64_t rows = p.batch * p.seq;
  at::parallel_for(0, rows, grain(p.width), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t b = r / p.seq;
      const int64_t s = r % p.seq;
      const T* x = static_cast<const T*>(p.x) + b * p.x_batch_stride + s * p.x_seq_stride;
      T* out = static_cast<T*>(p.out) + r * p.width;
      const int64_t toff = ((p.table_batch == 1 ? 0 : b) * p.seq + s) * p.table_width;
      const C* c = static_cast<const C*>(p.cos) + toff;
      const C* sn = static_cast<const C*>(p.sin) + toff;
      for (int64_t col = 0; col < p.width; col += 2) {
        const int64_t t = col % p.table_width;
        const float x0 = static_cast<float>(x[col]);
        const float x1 = static_cast<float>(x[col + 1]);
        out[col] = static_cast<T>(x0 * static_cast<float>(c[t]) - x1 * static_cast<float>(sn[t]));
        out[col + 1] =
            static_cast<T>(x1 * static_cast<float>(c[t + 1]) + x0 * static_cast<float>(sn[t + 1]));
      }
    }
  });
}

template <typename T>
void activation_rows(const ActParams& p) {
  const int64_t d = p.width;
  if (p.kind == ActKind::GeluTanh && p.rows == 1) {
    // The binding passes gelu_tanh a flat range: split it by elements.
    const T* x = static_cast<const T*>(p.x.ptr);
    T* out = static_cast<T*>(p.out);
    at::parallel_for(0, d, 32768, [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) out[j] = static_cast<T>(gelu_tanh_f(static_cast<float>(x[j])));
    });
    return;
  }
  at::parallel_for(0, p.rows, grain(d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* x = static_cast<const T*>(p.x.ptr) + row_offset(p.x, r);
      T* out = static_cast<T*>(p.out) + r * d;
      if (p.kind == ActKind::Geglu) {
        for (int64_t j = 0; j < d; ++j) {
          out[j] = static_cast<T>(static_cast<float>(x[j]) * gelu_tanh_f(static_cast<float>(x[d + j])));
        }
      } else {
        for (int64_t j = 0; j < d; ++j) out[j] = static_cast<T>(gelu_tanh_f(static_cast<float>(x[j])));
      }
    }
  });
}

// Rounds f to T and back, as a separate op writing T would.
template <typename T>
float round_to(float f) {
  return static_cast<float>(static_cast<T>(f));
}

// Grid mode (QkNormRopeParams): cos/sin of the pair at channel ch (even) of token s, from the
// token's position; the angle is the one fp32 product torch computes.
void grid_cos_sin(const QkNormRopeParams& p, int64_t s, int64_t ch, float& c, float& sn) {
  const int64_t pad = p.width % 6;
  if (ch < pad) {
    c = 1.0f;
    sn = 0.0f;
    return;
  }
  const int64_t hw = p.grid_h * p.grid_w;
  const int64_t pair = (ch - pad) / 2;
  const int64_t axis = pair % 3;
  const float coord = axis == 0   ? p.axis_f[s / hw]
                      : axis == 1 ? p.axis_h[s % hw / p.grid_w]
                                  : p.axis_w[s % p.grid_w];
  const float angle = p.freqs[pair / 3] * coord;
  c = std::cos(angle);
  sn = std::sin(angle);
}

template <typename T, typename C>
void qk_norm_rope_rows(const QkNormRopeParams& p) {
  const bool grid = p.cos == nullptr;
  const int64_t w = p.width;
  // Task = (tensor, batch entry, token).
  at::parallel_for(0, 2 * p.batch * p.seq, grain(w), [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const bool is_k = task / (p.batch * p.seq) == 1;
      const int64_t r = task % (p.batch * p.seq);
      const int64_t b = r / p.seq;
      const int64_t s = r % p.seq;
      const T* x = is_k ? static_cast<const T*>(p.k) + b * p.k_batch_stride + s * p.k_seq_stride
                        : static_cast<const T*>(p.q) + b * p.q_batch_stride + s * p.q_seq_stride;
      const T* wt = static_cast<const T*>(is_k ? p.k_weight : p.q_weight);
      T* out = static_cast<T*>(is_k ? p.k_out : p.q_out) + r * w;
      const int64_t toff = ((p.table_batch == 1 ? 0 : b) * p.seq + s) * w;
      const C* c = grid ? nullptr : static_cast<const C*>(p.cos) + toff;
      const C* sn = grid ? nullptr : static_cast<const C*>(p.sin) + toff;
      float acc = 0.0f;
      for (int64_t i = 0; i < w; ++i) acc += static_cast<float>(x[i]) * static_cast<float>(x[i]);
      const float rstd = 1.0f / std::sqrt(acc / static_cast<float>(w) + p.eps);
      for (int64_t i = 0; i < w; i += 2) {
        float n0 = static_cast<float>(x[i]) * rstd;
        float n1 = static_cast<float>(x[i + 1]) * rstd;
        if (wt != nullptr) {
          n0 *= static_cast<float>(wt[i]);
          n1 *= static_cast<float>(wt[i + 1]);
        }
        n0 = round_to<T>(n0);
        n1 = round_to<T>(n1);
        float c0, c1, s0, s1;
        if (grid) {
          grid_cos_sin(p, s, i, c0, s0);
          c1 = c0;
          s1 = s0;
        } else {
          c0 = static_cast<float>(c[i]);
          c1 = static_cast<float>(c[i + 1]);
          s0 = static_cast<float>(sn[i]);
          s1 = static_cast<float>(sn[i + 1]);
        }
        out[i] = static_cast<T>(n0 * c0 - n1 * s0);
        out[i + 1] = static_cast<T>(n1 * c1 + n0 * s1);
      }
    }
  });
}

// ---- FP8 (e4m3) row quantization (QuantParams in ltx_kernels.h) ----------------------------
// max(m, |a|) where a NaN wins, as torch's amax propagates it.
float amax_step(float m, float a) {
  a = std::fabs(a);
  return (a > m || std::isnan(a)) ? a : m;
}

float fp8_scale(float amax) { return (amax < kFp8MinAmax ? kFp8MinAmax : amax) * kE4m3InvMax; }

// v[0..n) quantized with one scale: the scale, and the e4m3 bits into out.
template <typename F>
float quantize_row(int64_t n, F&& v, uint8_t* out) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = amax_step(amax, v(i));
  const float scale = fp8_scale(amax);
  const float inv = 1.0f / scale;
  for (int64_t i = 0; i < n; ++i) out[i] = c10::Float8_e4m3fn(v(i) * inv).x;
  return scale;
}

template <typename T>
void quantize_rows(const QuantParams& p) {
  const int64_t h = p.hidden;
  at::parallel_for(0, p.rows, grain(h), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* x = static_cast<const T*>(p.x.ptr) + row_offset(p.x, r);
      auto value = [&](int64_t i) {
        const float f = static_cast<float>(x[i]);
        return p.gelu ? round_to<T>(gelu_tanh_f(f)) : f;
      };
      p.scale[r] = quantize_row(h, value, p.values + r * h);
    }
  });
}

template <typename T>
void residual_rows(const ResidualParams& p) {
  const int64_t h = p.hidden;
  const T* wt = static_cast<const T*>(p.weight);
  at::parallel_for(0, p.rows, grain(h), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* x = static_cast<const T*>(p.h.ptr) + row_offset(p.h, r);
      const T* y = static_cast<const T*>(p.y.ptr) + row_offset(p.y, r);
      const T* g = p.gate.ptr != nullptr ? static_cast<const T*>(p.gate.ptr) + row_offset(p.gate, r) : nullptr;
      T* hout = static_cast<T*>(p.h_out) + r * h;
      float acc = 0.0f;
      for (int64_t i = 0; i < h; ++i) {
        const float yv = static_cast<float>(y[i]);
        const float v = round_to<T>(static_cast<float>(x[i]) + (g != nullptr ? yv * static_cast<float>(g[i]) : yv));
        hout[i] = static_cast<T>(v);
        acc += v * v;
      }
      if (p.kind != ResidualKind::AdaLn) continue;
      const float rstd = 1.0f / std::sqrt(acc / static_cast<float>(h) + p.eps);
      const T* sc = static_cast<const T*>(p.scale.ptr) + row_offset(p.scale, r);
      const T* sh = static_cast<const T*>(p.shift.ptr) + row_offset(p.shift, r);
      auto norm_at = [&](int64_t i) {
        float n = static_cast<float>(hout[i]) * rstd;
        if (wt != nullptr) n *= static_cast<float>(wt[i]);
        return static_cast<T>(n * (1.0f + static_cast<float>(sc[i])) + static_cast<float>(sh[i]));
      };
      if (p.norm_fp8 != nullptr) {
        auto value = [&](int64_t i) { return static_cast<float>(norm_at(i)); };
        p.norm_fp8_scale[r] = quantize_row(h, value, p.norm_fp8 + r * h);
        continue;
      }
      T* nout = static_cast<T*>(p.norm_out) + r * h;
      for (int64_t i = 0; i < h; ++i) nout[i] = norm_at(i);
    }
  });
}

// Runs f with a value of the element type; `op`'s unsupported-dtype error for a dtype without one.
template <typename F>
Status dispatch(Dtype dtype, const char* op, F&& f) {
  switch (dtype) {
    case Dtype::Float32:
      f(float{});
      return {};
    case Dtype::Float16:
      f(c10::Half{});
      return {};
    case Dtype::BFloat16:
      f(c10::BFloat16{});
      return {};
  }
  return unsupported_dtype(op, dtype);
}

}  // namespace

Status launch_norm(const NormParams& p) {
  if (p.rows == 0 || p.hidden == 0) return {};
  return dispatch(p.dtype, "norm", [&](auto tag) { norm_rows<decltype(tag)>(p); });
}

Status launch_rope(const RopeParams& p) {
  if (p.batch == 0 || p.seq == 0 || p.width == 0) return {};
  const bool fp32_table = p.table_dtype == Dtype::Float32;
  if (!fp32_table && p.table_dtype != p.dtype) {
    return fail("ltx_kernels.rope_3d: cos/sin must be float32 or the dtype of x");
  }
  return dispatch(p.dtype, "rope_3d", [&](auto tag) {
    using T = decltype(tag);
    if (fp32_table) {
      rope_rows<T, float>(p);
    } else {
      rope_rows<T, T>(p);
    }
  });
}

Status launch_activation(const ActParams& p) {
  if (p.rows == 0 || p.width == 0) return {};
  return dispatch(p.dtype, p.kind == ActKind::Geglu ? "geglu" : "gelu_tanh",
                  [&](auto tag) { activation_rows<decltype(tag)>(p); });
}

Status launch_qk_norm_rope(const QkNormRopeParams& p) {
  if (p.batch == 0 || p.seq == 0 || p.width == 0) return {};
  // Grid mode reads no table: any table type instantiates it.
  const bool fp32_table = p.table_dtype == Dtype::Float32 || p.cos == nullptr;
  return dispatch(p.dtype, "qk_norm_rope", [&](auto tag) {
    using T = decltype(tag);
    if (fp32_table) {
      qk_norm_rope_rows<T, float>(p);
    } else {
      qk_norm_rope_rows<T, T>(p);
    }
  });
}

Status launch_residual(const ResidualParams& p) {
  if (p.rows == 0 || p.hidden == 0) return {};
  return dispatch(p.dtype, p.kind == ResidualKind::AdaLn ? "residual_adaln" : "gated_residual",
                  [&](auto tag) { residual_rows<decltype(tag)>(p); });
}

Status launch_quantize(const QuantParams& p) {
  if (p.rows == 0 || p.hidden == 0) return {};
  return dispatch(p.dtype, p.gelu ? "gelu_quantize_fp8" : "quantize_fp8",
                  [&](auto tag) { quantize_rows<decltype(tag)>(p); });
}

}  // namespace ltx

// AdaLN over rows: norm (RMS or LayerNorm statistics) then x * (1 + scale) + shift, through the
// shared row-normalisation template (norm_kernels.cuh). launch_norm (norm.cu) calls it.
#include "norm_kernels.cuh"

namespace ltx {

Status launch_adaln(const NormParams& p) {
  return launch_norm_family<NormKind::AdaLnRms, NormKind::AdaLnLayer>(p);
}

}  // namespace ltx

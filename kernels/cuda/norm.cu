// RMSNorm and Mochi's gated residual RMSNorm; AdaLN's kernels are compiled in adaln.cu (the
// shared template is in norm_kernels.cuh).
#include "norm_kernels.cuh"

namespace ltx {

Status launch_norm(const NormParams& p) {
  switch (p.kind) {
    case NormKind::AdaLnRms:
    case NormKind::AdaLnLayer:
      return launch_adaln(p);
    default:
      return launch_norm_family<NormKind::Rms, NormKind::GatedResidual>(p);
  }
}

}  // namespace ltx

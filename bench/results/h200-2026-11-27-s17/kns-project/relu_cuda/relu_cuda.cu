#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

namespace {

__global__ void relu_kernel(float *out, const float *in, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] > 0.f ? in[i] : 0.f;
}

void relu(at::Tensor &out, at::Tensor const &input) {
  TORCH_CHECK(input.is_cuda() && input.scalar_type() == at::kFloat, "relu: float32 cuda");
  int64_t n = input.numel();
  auto stream = c10::cuda::getCurrentCUDAStream();
  relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(out.data_ptr<float>(), input.data_ptr<float>(), n);
}

} // namespace

// The op namespace reaches this unit as `KERNEL_NS` (a cuda-flags define), never spelled here.
TORCH_LIBRARY_IMPL(KERNEL_NS, CUDA, m) { m.impl("relu", &relu); }

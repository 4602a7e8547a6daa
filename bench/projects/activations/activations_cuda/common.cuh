// Shared by relu.cu and silu.cu: the checks every op makes and the launch shape.
#pragma once

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/all.h>

namespace activations {

inline void check_pair(torch::Tensor const &out, torch::Tensor const &input) {
  TORCH_CHECK(input.device().is_cuda(), "input must be a CUDA tensor");
  TORCH_CHECK(input.is_contiguous() && out.is_contiguous(),
              "tensors must be contiguous");
  TORCH_CHECK(input.sizes() == out.sizes(), "shape mismatch: input ",
              input.sizes(), ", output ", out.sizes());
  TORCH_CHECK(input.scalar_type() == out.scalar_type(), "dtype mismatch: input ",
              input.scalar_type(), ", output ", out.scalar_type());
}

// One block per row of the last dimension, at most 1024 threads.
struct Launch {
  dim3 grid;
  dim3 block;
  int64_t d;
};

inline Launch launch_for(torch::Tensor const &input) {
  int64_t d = input.size(-1);
  int64_t rows = input.numel() / (d == 0 ? 1 : d);
  return {dim3(rows), dim3(std::min<int64_t>(d, 1024)), d};
}

}  // namespace activations

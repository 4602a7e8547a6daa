#include "common.cuh"

template <typename T>
__global__ void relu_kernel(T *__restrict__ out, T const *__restrict__ input,
                            int64_t d) {
  const int64_t row = blockIdx.x;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float x = static_cast<float>(input[row * d + i]);
    out[row * d + i] = static_cast<T>(x > 0.0f ? x : 0.0f);
  }
}

void relu(torch::Tensor &out, torch::Tensor const &input) {
  activations::check_pair(out, input);
  const at::cuda::OptionalCUDAGuard guard(device_of(input));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  auto launch = activations::launch_for(input);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, input.scalar_type(),
      "relu_kernel", [&] {
        relu_kernel<scalar_t><<<launch.grid, launch.block, 0, stream>>>(
            out.data_ptr<scalar_t>(), input.data_ptr<scalar_t>(), launch.d);
      });
}

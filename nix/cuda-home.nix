# One directory laid out like a CUDA install (bin/nvcc, include/, lib/libcudart.so.<major>), which
# is where kbuild looks for nvcc's headers and cudart: nixpkgs splits them across packages.
{
  lib,
  symlinkJoin,
  cudaPackages,
}:

symlinkJoin {
  name = "cuda-home-${cudaPackages.cudaMajorMinorVersion}";
  paths = lib.concatMap (p: p.all) [
    cudaPackages.cuda_nvcc
    cudaPackages.cuda_cudart
    cudaPackages.cuda_cccl
  ];
}

# `nix develop`: kbuild plus the toolchain `kbuild build` discovers on its own, from nixpkgs. The
# caller imports nixpkgs with `cudaSupport`, so python3.pkgs.torch is the CUDA build.
{
  lib,
  callPackage,
  mkShell,
  python3,
  cargo,
  rustc,
  clippy,
  rustfmt,
  kbuild,
  hub-server,
}:

let
  torch = python3.pkgs.torch;
  cudaPackages = torch.cudaPackages;
  cudaHome = callPackage ./cuda-home.nix { inherit cudaPackages; };
  # `kernels` loads what kbuild builds; pytest, numpy and diffusers run the flagship's tests.
  python = python3.withPackages (ps: [
    ps.torch
    ps.kernels
    ps.numpy
    ps.pytest
    ps.diffusers
  ]);
in

assert lib.assertMsg torch.cudaSupport "nix/shell.nix: import nixpkgs with config.cudaSupport = true";

mkShell.override { stdenv = cudaPackages.backendStdenv; } {
  packages = [
    kbuild
    hub-server
    python
    cargo
    rustc
    clippy
    rustfmt
    cudaHome
  ];

  # kbuild's discovery order puts CUDA_HOME before PATH, so a system CUDA on the host is not
  # picked up instead of torch's.
  shellHook = ''
    export CUDA_HOME=${cudaHome}
    export KBUILD_PYTHON=${python}/bin/python
  '';
}

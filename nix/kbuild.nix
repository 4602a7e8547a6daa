# kbuild itself, built from the workspace's Cargo.lock (every crate is vendored from it, so the
# build needs no network).
{ lib, rustPlatform }:

let
  manifest = lib.importTOML ../Cargo.toml;
in
rustPlatform.buildRustPackage {
  pname = "kbuild";
  inherit (manifest.package) version;

  # Only what cargo reads: the workspace (hub-server is a member, so cargo needs its manifest and
  # sources even to build kbuild alone) and the templates kbuild embeds with `include_str!`.
  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions [
      ../Cargo.toml
      ../Cargo.lock
      ../src
      ../templates
      ../devtools/hub-server
    ];
  };

  cargoLock.lockFile = ../Cargo.lock;
  cargoBuildFlags = [
    "--bin"
    "kbuild"
  ];

  # The test suite drives a real torch, nvcc and Python `kernels` and a loopback Hub server;
  # `scripts/test` runs it with the pinned PyPI toolchain.
  doCheck = false;

  meta = {
    description = manifest.package.description;
    homepage = "https://huggingface.co/docs/kernels";
    license = lib.licenses.asl20;
    mainProgram = "kbuild";
    platforms = lib.platforms.linux;
  };
}

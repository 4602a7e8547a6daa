# The loopback Hub server kbuild's publish tests run against, for trying `kbuild publish` locally
# (`HF_ENDPOINT=http://127.0.0.1:PORT`).
{ lib, rustPlatform }:

let
  manifest = lib.importTOML ../devtools/hub-server/Cargo.toml;
in
rustPlatform.buildRustPackage {
  pname = manifest.package.name;
  inherit (manifest.package) version;

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
    "--package"
    manifest.package.name
  ];
  # Its tests bind loopback ports; they run in `scripts/test` with the rest of the workspace.
  doCheck = false;

  meta = {
    inherit (manifest.package) description;
    license = lib.licenses.asl20;
    mainProgram = "kbuild-hub-server";
    platforms = lib.platforms.linux;
  };
}

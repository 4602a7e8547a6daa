# The package set: nixpkgs' attribute names and calling conventions, with the checks nixpkgs
# itself makes during evaluation (unfree CUDA needs allowUnfree, callPackage needs every argument,
# importCargoLock needs a hash per git dependency). Packages are `builtins.derivation`s whose
# builder fails: they exist to be instantiated, never built.
{ system, config }:

let
  lib = import ./lib.nix;
  allowUnfree = config.allowUnfree or false;
  cudaSupport = config.cudaSupport or false;

  # Attribute values a derivation cannot hold (functions, plain attribute sets) are dropped; the
  # rest become the builder's environment, so every string the flake builds is forced.
  toEnv = attrs: builtins.removeAttrs attrs (
    builtins.filter (
      n:
      let
        v = attrs.${n};
      in
      builtins.isFunction v || (builtins.isAttrs v && !(v ? outPath))
    ) (builtins.attrNames attrs)
  );

  mkDrv =
    {
      name,
      outputs ? [ "out" ],
      passthru ? { },
      meta ? { },
      ...
    }@args:
    let
      drv = derivation (
        toEnv (builtins.removeAttrs args [ "passthru" "meta" ])
        // {
          inherit name system outputs;
          builder = "/bin/sh";
          args = [
            "-c"
            "echo 'nix/stubs/nixpkgs: evaluation-only stand-in, not buildable' >&2; exit 1"
          ];
        }
      );
    in
    drv // passthru // { inherit meta; };

  mkStdenv = ccName: {
    cc = mkDrv { name = ccName; };
    mkDerivation =
      {
        pname,
        version,
        ...
      }@args:
      mkDrv (args // { name = "${pname}-${version}"; stdenvCc = ccName; });
  };
  stdenv = mkStdenv "gcc-wrapper-stub";

  unfreeCuda =
    name: outputs:
    if allowUnfree then
      mkDrv {
        inherit name outputs;
        meta.license = lib.licenses.unfree;
      }
    else
      throw "Package ‘${name}’ in nix/stubs/nixpkgs has an unfree license (‘CUDA EULA’), refusing to evaluate; set config.allowUnfree";

  cudaPackages = {
    cudaMajorMinorVersion = "12.9";
    cudaMajorVersion = "12";
    backendStdenv = mkStdenv "gcc-wrapper-for-nvcc-stub";
    cuda_nvcc = unfreeCuda "cuda_nvcc-12.9-stub" [ "out" "bin" "dev" ];
    cuda_cudart = unfreeCuda "cuda_cudart-12.9-stub" [ "out" "dev" "lib" "static" "stubs" ];
    cuda_cccl = unfreeCuda "cuda_cccl-12.9-stub" [ "out" "dev" ];
  };

  python3Packages =
    let
      py = name: mkDrv { name = "python3-${name}-stub"; };
    in
    {
      torch = mkDrv {
        name = "python3-torch-stub";
        # nixpkgs' torch with cudaSupport needs CUDA, so it inherits the unfree check.
        cudaInputs = lib.optionals cudaSupport [
          cudaPackages.cuda_nvcc
          cudaPackages.cuda_cudart
        ];
        passthru = { inherit cudaSupport cudaPackages; };
      };
      numpy = py "numpy";
      pytest = py "pytest";
      kernels = py "kernels";
      diffusers = py "diffusers";
      huggingface-hub = py "huggingface-hub";
    };

  python3 = mkDrv {
    name = "python3-stub";
    passthru = {
      pkgs = python3Packages;
      withPackages =
        select:
        mkDrv {
          name = "python3-env-stub";
          paths = select python3Packages;
        };
    };
  };

  # nixpkgs' importCargoLock: a git dependency without `outputHashes` fails evaluation. Cargo
  # itself would later reject a `--bin` or `--package` the workspace does not have; the stub
  # checks that here from the manifests in `src`.
  buildRustPackage =
    {
      pname,
      version,
      src,
      cargoLock,
      cargoBuildFlags ? [ ],
      ...
    }@args:
    let
      lock = lib.importTOML cargoLock.lockFile;
      gitPackages = builtins.filter (p: lib.hasPrefix "git+" (p.source or "")) lock.package;
      missingHashes = builtins.filter (
        p: !((cargoLock.outputHashes or { }) ? "${p.name}-${p.version}")
      ) gitPackages;
      root = lib.importTOML "${src}/Cargo.toml";
      members = map (m: if m == "." then root else lib.importTOML "${src}/${m}/Cargo.toml") (
        root.workspace.members or [ "." ]
      );
      bins = lib.concatMap (m: map (b: b.name) (m.bin or [ ])) members;
      packages = map (m: m.package.name) members;
      flagValue =
        flag:
        let
          indexOf =
            i:
            if i >= builtins.length cargoBuildFlags then
              null
            else if builtins.elemAt cargoBuildFlags i == flag then
              i
            else
              indexOf (i + 1);
          idx = indexOf 0;
        in
        if idx == null then null else builtins.elemAt cargoBuildFlags (idx + 1);
      bin = flagValue "--bin";
      package = flagValue "--package";
    in
    if missingHashes != [ ] then
      throw "buildRustPackage ${pname}: no outputHashes for git dependency ${(builtins.head missingHashes).name}"
    else if bin != null && !(builtins.elem bin bins) then
      throw "buildRustPackage ${pname}: cargoBuildFlags --bin ${bin}, but the workspace's bins are ${toString bins}"
    else if package != null && !(builtins.elem package packages) then
      throw "buildRustPackage ${pname}: cargoBuildFlags --package ${package}, but the workspace's packages are ${toString packages}"
    else
      stdenv.mkDerivation (
        builtins.removeAttrs args [ "cargoLock" ]
        // {
          cargoLockHash = builtins.hashFile "sha256" cargoLock.lockFile;
        }
      );

  mkShellWith =
    shellStdenv:
    {
      packages ? [ ],
      ...
    }@args:
    mkDrv (
      builtins.removeAttrs args [ "packages" ]
      // {
        name = args.name or "nix-shell";
        nativeBuildInputs = packages;
        stdenvCc = shellStdenv.cc;
      }
    );

  pkgs = {
    inherit
      lib
      stdenv
      cudaPackages
      python3
      python3Packages
      callPackage
      ;
    rustPlatform = { inherit buildRustPackage; };
    mkShell = {
      __functor = _: mkShellWith stdenv;
      override = { stdenv }: mkShellWith stdenv;
    };
    symlinkJoin =
      { name, paths, ... }@args:
      mkDrv (args // { inherit paths; });
    runCommand =
      name: env: buildCommand:
      mkDrv (env // { inherit name buildCommand; });
    writeShellApplication =
      {
        name,
        text,
        runtimeInputs ? [ ],
        ...
      }:
      mkDrv { inherit name text runtimeInputs; };
    coreutils = mkDrv { name = "coreutils-stub"; };
    cargo = mkDrv { name = "cargo-stub"; };
    rustc = mkDrv { name = "rustc-stub"; };
    clippy = mkDrv { name = "clippy-stub"; };
    rustfmt = mkDrv { name = "rustfmt-stub"; };
  };

  # nixpkgs' callPackage: arguments come from the package set, then `overrides`; one that is in
  # neither and has no default is an evaluation error naming it.
  callPackage =
    fn: overrides:
    let
      f = if builtins.isFunction fn then fn else import fn;
      wanted = builtins.functionArgs f;
      given = builtins.intersectAttrs wanted pkgs // overrides;
      missing = builtins.filter (n: !wanted.${n} && !(given ? ${n})) (builtins.attrNames wanted);
    in
    if missing != [ ] then
      throw "callPackage ${toString fn}: function called without required argument \"${builtins.head missing}\""
    else
      f given;
in
pkgs

# The flagship ltx_kernels built by kbuild inside the Nix sandbox, for one backend: torch, nvcc and
# the host compiler all come from nixpkgs, the build runs at a fixed path with no network, so two
# builds of one commit give the same bytes. `$out/<variant>/` is a Hub variant as `kbuild build`
# writes it; `$out/nix-support/` keeps kbuild's JSON reports.
{
  lib,
  stdenv,
  python3,
  callPackage,
  kbuild,
  backend,
  # Op namespace suffix; null lets kbuild hash the sources (the sandbox has no git).
  uniqueId ? null,
}:

assert lib.assertOneOf "backend" backend [
  "cpu"
  "cuda"
];

let
  isCuda = backend == "cuda";
  torch = python3.pkgs.torch;
  # Taking CUDA from torch keeps nvcc on the CUDA major and minor torch was built with, which
  # kbuild requires (and warns about when only the minor differs).
  cudaPackages = torch.cudaPackages;
  python = python3.withPackages (ps: [ ps.torch ]);

  cudaHome = callPackage ./cuda-home.nix { inherit cudaPackages; };

  toolchainFlags = [
    "--python"
    "${python}/bin/python"
  ]
  ++ lib.optionals isCuda [
    "--nvcc"
    "${cudaHome}/bin/nvcc"
  ];
  buildFlags =
    toolchainFlags
    ++ [
      "--backend"
      backend
    ]
    ++ lib.optionals (uniqueId != null) [
      "--unique-id"
      uniqueId
    ];

  # nvcc only accepts host compilers it was validated against; backendStdenv carries one.
  effectiveStdenv = if isCuda then cudaPackages.backendStdenv else stdenv;
in

assert lib.assertMsg (torch.cudaSupport == isCuda) (
  "ltx-kernels-${backend}: python3.pkgs.torch has cudaSupport = ${lib.boolToString torch.cudaSupport}; "
  + "import nixpkgs with config.cudaSupport = ${lib.boolToString isCuda} for this backend"
);

effectiveStdenv.mkDerivation {
  pname = "ltx-kernels-${backend}";
  version = toString (lib.importTOML ../build.toml).general.version;

  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions [
      ../build.toml
      ../kernels
      ../torch-ext
    ];
  };

  nativeBuildInputs = [
    kbuild
    python
  ];

  # kbuild's jobs are nvcc and g++ runs; NIX_BUILD_CORES is the share this builder granted.
  buildPhase = ''
    runHook preBuild
    export HOME=$TMPDIR
    kbuild check-config
    kbuild list-variants ${lib.escapeShellArgs toolchainFlags} --json > list-variants.json
    kbuild build ${lib.escapeShellArgs buildFlags} --jobs "$NIX_BUILD_CORES" --json > build-report.json
    runHook postBuild
  '';

  installPhase = ''
    runHook preInstall
    mkdir -p $out/nix-support
    for dir in build/*/; do
      if [ -f "$dir/metadata.json" ]; then
        cp -r "$dir" "$out/$(basename "$dir")"
      fi
    done
    cp list-variants.json build-report.json $out/nix-support/
    runHook postInstall
  '';

  # metadata.json records a digest of every file; stripping or patching the extension afterwards
  # would make `kernels` reject the variant.
  dontFixup = true;

  passthru = {
    inherit backend python;
    cudaHome = if isCuda then cudaHome else null;
  };

  meta = {
    description = "ltx_kernels Hub variants (${backend}) built by kbuild";
    license = lib.licenses.asl20;
    platforms = lib.platforms.linux;
  };
}

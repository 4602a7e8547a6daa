# `nix run .#build-variants` and `nix run .#publish`: the sandboxed ltx_kernels variants, brought
# into a checkout's build/ or uploaded to the Hub with kbuild.
{
  lib,
  writeShellApplication,
  coreutils,
  kbuild,
  ltx-kernels,
}:

{
  # Copies the variants into ./build (or $1) next to whatever is there: a variant of the same name
  # is replaced through a staged copy and a rename, others are left alone, so Nix-built and
  # PyPI-built variants can share one build/.
  build-variants = writeShellApplication {
    name = "kbuild-build-variants";
    runtimeInputs = [ coreutils ];
    text = ''
      out=''${1:-build}
      mkdir -p "$out"
      for dir in ${ltx-kernels}/*/; do
        name=$(basename "$dir")
        [ "$name" = nix-support ] && continue
        rm -rf "$out/.$name.nix-staging"
        cp -r --no-preserve=mode,ownership "$dir" "$out/.$name.nix-staging"
        rm -rf "$out/$name"
        mv "$out/.$name.nix-staging" "$out/$name"
        echo "$out/$name" >&2
      done
      cat ${ltx-kernels}/nix-support/*-build-report.json
    '';
  };

  # Extra arguments go to `kbuild publish` (e.g. `--repo org/name --dry-run`).
  publish = writeShellApplication {
    name = "kbuild-publish-variants";
    runtimeInputs = [ kbuild ];
    text = ''
      exec kbuild publish --build-dir ${ltx-kernels} "$@"
    '';
  };
}

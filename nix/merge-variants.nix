# Every backend's variants in one tree, the shape `kbuild publish --build-dir` reads. Copies, not
# symlinks, so digest checks and `kernels` see plain directories. A variant name twice is an error
# rather than one silently shadowing the other.
{
  lib,
  runCommand,
  variants,
}:

runCommand "ltx-kernels-variants"
  {
    passthru = { inherit variants; };
  }
  ''
    mkdir -p $out/nix-support
    ${lib.concatMapStrings (drv: ''
      for dir in ${drv}/*/; do
        name=$(basename "$dir")
        [ "$name" = nix-support ] && continue
        if [ -e "$out/$name" ]; then
          echo "error: variant $name comes from two builds (${drv.name} and an earlier one)" >&2
          exit 1
        fi
        cp -r "$dir" "$out/$name"
      done
      cp ${drv}/nix-support/build-report.json $out/nix-support/${drv.name}-build-report.json
    '') variants}
  ''

# Offline stand-in for numtide/flake-utils, for scripts/nix-check only: the one function kbuild's
# flake calls, with flake-utils' semantics (each output attribute gains a per-system level).
{
  description = "scripts/nix-check stub of flake-utils";

  outputs =
    { self }:
    {
      lib.eachSystem =
        systems: perSystem:
        builtins.foldl' (
          acc: system:
          let
            outputs = perSystem system;
          in
          acc
          // builtins.mapAttrs (name: value: (acc.${name} or { }) // { ${system} = value; }) outputs
        ) { } systems;
    };
}

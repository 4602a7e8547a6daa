# `import nixpkgs { system; config; }` as the flake calls it.
{
  system ? builtins.currentSystem,
  config ? { },
  overlays ? [ ],
}:

assert (import ./lib.nix).assertMsg (overlays == [ ]) "nix/stubs/nixpkgs: overlays are not modelled";
import ./pkgs.nix { inherit system config; }

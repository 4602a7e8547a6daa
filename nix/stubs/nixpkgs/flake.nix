# Offline stand-in for nixpkgs, for scripts/nix-check only (`--override-input nixpkgs`): the part
# of lib and of the package set that kbuild's flake uses, under nixpkgs' names and calling
# conventions, every package a plain `builtins.derivation` that can be instantiated but not built.
{
  description = "scripts/nix-check stub of nixpkgs";

  outputs =
    { self }:
    {
      lib = import ./lib.nix;
      legacyPackages = self.lib.genAttrs [ "x86_64-linux" "aarch64-linux" ] (
        system: import ./. { inherit system; }
      );
    };
}

{
  description = "kbuild: build GPU kernels for the Hugging Face Kernel Hub, and the ltx_kernels it ships";

  # nixpkgs is pinned to the commit huggingface/kernels pins (see docs/ci.md): its CUDA and
  # torch are the ones HF's own kernel builds are known to work with.
  inputs = {
    nixpkgs.url = "github:NixOS/nixpkgs/ec1a11210589d294f0ac99d3290a27e6c73dfa1d";
    flake-utils.url = "github:numtide/flake-utils";
  };

  outputs =
    {
      self,
      nixpkgs,
      flake-utils,
    }:
    flake-utils.lib.eachSystem [ "x86_64-linux" "aarch64-linux" ] (
      system:
      let
        # Two package sets: CUDA is unfree and torch only builds against it when asked, while the
        # cpu variant must not pull CUDA into its closure.
        pkgs = import nixpkgs { inherit system; };
        cudaPkgs = import nixpkgs {
          inherit system;
          config = {
            allowUnfree = true;
            cudaSupport = true;
          };
        };

        kbuild = pkgs.callPackage ./nix/kbuild.nix { };
        hub-server = pkgs.callPackage ./nix/hub-server.nix { };

        # `self.rev` exists only for a clean checkout; a dirty one lets kbuild hash the sources.
        uniqueId = if self ? rev then builtins.substring 0 7 self.rev else null;

        ltx-kernels-cpu = pkgs.callPackage ./nix/variants.nix {
          inherit kbuild uniqueId;
          backend = "cpu";
        };
        ltx-kernels-cuda = cudaPkgs.callPackage ./nix/variants.nix {
          inherit kbuild uniqueId;
          backend = "cuda";
        };
        ltx-kernels = pkgs.callPackage ./nix/merge-variants.nix {
          variants = [
            ltx-kernels-cuda
            ltx-kernels-cpu
          ];
        };

        apps = pkgs.callPackage ./nix/apps.nix {
          inherit kbuild ltx-kernels;
        };
      in
      {
        packages = {
          inherit
            kbuild
            hub-server
            ltx-kernels
            ltx-kernels-cpu
            ltx-kernels-cuda
            ;
          default = kbuild;
        };

        apps = {
          default = {
            type = "app";
            program = "${kbuild}/bin/kbuild";
          };
          build-variants = {
            type = "app";
            program = "${apps.build-variants}/bin/kbuild-build-variants";
          };
          publish = {
            type = "app";
            program = "${apps.publish}/bin/kbuild-publish-variants";
          };
        };

        devShells.default = cudaPkgs.callPackage ./nix/shell.nix { inherit kbuild hub-server; };

        # `nix flake check` builds these: the sandboxed cpu variant is cheap and needs no GPU.
        checks = {
          inherit kbuild ltx-kernels-cpu;
        };
      }
    );
}

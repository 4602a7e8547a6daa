# The nixpkgs lib functions kbuild's flake uses, with nixpkgs' behaviour where it matters to the
# check (file sets reject missing paths and paths outside their root).
let
  inherit (builtins)
    concatMap
    concatStringsSep
    elem
    filter
    foldl'
    listToAttrs
    map
    pathExists
    replaceStrings
    stringLength
    substring
    ;

  escapeShellArg = arg: "'${replaceStrings [ "'" ] [ "'\\''" ] (toString arg)}'";
  hasPrefix = prefix: s: substring 0 (stringLength prefix) s == prefix;
in
rec {
  inherit concatMap escapeShellArg hasPrefix;

  assertMsg = pred: msg: pred || throw msg;
  assertOneOf =
    name: value: allowed:
    assertMsg (elem value allowed)
      "${name} must be one of [ ${concatStringsSep " " (map (v: ''"${v}"'') allowed)} ], but is: \"${value}\"";
  boolToString = b: if b then "true" else "false";
  concatMapStrings = f: list: concatStringsSep "" (map f list);
  escapeShellArgs = args: concatStringsSep " " (map escapeShellArg args);
  genAttrs =
    names: f:
    listToAttrs (
      map (name: {
        inherit name;
        value = f name;
      }) names
    );
  getBin = drv: drv.bin or drv.out or drv;
  getDev = drv: drv.dev or drv.out or drv;
  getLib = drv: drv.lib or drv.out or drv;
  importTOML = path: builtins.fromTOML (builtins.readFile path);
  optionals = cond: list: if cond then list else [ ];
  optionalString = cond: s: if cond then s else "";

  fileset = {
    unions =
      paths:
      foldl' (
        acc: p:
        if !(builtins.isPath p) then
          throw "lib.fileset.unions: element ${toString p} is not a path"
        else if !(pathExists p) then
          throw "lib.fileset.unions: ${toString p} is a path that does not exist"
        else
          acc ++ [ (toString p) ]
      ) [ ] paths;

    # A path is copied when it is one of the set's paths, lies inside one, or is a directory on
    # the way to one; nothing else under root reaches the store.
    toSource =
      { root, fileset }:
      let
        rootStr = toString root;
        outside = filter (p: !(hasPrefix "${rootStr}/" p) && p != rootStr) fileset;
        keep =
          path: type:
          let
            p = toString path;
          in
          builtins.any (
            f: p == f || hasPrefix "${f}/" p || (type == "directory" && hasPrefix "${p}/" f)
          ) fileset;
      in
      if outside != [ ] then
        throw "lib.fileset.toSource: ${builtins.head outside} is not under root ${rootStr}"
      else
        builtins.path {
          path = root;
          name = "source";
          filter = keep;
        };
  };

  licenses = {
    asl20 = {
      shortName = "asl20";
      free = true;
    };
    unfree = {
      shortName = "unfree";
      free = false;
    };
  };
  platforms.linux = [
    "x86_64-linux"
    "aarch64-linux"
  ];
}

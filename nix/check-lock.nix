# Offline consistency check of flake.lock against flake.nix's inputs, what `nix flake lock` would
# otherwise verify by fetching: `nix-instantiate --eval --strict nix/check-lock.nix` prints the
# checked inputs or fails naming the first mismatch.
let
  inputs = (import ../flake.nix).inputs;
  lock = builtins.fromJSON (builtins.readFile ../flake.lock);
  nodes = lock.nodes;
  rootInputs = nodes.${lock.root}.inputs;

  fail = msg: throw "flake.lock: ${msg}; hint: run `nix flake lock` where the network is reachable";
  isRev = s: builtins.match "[0-9a-f]{40}" s != null;
  isNarHash = s: builtins.match "sha256-[A-Za-z0-9+/]{43}=" s != null;

  # `github:owner/repo[/ref-or-rev]` as the `original` entry nix writes for it.
  parseGithub =
    name: url:
    let
      m = builtins.match "github:([^/]+)/([^/]+)(/(.+))?" url;
      ref = builtins.elemAt m 3;
    in
    if m == null then
      fail "input ${name} has url ${url}; this check knows only github: inputs"
    else
      {
        type = "github";
        owner = builtins.elemAt m 0;
        repo = builtins.elemAt m 1;
      }
      // (
        if ref == null then
          { }
        else if isRev ref then
          { rev = ref; }
        else
          { inherit ref; }
      );

  checkNode =
    name: node:
    let
      locked = node.locked or (fail "node ${name} has no `locked` entry");
    in
    if locked.type != "github" then
      fail "node ${name} is locked as ${locked.type}, expected github"
    else if !(isRev (locked.rev or "")) then
      fail "node ${name} has no 40-hex `rev`"
    else if !(isNarHash (locked.narHash or "")) then
      fail "node ${name} has no sha256 `narHash`"
    else if node.original ? rev && node.original.rev != locked.rev then
      fail "node ${name} pins rev ${node.original.rev} but locks ${locked.rev}"
    else if !(builtins.isInt (locked.lastModified or null)) then
      fail "node ${name} has no `lastModified`"
    else
      "${locked.owner}/${locked.repo}@${locked.rev}";

  checkInput =
    name:
    let
      nodeName =
        rootInputs.${name} or (fail "flake.nix has input ${name}, the lock's root does not");
      node = nodes.${nodeName} or (fail "root input ${name} points at missing node ${nodeName}");
      want = parseGithub name inputs.${name}.url;
    in
    if node.original != want then
      fail "input ${name} is `${inputs.${name}.url}` in flake.nix but ${builtins.toJSON node.original} in the lock"
    else
      checkNode nodeName node;

  extra = builtins.filter (n: !(inputs ? ${n})) (builtins.attrNames rootInputs);
  # Transitive nodes (flake-utils' `systems`) are only checked for a well-formed lock entry.
  others = builtins.filter (n: n != lock.root && !(builtins.elem n (builtins.attrValues rootInputs))) (
    builtins.attrNames nodes
  );
in
if lock.version != 7 then
  fail "version ${toString lock.version}, expected 7"
else if extra != [ ] then
  fail "the lock's root has input ${builtins.head extra}, flake.nix does not"
else
  builtins.listToAttrs (
    map (n: {
      name = n;
      value = checkInput n;
    }) (builtins.attrNames inputs)
    ++ map (n: {
      name = n;
      value = checkNode n nodes.${n};
    }) others
  )

//! Python discovery and the one call that reads torch's facts.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use sha2::{Digest, Sha256};

use super::facts::{FactCache, env_part};
use super::{ToolchainError, resolve_program};
use crate::process::{self, CommandSpec};

/// A Python interpreter and how it was chosen.
#[derive(Debug, Clone, Serialize)]
pub struct Python {
    pub path: PathBuf,
    /// Where it came from (`--python`, `KBUILD_PYTHON`, `VIRTUAL_ENV`, `.venv`, `PATH`).
    pub origin: String,
}

/// What torch tells about itself: versions, ABI, headers and libraries.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TorchInfo {
    /// e.g. `2.15.0+cu132`.
    pub version: String,
    /// `torch.version.cuda`, e.g. `13.2`; `None` for CPU-only torch.
    pub cuda: Option<String>,
    pub cxx11_abi: bool,
    /// `<torch>/include` and `<torch>/include/torch/csrc/api/include`.
    pub include_dirs: Vec<PathBuf>,
    /// `<torch>/lib`.
    pub lib_dir: PathBuf,
    /// Python's own headers (`Python.h`).
    pub python_include: PathBuf,
    /// site-packages that holds torch (the pip CUDA lives beside it).
    pub site_packages: PathBuf,
    /// e.g. `3.11.7`.
    pub python_version: String,
    /// The C++ standard torch's headers were built for (`ATen/ATen.h`: `#error C++NN or later`),
    /// e.g. 20 for torch 2.15 and 17 for torch 2.11. Compiling with another standard than torch
    /// itself risks ODR/layout mismatches in c10's inline code (seen: a segfault when a
    /// `TORCH_CHECK` threw in a C++20 build against torch 2.11).
    #[serde(default = "default_cxx_std")]
    pub cxx_std: u32,
    /// The compile definitions torch's CMake package gives a target that links `torch`.
    #[serde(default)]
    pub cmake_defines: TorchCmakeDefines,
}

/// `INTERFACE_COMPILE_DEFINITIONS` of torch's libraries in its `Caffe2Targets.cmake`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TorchCmakeDefines {
    /// `torch_cpu`'s, e.g. `USE_DISTRIBUTED`, `USE_C10D_GLOO`.
    pub torch_cpu: Vec<String>,
    /// `torch_cuda`'s (a CUDA build of torch only), e.g. `USE_C10D_NCCL`.
    pub torch_cuda: Vec<String>,
}

fn default_cxx_std() -> u32 {
    17
}

impl TorchInfo {
    /// `(major, minor)` of torch, e.g. `(2, 15)`.
    pub fn major_minor(&self) -> (u32, u32) {
        parse_major_minor(&self.version).unwrap_or((0, 0))
    }

    /// `(major, minor)` of torch's CUDA, e.g. `(13, 2)`.
    pub fn cuda_major_minor(&self) -> Option<(u32, u32)> {
        self.cuda.as_deref().and_then(parse_major_minor)
    }

    /// The C++ standard of code that includes torch headers, as HF's build chooses it:
    /// kernel-builder sets `CXX_STANDARD` 17 below torch 2.12 and 20 from 2.12 on, and CMake
    /// raises it to torch's own (`cxx_std_NN`) where that is newer.
    pub fn cxx_standard(&self) -> u32 {
        let hf = if self.major_minor() < (2, 12) { 17 } else { 20 };
        hf.max(self.cxx_std)
    }
}

/// `"2.15.0+cu132"` → `(2, 15)`.
pub(crate) fn parse_major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split(['.', '+']);
    let major = parts.next()?.trim().parse().ok()?;
    let minor = parts.next()?.trim().parse().ok()?;
    Some((major, minor))
}

/// Choose the interpreter: explicit, env, active venv, project venv, then `python3` on PATH.
pub fn find_python(explicit: Option<&Path>, project_root: &Path) -> Result<Python, ToolchainError> {
    let mut tried = Vec::new();
    let mut candidates: Vec<(PathBuf, &str)> = Vec::new();
    if let Some(p) = explicit {
        candidates.push((p.to_path_buf(), "--python"));
    }
    if let Some(p) = crate::env::var_os("KBUILD_PYTHON") {
        candidates.push((PathBuf::from(p), "KBUILD_PYTHON"));
    }
    if let Some(venv) = crate::env::var_os("VIRTUAL_ENV") {
        candidates.push((PathBuf::from(venv).join("bin/python"), "VIRTUAL_ENV"));
    }
    candidates.push((project_root.join(".venv/bin/python"), "project .venv"));
    candidates.push((PathBuf::from("python3"), "PATH"));

    for (path, origin) in candidates {
        tried.push(format!("`{}` ({origin})", path.display()));
        let explicit_choice = origin == "--python" || origin == "KBUILD_PYTHON";
        match resolve_program(&path) {
            Some(resolved) => {
                return Ok(Python {
                    path: resolved,
                    origin: origin.to_string(),
                });
            }
            // An interpreter the user named must exist: falling through would hide their typo.
            None if explicit_choice => {
                return Err(ToolchainError::NoSuchPython {
                    python: path,
                    origin: origin.to_string(),
                });
            }
            None => {}
        }
    }
    Err(ToolchainError::NoPython {
        tried: tried.join(", "),
    })
}

/// The script run once per build; prints one JSON object. `watch` lists the files and
/// directories whose change can change the answer (for the toolchain facts cache): every
/// `sys.path` directory (an install or uninstall adds or removes an entry), torch's version
/// files, `libc10.so` and its dist-info `RECORD`.
///
/// `import torch` takes seconds (CUDA libraries, thousands of modules), so torch is only
/// located (`find_spec`) and its facts read from its files: `version.py` (parsed, not run) and
/// the C++ ABI from `libc10.so` (the new ABI's `std::__cxx11` appears in the mangled name of
/// every function that takes a `std::string`; an old-ABI build never names it). Whatever cannot
/// be read that way with certainty is asked of `import torch` instead, as is everything when
/// `KBUILD_PROBE_IMPORT=1`; `via` says which way answered (`why`: what sent it to the import).
/// Public so that tests can run it under an environment of their own.
pub const TORCH_PROBE: &str = r#"
import glob, importlib.util, json, os, re, sys, sysconfig
watch = [p for p in sys.path if p and os.path.isdir(p)]

def from_files(d):
    """version, cuda and cxx11_abi from torch's files, or why they cannot be read from them."""
    import ast
    with open(os.path.join(d, "version.py")) as f:
        tree = ast.parse(f.read())
    found = {}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            return "version.py: a %s at line %d" % (type(node).__name__, node.lineno)
        for t in targets:
            if not isinstance(t, ast.Name):
                return "version.py: an assignment to a %s at line %d" % (type(t).__name__, node.lineno)
            if t.id in ("__version__", "cuda"):
                if not isinstance(node.value, ast.Constant):
                    return "version.py: `%s` is not a constant at line %d" % (t.id, node.lineno)
                found[t.id] = node.value.value
    version, cuda = found.get("__version__"), found.get("cuda", 0)
    if not isinstance(version, str) or not (cuda is None or isinstance(cuda, str)):
        return "version.py: no string `__version__` and string or None `cuda`"
    with open(os.path.join(d, "lib", "libc10.so"), "rb") as f:
        lib = f.read()
    if not lib.startswith(b"\x7fELF"):
        return "libc10.so: not an ELF file"
    if b"St7__cxx11" in lib:
        abi = True
    elif b"_ZN3c10" in lib:
        abi = False
    else:
        return "libc10.so: no c10 symbols"
    return {"version": version, "cuda": cuda, "cxx11_abi": abi}

facts, why, d = None, None, None
if os.environ.get("KBUILD_PROBE_IMPORT") == "1":
    why = "KBUILD_PROBE_IMPORT=1"
else:
    try:
        spec = importlib.util.find_spec("torch")
        if spec is None:
            print(json.dumps({"error": "no-torch", "detail": "No module named 'torch'", "watch": watch}))
            sys.exit(0)
        if not spec.origin or os.path.basename(spec.origin) != "__init__.py":
            why = "torch is not a regular package (origin %r)" % spec.origin
        else:
            d = os.path.dirname(spec.origin)
            facts = from_files(d)
            if isinstance(facts, str):
                why, facts = facts, None
    except Exception as e:
        why = "%s: %s" % (type(e).__name__, e)
if facts is None:
    try:
        import torch
    except Exception as e:
        print(json.dumps({"error": "no-torch", "detail": str(e), "watch": watch}))
        sys.exit(0)
    d = os.path.dirname(torch.__file__)
    facts = {
        "version": torch.__version__,
        "cuda": torch.version.cuda,
        "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
    }
aten = os.path.join(d, "include", "ATen", "ATen.h")
watch += [d, os.path.join(d, "__init__.py"), os.path.join(d, "version.py"), aten]
watch += [os.path.join(d, "lib", "libc10.so")]
watch += glob.glob(os.path.join(os.path.dirname(d), "torch-*.dist-info", "RECORD"))
std = 17
try:
    with open(aten) as f:
        m = re.search(r"C\+\+(\d+) or later compatible compiler", f.read())
        std = int(m.group(1)) if m else 17
except OSError:
    pass
# What torch's CMake package adds to a target that links `torch`, as HF's build does:
# torch_cpu's and torch_cuda's INTERFACE_COMPILE_DEFINITIONS (generator expressions left out).
targets = os.path.join(d, "share", "cmake", "Caffe2", "Caffe2Targets.cmake")
watch.append(targets)
cmake_defines = {"torch_cpu": [], "torch_cuda": []}
try:
    with open(targets) as f:
        text = f.read()
    for target, found in cmake_defines.items():
        m = re.search(r"set_target_properties\(%s PROPERTIES\n(.*?)\n\)" % target, text, re.S)
        m = m and re.search(r'INTERFACE_COMPILE_DEFINITIONS "([^"]*)"', m.group(1))
        found += [i for i in (m.group(1).split(";") if m else []) if i and "$<" not in i]
except OSError:
    pass
answer = {"cxx_std": std, "cmake_defines": cmake_defines}
answer.update(facts)
answer.update({
    "include_dirs": [os.path.join(d, "include"), os.path.join(d, "include", "torch", "csrc", "api", "include")],
    "lib_dir": os.path.join(d, "lib"),
    "python_include": sysconfig.get_paths()["include"],
    "site_packages": os.path.dirname(d),
    "python_version": "%d.%d.%d" % sys.version_info[:3],
    "watch": watch,
    "via": "import" if why else "files",
})
if why:
    answer["why"] = why
print(json.dumps(answer))
"#;

/// Set to `1`, [`TORCH_PROBE`] imports torch instead of reading its files.
pub const PROBE_IMPORT_ENV: &str = "KBUILD_PROBE_IMPORT";

/// Environment variables that change the probe's answer: what the interpreter imports, and
/// [`PROBE_IMPORT_ENV`].
const PROBE_ENV: &[&str] = &[
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONNOUSERSITE",
    "PYTHONUSERBASE",
    "PYTHONSAFEPATH",
    "HOME",
    PROBE_IMPORT_ENV,
];

/// The files the probe says its answer depends on.
#[derive(Deserialize)]
struct Watched {
    #[serde(default)]
    watch: Vec<PathBuf>,
}

impl Python {
    /// Ask this interpreter's torch for the facts the build needs (remembered in `facts` until
    /// the interpreter, torch or `sys.path` changes).
    pub fn torch_info(&self, facts: &FactCache) -> Result<TorchInfo, ToolchainError> {
        let line = facts.answer(&self.probe_question(), || {
            let line = self.run_probe()?;
            let mut watch = vec![self.path.clone()];
            watch.extend(serde_json::from_str::<Watched>(&line).map_or(Vec::new(), |w| w.watch));
            Ok((line, watch))
        })?;
        if line.contains("\"error\": \"no-torch\"") {
            return Err(ToolchainError::NoTorch {
                python: self.path.clone(),
            });
        }
        serde_json::from_str(&line).map_err(|source| ToolchainError::ProbeOutput {
            python: self.path.clone(),
            line: line.to_string(),
            source,
        })
    }

    /// The facts-cache question: the interpreter, the probe's text and the variables that
    /// steer it.
    fn probe_question(&self) -> String {
        format!(
            "{} -c <torch probe {}> {}",
            self.path.display(),
            &hex::encode(Sha256::digest(TORCH_PROBE))[..12],
            env_part(PROBE_ENV)
        )
    }

    /// Run the probe; its last line of output is the answer.
    fn run_probe(&self) -> Result<String, ToolchainError> {
        let mut probe = CommandSpec::new(&self.path);
        probe.args(["-c", TORCH_PROBE]);
        let out = process::run(&probe).map_err(|failure| ToolchainError::PythonFailed {
            python: self.path.clone(),
            output: failure.diagnostics(),
            failure: Box::new(failure),
        })?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        Ok(stdout.lines().last().unwrap_or_default().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torch_versions_parse_to_major_minor() {
        assert_eq!(parse_major_minor("2.15.0+cu132"), Some((2, 15)));
        assert_eq!(parse_major_minor("2.11.0"), Some((2, 11)));
        assert_eq!(parse_major_minor("13.2"), Some((13, 2)));
        assert_eq!(parse_major_minor("garbage"), None);
    }

    #[test]
    fn forcing_the_import_is_part_of_the_probe_question() {
        let python = Python {
            path: PathBuf::from("/usr/bin/python3"),
            origin: "test".into(),
        };
        assert!(
            python.probe_question().contains(PROBE_IMPORT_ENV),
            "{}",
            python.probe_question()
        );
    }

    #[test]
    fn explicit_python_that_does_not_exist_is_an_error_not_a_fallback() {
        let err = find_python(Some(Path::new("/nonexistent/python")), Path::new("/tmp"))
            .expect_err("must not fall back");
        assert!(err.to_string().contains("/nonexistent/python"), "{err}");
    }
}

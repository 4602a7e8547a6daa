//! The no-op fast path and the toolchain facts cache, with a fake toolchain whose every
//! invocation is logged: a build that changed nothing runs no Python, no compiler and no
//! linker; changing torch or nvcc asks them again, and only them.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::common::kbuild::{fixture, run};

/// A fake Python, C++ compiler and nvcc that append each invocation to `log`.
struct FakeTools {
    _dir: tempfile::TempDir,
    log: PathBuf,
    python: PathBuf,
    cxx: PathBuf,
    nvcc: PathBuf,
    /// `<site-packages>/torch/version.py` of the fake torch.
    torch_version: PathBuf,
}

/// A compiler that logs `name args…`, answers the probes kbuild makes, and for a compile or a
/// link writes the `-o` output (and the `-MF` dependency file).
fn fake_compiler(path: &Path, name: &str, log: &Path, version: &str) {
    let script = format!(
        r#"#!/bin/sh
echo "{name} $*" >> '{log}'
case "$1" in
  --version) echo '{version}'; exit 0 ;;
  --list-gpu-arch) printf 'compute_75\ncompute_80\ncompute_90\n'; exit 0 ;;
  -print-file-name=*) echo '{path}'; exit 0 ;;
esac
out=""; dep=""; src=""; prev=""
for a in "$@"; do
  case "$prev" in
    -o) out="$a" ;;
    -MF) dep="$a" ;;
    -c) src="$a" ;;
  esac
  prev="$a"
done
# The object depends on the source's content, as a real one does (an edit relinks).
[ -n "$out" ] && {{ echo "built from $src"; [ -n "$src" ] && cksum < "$src"; }} > "$out"
[ -n "$dep" ] && echo "$out: $src" > "$dep"
exit 0
"#,
        log = log.display(),
        path = path.display(),
    );
    write_executable(path, &script);
}

fn write_executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

impl FakeTools {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let log = root.join("calls.log");
        let site = root.join("site-packages");
        let torch = site.join("torch");
        std::fs::create_dir_all(torch.join("include")).unwrap();
        std::fs::create_dir_all(torch.join("lib")).unwrap();
        let torch_version = torch.join("version.py");
        std::fs::write(&torch_version, "__version__ = '2.15.0+cu132'\n").unwrap();
        let probe = serde_json::json!({
            "cxx_std": 20,
            "version": "2.15.0+cu132",
            "cuda": "13.2",
            "cxx11_abi": true,
            "include_dirs": [torch.join("include")],
            "lib_dir": torch.join("lib"),
            "python_include": root.join("python-include"),
            "site_packages": site,
            "python_version": "3.11.0",
            "watch": [site, torch_version],
        });
        let python = root.join("python");
        write_executable(
            &python,
            &format!(
                "#!/bin/sh\necho python >> '{}'\ncat <<'EOF'\n{probe}\nEOF\n",
                log.display()
            ),
        );
        let cxx = root.join("c++");
        fake_compiler(&cxx, "c++", &log, "fake-c++ 1.0");
        let nvcc = root.join("cuda/bin/nvcc");
        std::fs::create_dir_all(nvcc.parent().unwrap()).unwrap();
        fake_compiler(
            &nvcc,
            "nvcc",
            &log,
            "Cuda compilation tools, release 13.2, V13.2.1",
        );
        FakeTools {
            _dir: dir,
            log,
            python,
            cxx,
            nvcc,
            torch_version,
        }
    }

    /// `kbuild -C project build` with these tools only.
    fn build(&self, project: &Path) -> std::process::Output {
        self.build_with(project, &[])
    }

    /// [`FakeTools::build`] with more arguments.
    fn build_with(&self, project: &Path, args: &[&str]) -> std::process::Output {
        let mut cmd = crate::common::kbuild::bin();
        cmd.arg("-C")
            .arg(project)
            .arg("build")
            .arg("--json")
            .args(args);
        cmd.arg("--python").arg(&self.python);
        cmd.arg("--nvcc").arg(&self.nvcc);
        cmd.env("CXX", &self.cxx);
        for var in ["KBUILD_PYTHON", "VIRTUAL_ENV", "CUDA_HOME", "CUDA_PATH"] {
            cmd.env_remove(var);
        }
        let out = run(&mut cmd);
        assert!(out.status.success(), "the build fails");
        out
    }

    /// The invocations logged since the last call (program and first argument).
    fn take_calls(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        std::fs::write(&self.log, "").unwrap();
        text.lines()
            .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
            .collect()
    }
}

fn summary(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("JSON summary")
}

/// Labels of the units a compiler ran for.
fn compiled(out: &std::process::Output) -> Vec<String> {
    let json = summary(out);
    let list = json["compiled"].as_array().expect("compiled list");
    list.iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// Names of the variants the build wrote (rather than found in place).
fn written(out: &std::process::Output) -> Vec<String> {
    let json = summary(out);
    let variants = json["variants"].as_array().expect("variants");
    variants
        .iter()
        .filter(|v| v["written"] == true)
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect()
}

/// Rewrite `path` with `text` (a new size, so no file system's timestamp granularity hides it).
fn rewrite(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_second_build_without_changes_runs_no_python_no_compiler_and_no_linker() {
    let project = fixture("relu-v5");
    let tools = FakeTools::new();
    let first = tools.build(project.path());
    assert!(!compiled(&first).is_empty());
    let calls = tools.take_calls();
    for tool in [
        "python",
        "c++ --version",
        "nvcc --version",
        "nvcc -ccbin",
        "c++ -shared",
    ] {
        assert!(
            calls.iter().any(|c| c.starts_with(tool)),
            "the first build ran no `{tool}`: {calls:?}"
        );
    }

    let second = tools.build(project.path());
    assert_eq!(tools.take_calls(), Vec::<String>::new());
    assert_eq!(compiled(&second), Vec::<String>::new());
    assert_eq!(summary(&second)["variants"].as_array().unwrap().len(), 2);
    assert_eq!(written(&second), Vec::<String>::new());
}

#[test]
fn changing_torch_asks_python_again_and_nothing_else() {
    let project = fixture("relu-v5");
    let tools = FakeTools::new();
    tools.build(project.path());
    tools.take_calls();

    rewrite(
        &tools.torch_version,
        "__version__ = '2.16.0+cu132'  # upgraded\n",
    );
    let out = tools.build(project.path());
    assert_eq!(tools.take_calls(), ["python"]);
    assert_eq!(compiled(&out), Vec::<String>::new());

    tools.build(project.path());
    assert_eq!(tools.take_calls(), Vec::<String>::new());
}

#[test]
fn changing_nvcc_asks_nvcc_again_and_nothing_else() {
    let project = fixture("relu-v5");
    let tools = FakeTools::new();
    tools.build(project.path());
    tools.take_calls();

    let text = std::fs::read_to_string(&tools.nvcc).unwrap();
    rewrite(&tools.nvcc, &format!("{text}# reinstalled\n"));
    tools.build(project.path());
    let mut calls = tools.take_calls();
    calls.sort();
    assert_eq!(calls, ["nvcc --list-gpu-arch", "nvcc --version"]);
}

#[test]
fn an_edited_source_recompiles_and_relinks_without_asking_the_toolchain() {
    let project = fixture("relu-v5");
    let tools = FakeTools::new();
    // Outside git the op namespace hashes the sources, and every unit sees it (as in HF's
    // build): a fixed namespace keeps an edit to the edited unit.
    let fixed = ["--unique-id", "dev"];
    tools.build_with(project.path(), &fixed);
    tools.take_calls();

    let cu = project.path().join("relu_cuda/relu.cu");
    let text = std::fs::read_to_string(&cu).unwrap();
    rewrite(&cu, &format!("{text}\n// edited\n"));
    let out = tools.build_with(project.path(), &fixed);
    let compiled = compiled(&out);
    assert!(
        compiled.iter().any(|l| l.contains("relu.cu")),
        "{compiled:?}"
    );
    assert!(
        !compiled.iter().any(|l| l.contains("relu_cpu.cpp")),
        "{compiled:?}"
    );
    let calls = tools.take_calls();
    let probes = ["python", "--version", "--list-gpu-arch", "-print-file-name"];
    assert!(
        !calls.iter().any(|c| probes.iter().any(|p| c.contains(p))),
        "{calls:?}"
    );
    assert!(calls.iter().any(|c| c == "nvcc -ccbin"), "{calls:?}");
    assert!(calls.iter().any(|c| c == "c++ -shared"), "{calls:?}");

    tools.build_with(project.path(), &fixed);
    assert_eq!(tools.take_calls(), Vec::<String>::new());
}

/// The edit changes the op namespace, which only the bindings spell: the edited kernel and the
/// two binding units compile, the untouched cpu kernel does not.
#[test]
fn outside_git_an_edit_changes_the_op_namespace_and_recompiles_the_edit_and_the_bindings() {
    let project = fixture("relu-v5");
    let tools = FakeTools::new();
    tools.build(project.path());
    let cu = project.path().join("relu_cuda/relu.cu");
    let text = std::fs::read_to_string(&cu).unwrap();
    rewrite(&cu, &format!("{text}\n// edited\n"));
    let mut compiled = compiled(&tools.build(project.path()));
    compiled.sort();
    assert_eq!(
        compiled,
        [
            "relu_cuda/relu.cu [cuda]",
            "torch-ext/torch_binding.cpp [cpu]",
            "torch-ext/torch_binding.cpp [cuda]"
        ]
    );
}

#[test]
fn a_file_removed_from_a_variant_is_restored_by_the_next_build() {
    let project = fixture("relu-v5");
    let tools = FakeTools::new();
    tools.build(project.path());
    let variant = std::fs::read_dir(project.path().join("build"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("-cpu-"))
        .expect("a cpu variant");
    std::fs::remove_file(variant.join("_ops.py")).unwrap();

    let out = tools.build(project.path());
    assert!(variant.join("_ops.py").exists());
    assert_eq!(written(&out).len(), 1);
    assert!(written(&out)[0].contains("-cpu-"));
}

#[test]
fn a_file_added_to_a_variant_is_noticed() {
    let project = fixture("relu-v5");
    let tools = FakeTools::new();
    tools.build(project.path());
    let variant = std::fs::read_dir(project.path().join("build"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("-cpu-"))
        .expect("a cpu variant");
    std::fs::write(variant.join("stray.py"), "").unwrap();

    let out = tools.build(project.path());
    assert!(!variant.join("stray.py").exists());
    assert_eq!(written(&out).len(), 1);
}

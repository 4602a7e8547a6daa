//! The device step cache (issue #22): a unit compiled again for more capabilities runs only
//! the device passes (`cicc`, `ptxas`) of the capabilities it never compiled, and its device
//! code is byte for byte a clean build's; a damaged entry is found and its pass runs again.
//! With the real pip nvcc, in a copy of its toolkit's layout whose `cicc` and `ptxas` log
//! every run before they exec the real ones.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::fake_cc::{gencode, job, make_executable, write};
use crate::common::kbuild::{fixture, kbuild, run, stdout_json};
use crate::nvcc_steps::{cuobjdump, nvcc};
use crate::split_compile::cubins;
use kbuild::compile::{CompileSettings, compile_all};
use kbuild::plan::{CompileJob, Lang};
use kbuild::report::Recorder;
use kbuild::schedule::NvccMode;

/// The pip CUDA toolkit, every file linked but `nvcc` (copied: it finds its tools beside its
/// own binary) and `cicc` and `ptxas` (scripts that log each run to `runs.log`).
struct Toolkit {
    dir: tempfile::TempDir,
}

impl Toolkit {
    fn new() -> Self {
        let real = nvcc();
        let root = real.parent().and_then(Path::parent).unwrap().to_path_buf();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("runs.log");
        mirror(&root, &dir.path().join("cuda"), &log);
        Toolkit { dir }
    }

    fn nvcc(&self) -> PathBuf {
        self.dir.path().join("cuda/bin/nvcc")
    }

    /// The device passes run since the last call, as `cicc compute_80` / `ptxas sm_80`,
    /// sorted.
    fn take_runs(&self) -> Vec<String> {
        let log = self.dir.path().join("runs.log");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        let mut runs: Vec<String> = text
            .lines()
            .map(|line| {
                let words: Vec<&str> = line.split_whitespace().collect();
                let arch = match words[0] {
                    "cicc" => words.iter().skip_while(|w| **w != "-arch").nth(1).copied(),
                    _ => words.iter().find_map(|w| w.strip_prefix("-arch=")),
                };
                format!("{} {}", words[0], arch.expect(line))
            })
            .collect();
        runs.sort();
        runs
    }
}

/// `from` rebuilt under `to`: directories made, files linked, except those named above.
fn mirror(from: &Path, to: &Path, log: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (path, dest) = (entry.path(), to.join(entry.file_name()));
        let name = entry.file_name().to_string_lossy().into_owned();
        let walk_into = matches!(name.as_str(), "bin" | "nvvm") && path.is_dir();
        match name.as_str() {
            _ if walk_into => mirror(&path, &dest, log),
            "nvcc" | "nvcc.profile" => {
                std::fs::copy(&path, &dest).unwrap();
            }
            "cicc" | "ptxas" => {
                let script = format!(
                    "#!/bin/sh\nprintf '%s\\n' \"{name} $*\" >> '{}'\nexec '{}' \"$@\"\n",
                    log.display(),
                    path.display()
                );
                std::fs::write(&dest, script).unwrap();
                make_executable(&dest);
            }
            _ => std::os::unix::fs::symlink(&path, &dest).unwrap(),
        }
    }
}

fn strings(v: &Value) -> Vec<String> {
    let items = v.as_array().map(Vec::as_slice).unwrap_or_default();
    items
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// `kbuild build --backend cuda --json` of `root` with the toolkit's nvcc: the report.
fn build(root: &Path, toolkit: &Toolkit, extra: &[&str]) -> Value {
    let out = run(kbuild(root)
        .args(["build", "--backend", "cuda", "--json", "--unique-id", "t"])
        .arg("--nvcc")
        .arg(toolkit.nvcc())
        .args(extra));
    assert!(out.status.success());
    stdout_json(&out)
}

/// Each cubin (cuobjdump's name) → its sections (name → bytes).
type Cubins = BTreeMap<String, BTreeMap<String, Vec<u8>>>;

/// What [`device_code`] compares.
type DeviceCode = (Cubins, Vec<String>, String);

/// The device code `file` embeds: each cubin's sections but `.note.nv.tkinfo`, that note's
/// words without ptxas's `-split-compile N` (the schedule's thread count, which the cache
/// leaves out of its key as the object cache does: the code is the same), and the PTX.
fn device_code(file: &Path) -> DeviceCode {
    let cuobjdump = cuobjdump(&nvcc());
    let (cubins, notes) = cubins(&cuobjdump, file);
    let mut words = Vec::new();
    let mut all = notes.split(|c: char| c.is_whitespace() || c == '\0');
    while let Some(word) = all.next() {
        match word {
            "" => {}
            "-split-compile" => drop(all.next()),
            _ => words.push(word.to_string()),
        }
    }
    let out = Command::new(&cuobjdump)
        .arg("-ptx")
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "cuobjdump -ptx {file:?}: {out:?}");
    (cubins, words, String::from_utf8(out.stdout).unwrap())
}

/// The extension the build installed.
fn extension(root: &Path) -> PathBuf {
    let variant = root.join("build/torch215-cxx11-cu132-x86_64-linux");
    walkdir::WalkDir::new(variant)
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .find(|p| p.extension().is_some_and(|x| x == "so"))
        .expect("the variant holds an extension")
}

#[test]
fn the_full_matrix_after_one_capability_runs_only_the_missing_device_passes() {
    let toolkit = Toolkit::new();
    let project = fixture("relu-v5");
    let root = project.path();
    let unit = "relu_cuda/relu.cu [cuda]";

    build(root, &toolkit, &["--cuda-capabilities", "8.0"]);
    assert_eq!(toolkit.take_runs(), ["cicc compute_80", "ptxas sm_80"]);

    let full = build(root, &toolkit, &[]);
    assert_eq!(strings(&full["compiled"]), [unit]);
    assert_eq!(
        toolkit.take_runs(),
        [
            "cicc compute_75",
            "cicc compute_90",
            "ptxas sm_75",
            "ptxas sm_90"
        ]
    );
    assert_eq!(
        strings(&full["reused_steps"]),
        [
            format!("{unit}: cicc compute_80"),
            format!("{unit}: ptxas sm_80")
        ]
    );
    let reused = device_code(&extension(root));
    assert_eq!(
        reused.0.len(),
        3,
        "one cubin per capability: {:?}",
        reused.0.keys()
    );

    // A clean build of the full matrix runs every pass and embeds the same device code.
    let out = run(kbuild(root).arg("clean"));
    assert!(out.status.success());
    let clean = build(root, &toolkit, &[]);
    assert!(clean.get("reused_steps").is_none(), "{clean:#}");
    assert_eq!(toolkit.take_runs().len(), 6);
    assert!(
        device_code(&extension(root)) == reused,
        "the device code differs"
    );
}

fn settings(root: &Path) -> CompileSettings {
    CompileSettings::local(root.join("cache"), 1, NvccMode::Steps)
}

/// `<root>/k.cu` compiled into `obj/k.o` for `caps` (PTX for the last): what the runner said.
fn compile(root: &Path, toolkit: &Toolkit, caps: &[(u32, u32)]) -> Vec<String> {
    let last = caps.len() - 1;
    let unit = CompileJob {
        lang: Lang::Cuda,
        compiler_id: "nvcc 13.2".into(),
        gencodes: (caps.iter().enumerate())
            .map(|(i, &(major, minor))| gencode(major, minor, i == last))
            .collect(),
        ..job(root, &toolkit.nvcc(), "k.cu")
    };
    let recorder = Recorder::default();
    let summary = compile_all(&[unit], &settings(root), &recorder).unwrap();
    assert_eq!(summary.compiled, ["k.cu"]);
    recorder.take()
}

#[test]
fn a_damaged_device_step_entry_is_found_and_its_pass_runs_again() {
    let toolkit = Toolkit::new();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "k.cu",
        "namespace { __global__ void scale(float* o) { o[threadIdx.x] *= 2; } }\n\
         __global__ void k(float* o) { o[threadIdx.x] = __sinf(o[threadIdx.x]); }\n\
         void launch(float* o) { k<<<1, 32>>>(o); scale<<<1, 32>>>(o); }\n",
    );
    let full = [(7, 5), (8, 0), (9, 0)];
    compile(root, &toolkit, &[(8, 0)]);
    assert_eq!(toolkit.take_runs(), ["cicc compute_80", "ptxas sm_80"]);
    // Flip one byte of every entry's last output.
    let steps = root.join("cache/steps");
    for entry in std::fs::read_dir(&steps).unwrap() {
        let path = entry.unwrap().path();
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x20;
        std::fs::write(&path, bytes).unwrap();
    }

    let said = compile(root, &toolkit, &full).join("\n");
    assert_eq!(toolkit.take_runs().len(), 6, "every pass ran");
    for pass in ["cicc compute_80", "ptxas sm_80"] {
        assert!(
            said.contains(&format!(
                "the device step cache entry for `{pass}` of `k.cu` is damaged: `"
            )) && said.contains("` does not match its hash; removed, the pass runs again"),
            "{said}"
        );
    }
    let object = root.join("obj/k.o");
    let recomputed = device_code(&object);

    // The entries written again serve the next compiles, with the same device code; `-v`
    // names the passes reused.
    let said = compile(root, &toolkit, &[(8, 0)]).join("\n");
    for pass in ["cicc compute_80", "ptxas sm_80"] {
        let line = format!("`k.cu`: `{pass}` reused from the device step cache");
        assert!(said.contains(&line), "{said}");
    }
    compile(root, &toolkit, &full);
    assert_eq!(toolkit.take_runs(), Vec::<String>::new());
    assert!(
        device_code(&object) == recomputed,
        "the device code differs"
    );
}

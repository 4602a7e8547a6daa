//! A CUDA unit compiled as nvcc's own steps, run by kbuild (issue #12): the same device code
//! as one nvcc, anonymous-namespace kernels named alike on the host and device side by the
//! module id kbuild writes, the host compile beside the device passes, the steps of all units
//! under the build's job slots, errors that show the one-nvcc command, and one nvcc where
//! kbuild does not know nvcc's plan. All with the real pip nvcc.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use object::{Object, ObjectSection, ObjectSymbol};
use sha2::{Digest, Sha256};

use crate::common::fake_cc::{gencode, job, write};
use crate::common::redact::Redact;
use kbuild::compile::{CompileError, CompileSettings, CompileSummary, compile_all};
use kbuild::jobserver::Jobserver;
use kbuild::plan::{CompileJob, Lang};
use kbuild::report::Recorder;
use kbuild::schedule::{NvccMode, RunChoice};

use crate::split_compile::cubins;

/// Device code heavy enough that cicc and ptxas run for a while.
const HEAVY: &str = "template <int N> __device__ float f(float x) { float s = 0;\n\
    #pragma unroll\n for (int i = 0; i < N; i++) s += __sinf(x * i) * __cosf(s + i);\n\
    return s; }\n__global__ void k(float* o) { o[threadIdx.x] = f<400>(o[threadIdx.x]); }\n\
    void launch(float* o) { k<<<1, 32>>>(o); }\n";

pub(crate) fn nvcc() -> PathBuf {
    crate::compile_real::find_nvcc().expect(
        "no nvcc: run scripts/setup (it installs cuda-toolkit[nvcc] into .venv) or set \
         KBUILD_TEST_NVCC",
    )
}

/// cuobjdump beside `nvcc`, else the project venv's (a toolchain may ship nvcc without it).
pub(crate) fn cuobjdump(nvcc: &Path) -> PathBuf {
    let beside = nvcc.with_file_name("cuobjdump");
    if beside.is_file() {
        return beside;
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/lib");
    std::fs::read_dir(venv)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("site-packages/nvidia/cu13/bin/cuobjdump"))
        .find(|p| p.is_file())
        .unwrap_or(beside)
}

fn cuda_job(root: &Path, nvcc: &Path, name: &str) -> CompileJob {
    CompileJob {
        lang: Lang::Cuda,
        gencodes: vec![gencode(8, 0, false), gencode(9, 0, true)],
        compiler_id: "nvcc".to_string(),
        ..job(root, nvcc, name)
    }
}

fn settings(root: &Path, nvcc_steps: bool, jobserver: Option<Arc<Jobserver>>) -> CompileSettings {
    let nvcc = if nvcc_steps {
        NvccMode::Steps
    } else {
        NvccMode::Threads
    };
    CompileSettings {
        jobserver,
        ..CompileSettings::local(root.join("cache"), 2, nvcc)
    }
}

fn compile(
    jobs: &[CompileJob],
    settings: &CompileSettings,
) -> (Result<CompileSummary, CompileError>, Vec<String>) {
    // Two device-pass threads per unit, as the schedule gives a unit of two capabilities.
    let settings = CompileSettings {
        runs: (jobs.iter())
            .map(|j| RunChoice::of(j, settings.nvcc, 2))
            .collect(),
        ..settings.clone()
    };
    let recorder = Recorder::default();
    let result = compile_all(jobs, &settings, &recorder);
    (result, recorder.take())
}

fn tool_output(tool: &Path, args: &[&str], file: &Path) -> String {
    let out = Command::new(tool).args(args).arg(file).output().unwrap();
    assert!(out.status.success(), "{tool:?} {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Files and directories left in `dir` (recursively), relative.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = walkdir::WalkDir::new(dir)
        .min_depth(1)
        .into_iter()
        .map(|e| {
            let e = e.unwrap();
            e.path().strip_prefix(dir).unwrap().display().to_string()
        })
        .collect();
    names.sort();
    names
}

/// `(name, text)` written under `root` and compiled alone, as nvcc's steps or one nvcc; it
/// compiles, and nothing says it fell back to one nvcc.
fn compile_unit(root: &Path, nvcc: &Path, (name, text): (&str, &str), steps: bool) -> CompileJob {
    write(root, name, text);
    let job = cuda_job(root, nvcc, name);
    let (result, said) = compile(std::slice::from_ref(&job), &settings(root, steps, None));
    assert_eq!(result.unwrap().compiled, [name]);
    assert!(
        !said.iter().any(|l| l.contains("compiles with one nvcc")),
        "{said:?}"
    );
    job
}

#[test]
fn steps_embed_the_same_device_code_as_one_nvcc_through_a_hidden_symbol() {
    let nvcc = nvcc();
    let cuobjdump = cuobjdump(&nvcc);
    let mut dumps = Vec::new();
    for nvcc_steps in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let jobs = [compile_unit(root, &nvcc, ("k.cu", HEAVY), nvcc_steps)];
        let object = &jobs[0].object;
        let elf = tool_output(&cuobjdump, &["-elf"], object);
        let ptx = tool_output(&cuobjdump, &["-ptx"], object);
        assert!(elf.contains("sm_80") && elf.contains("sm_90"), "{elf}");
        assert!(ptx.contains(".target sm_90"), "{ptx}");
        let symbols = tool_output(Path::new("nm"), &[], object);
        let fatbin_symbol = symbols.lines().find(|l| l.contains("kbuild_fatbin_"));
        assert_eq!(fatbin_symbol.is_some(), nvcc_steps, "{symbols}");
        // The unit's depfile names its source and the CUDA runtime header nvcc includes.
        let deps = std::fs::read_to_string(&jobs[0].depfile).unwrap();
        assert!(
            deps.contains("k.cu") && deps.contains("cuda_runtime.h"),
            "{deps}"
        );
        // A shared object links from it and keeps the device code.
        let so = root.join("k.so");
        let link = Command::new("g++")
            .args(["-shared", "-o"])
            .arg(&so)
            .arg(object)
            .output()
            .unwrap();
        assert!(link.status.success(), "{link:?}");
        assert_eq!(tool_output(&cuobjdump, &["-elf"], &so), elf);
        let dynamic = tool_output(Path::new("nm"), &["-D", "--defined-only"], &so);
        assert!(!dynamic.contains("kbuild_fatbin_"), "{dynamic}");
        // Nothing of the steps is left beside the object.
        assert_eq!(listing(&root.join("obj")), ["k.d", "k.o"]);
        dumps.push((code_lines(&elf), code_lines(&ptx)));
    }
    // The same cubins and PTX instructions; the steps put cicc's PTX in the canonical
    // order (`compile/nvcc/ptx.rs`: its declarations and functions sorted, the `// .globl`
    // comments with the others), so the listings are compared line by line as sets.
    assert!(dumps[0] == dumps[1], "the device code differs");
}

/// The lines of a `cuobjdump` listing (`-elf`, `-ptx`), sorted, without blank or comment lines.
fn code_lines(listing: &str) -> Vec<String> {
    let mut lines: Vec<String> = listing
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .map(String::from)
        .collect();
    lines.sort();
    lines
}

/// Kernels in an anonymous namespace (named after the unit's module id), one of them a
/// template, and a static one, launched from a host function.
const ANONYMOUS: &str = "namespace {\n\
    __global__ void scale(float* o) { o[threadIdx.x] *= 2; }\n\
    template <int N> __global__ void shift(float* o) { o[threadIdx.x] += N; }\n}\n\
    static __global__ void clear(float* o) { o[threadIdx.x] = 0; }\n\
    void launch(float* o) { scale<<<1, 32>>>(o); shift<3><<<1, 32>>>(o); clear<<<1, 32>>>(o); }\n";

/// The `_Z` names among the NUL-separated strings of `object`'s `.rodata` sections: the kernel
/// names the host side registers with the runtime.
fn registered_names(object: &object::File) -> BTreeSet<String> {
    let rodata = object
        .sections()
        .filter(|s| s.name().is_ok_and(|n| n.starts_with(".rodata")));
    rodata
        .flat_map(|s| {
            let data = s.data().unwrap();
            data.split(|b| *b == 0)
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect::<Vec<_>>()
        })
        .filter(|w| w.starts_with("_Z"))
        .collect()
}

#[test]
fn anonymous_namespace_kernels_are_named_alike_on_the_host_and_device_side_by_kbuilds_module_id() {
    let nvcc = nvcc();
    let cuobjdump = cuobjdump(&nvcc);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let jobs = [compile_unit(
        root,
        &nvcc,
        ("anon-kernels.cu", ANONYMOUS),
        true,
    )];
    let bytes = std::fs::read(&jobs[0].object).unwrap();
    let host = object::File::parse(&*bytes).unwrap();
    let symbols: Vec<&str> = host.symbols().filter_map(|s| s.name().ok()).collect();
    assert!(
        symbols.iter().any(|s| s.starts_with("kbuild_fatbin_")),
        "not compiled as steps: {symbols:?}"
    );
    // What the device code defines, per cubin.
    let (cubins, _) = cubins(&cuobjdump, &jobs[0].object);
    let functions: Vec<(String, BTreeSet<String>)> = cubins
        .into_iter()
        .map(|(cubin, sections)| {
            let names = sections.keys().filter_map(|s| s.strip_prefix(".text."));
            (cubin, names.map(String::from).collect())
        })
        .collect();
    let archs: Vec<&str> = functions.iter().map(|(c, _)| c.as_str()).collect();
    assert!(
        archs.iter().any(|c| c.contains("sm_80")) && archs.iter().any(|c| c.contains("sm_90")),
        "{archs:?}"
    );
    // The names cicc's stub registers (the three kernels) are functions of every cubin.
    let registered = registered_names(&host);
    assert_eq!(registered.len(), 3, "{registered:?}");
    for name in &registered {
        for (cubin, defined) in &functions {
            assert!(
                defined.contains(name),
                "`{name}` is no function of {cubin}: {defined:?}"
            );
        }
    }
    // One anonymous namespace, kbuild's id (from the unit's label; nvcc's hashes the source's
    // path), in the host functions cudafe++ named, the stub cicc wrote and the device code.
    let digest = hex::encode(Sha256::digest(b"anon-kernels.cu"));
    let id = format!("_{}_15_anon_kernels_cu_{}", &digest[..8], &digest[8..16]);
    let device_names = functions
        .iter()
        .flat_map(|(_, f)| f.iter().map(String::as_str));
    for (side, names) in [
        ("host", anonymous_namespaces(symbols.iter().copied())),
        ("device", anonymous_namespaces(device_names)),
    ] {
        let expected = BTreeSet::from([format!("_GLOBAL__N_{id}")]);
        assert_eq!(names, expected, "the {side} side's anonymous namespaces");
    }
}

/// The anonymous namespaces (`_GLOBAL__N_<module id>`) the mangled `names` mention.
fn anonymous_namespaces<'a>(names: impl Iterator<Item = &'a str>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for name in names {
        for (at, _) in name.match_indices("_GLOBAL__N_") {
            // Mangled as `<length><name>`: the digits before it.
            let digits = name[..at].len()
                - name[..at]
                    .trim_end_matches(|c: char| c.is_ascii_digit())
                    .len();
            let len: usize = name[at - digits..at].parse().unwrap_or(0);
            found.insert(name[at..(at + len).min(name.len())].to_string());
        }
    }
    found
}

/// nvcc's leaf processes (front end, device passes, host compiler, assembler) working on files
/// under `root`, as `<unit> <program>` (`a.o host` for the host compile), the unit read from
/// the step directory named in the command line.
fn steps_under(root: &Path) -> Vec<String> {
    let root = root.to_string_lossy();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if entry.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        let running = !stat[close + 1..].trim_start().starts_with('Z');
        let leaf = matches!(
            comm,
            "cicc" | "ptxas" | "cudafe++" | "cc1plus" | "fatbinary" | "as" | "ld"
        );
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if running && leaf && cmdline.contains(root.as_ref()) {
            let unit = ["a.o", "b.o"]
                .into_iter()
                .find(|u| cmdline.contains(&format!("-{u}.steps/")))
                .unwrap_or("?");
            let host = comm == "cc1plus" && cmdline.contains(".cudafe1.");
            found.push(format!("{unit} {}", if host { "host" } else { comm }));
        }
    }
    found
}

#[test]
fn the_host_compile_runs_beside_the_device_passes_and_steps_share_the_builds_slots() {
    let nvcc = nvcc();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let jobs: Vec<CompileJob> = ["a.cu", "b.cu"]
        .iter()
        .map(|name| {
            write(root, name, HEAVY);
            CompileJob {
                gencodes: vec![
                    gencode(7, 5, false),
                    gencode(8, 0, false),
                    gencode(9, 0, true),
                ],
                ..cuda_job(root, &nvcc, name)
            }
        })
        .collect();
    let slots = 3;
    let settings = settings(root, true, Some(Arc::new(Jobserver::new(slots).unwrap())));
    let done = AtomicBool::new(false);
    let samples: Vec<Vec<String>> = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut samples = Vec::new();
            while !done.load(Ordering::SeqCst) {
                let now = steps_under(root);
                if !now.is_empty() {
                    samples.push(now);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            samples
        });
        let (result, said) = compile(&jobs, &settings);
        done.store(true, Ordering::SeqCst);
        assert_eq!(result.unwrap().compiled.len(), 2, "{said:?}");
        sampler.join().unwrap()
    });
    // A unit's host compile runs beside its own device passes (one nvcc runs it after them).
    let beside = samples
        .iter()
        .filter(|s| {
            ["a.o", "b.o"].iter().any(|u| {
                s.contains(&format!("{u} host"))
                    && (s.contains(&format!("{u} cicc")) || s.contains(&format!("{u} ptxas")))
            })
        })
        .count();
    assert!(
        beside > 0,
        "no host compile ran beside its unit's device passes in {} samples",
        samples.len()
    );
    // Two units of three capabilities: nine device passes, yet never more processes than
    // slots (a sample taken while one step ends and the next starts may see one more).
    let over = samples.iter().filter(|s| s.len() > slots).count();
    let peak = samples.iter().map(Vec::len).max().unwrap_or(0);
    assert!(
        over * 20 <= samples.len() && peak <= slots + 1,
        "{over} of {} samples above {slots} processes, peak {peak}",
        samples.len()
    );
    assert!(peak >= 2, "the steps ran one at a time (peak {peak})");
}

#[test]
fn a_failing_device_step_shows_the_nvcc_command_and_leaves_nothing_behind() {
    let nvcc = nvcc();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let source = "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900\n#error only sm_90 is broken\n#endif\n\
                  __global__ void k(float* o) { o[0] = 1; }\n";
    write(root, "k.cu", source);
    let jobs = [cuda_job(root, &nvcc, "k.cu")];
    let (result, _) = compile(&jobs, &settings(root, true, None));
    let err = result.unwrap_err();
    let text = err.to_string();
    // What the user reads: the unit, the one nvcc that reproduces it, and nvcc's own error.
    let redact = Redact::new()
        .path(root, "[root]")
        .path(nvcc.parent().unwrap(), "[cuda]");
    insta::assert_snapshot!(redact.text(&text));
    // The command shown is the one nvcc that reproduces the error.
    let shown = match &err {
        CompileError::CommandFailed { command, .. } => command.clone(),
        other => panic!("{other:?}"),
    };
    assert!(
        shown.contains("nvcc") && shown.contains("-gencode"),
        "{shown}"
    );
    let rerun = Command::new("sh").arg("-c").arg(&shown).output().unwrap();
    assert!(!rerun.status.success());
    assert!(String::from_utf8_lossy(&rerun.stderr).contains("only sm_90 is broken"));
    // No object, no depfile, no step files.
    assert!(
        listing(&root.join("obj")).is_empty(),
        "{:?}",
        listing(&root.join("obj"))
    );
}

#[test]
fn relocatable_device_code_compiles_with_one_nvcc_and_says_why_with_verbose() {
    let nvcc = nvcc();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "k.cu", "__global__ void k(float* o) { o[0] = 1; }\n");
    let jobs = [CompileJob {
        flags: vec!["-rdc=true".to_string()],
        ..cuda_job(root, &nvcc, "k.cu")
    }];
    let (result, said) = compile(&jobs, &settings(root, true, None));
    assert_eq!(result.unwrap().compiled, ["k.cu"]);
    let redact = Redact::new()
        .path(root, "[root]")
        .path(nvcc.parent().unwrap(), "[cuda]");
    insta::assert_snapshot!(redact.text(&said.join("\n")));
    let symbols = tool_output(Path::new("nm"), &[], &jobs[0].object);
    assert!(!symbols.contains("kbuild_fatbin_"), "{symbols}");
}

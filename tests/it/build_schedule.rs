//! How a build schedules its compile jobs (issue #12): jobs start longest first by the times
//! the last build recorded in `build/.kbuild/costs.json` (`KBUILD_SCHEDULE=fifo`: plan order),
//! kbuild asks nvcc for its steps (`--dryrun`; what it does with them: tests/it/nvcc_steps.rs),
//! and with one nvcc per unit nvcc gets a fixed `--threads` share. `KBUILD_JOBSERVER=1` instead
//! shares one GNU make jobserver between kbuild's runner and nvcc (off by default: real nvcc
//! then runs its device passes one at a time, as the last test shows).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::common::fake_cc::{gencode, job, write};
use crate::common::kbuild::{bin, fixture, run};
use crate::common::redact::Redact;
use kbuild::compile::{CompileSettings, compile_all};
use kbuild::jobserver::Jobserver;
use kbuild::plan::{CompileJob, Lang};
use kbuild::report::Recorder;
use kbuild::schedule::{NvccMode, RunChoice};

/// Each fake compiler process: one "pass" (one per gencode for nvcc, one for c++) marks itself
/// running in `running/` for a moment and logs how many passes it saw running, an upper bound
/// of none and a lower bound of the true count, so a logged count above `-j` is a real excess.
const PASS: &str = r#"
pass() {
  touch "$running/$$.$1"
  ls "$running" | wc -l >> "$counts"
  sleep 0.2
  rm -f "$running/$$.$1"
}
# The pipes open beyond stdin/stdout/stderr (`pipe:[inode]`), a jobserver's among them if
# this process inherited one (the shell's own, for a command substitution, come and go).
pipes() {
  npipes=""
  for fd in /proc/$$/fd/*; do
    case "${fd##*/}" in 0|1|2) continue ;; esac
    case "$(readlink "$fd")" in pipe:*) npipes="$npipes$(readlink "$fd")" ;; esac
  done
}
"#;

/// A fake Python (its torch probe), c++ and nvcc 13.2 logging to `calls.log`.
struct FakeTools {
    dir: tempfile::TempDir,
}

impl FakeTools {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let site = root.join("site-packages");
        let torch = site.join("torch");
        for d in ["include", "lib"] {
            std::fs::create_dir_all(torch.join(d)).unwrap();
        }
        std::fs::write(torch.join("version.py"), "__version__ = '2.15.0+cu132'\n").unwrap();
        std::fs::create_dir_all(root.join("running")).unwrap();
        let probe = serde_json::json!({
            "cxx_std": 20, "version": "2.15.0+cu132", "cuda": "13.2", "cxx11_abi": true,
            "include_dirs": [torch.join("include")], "lib_dir": torch.join("lib"),
            "python_include": root.join("python-include"), "site_packages": site,
            "python_version": "3.11.0", "watch": [site],
        });
        executable(
            &root.join("python"),
            &format!("#!/bin/sh\ncat <<'EOF'\n{probe}\nEOF\n"),
        );
        std::fs::create_dir_all(root.join("cuda/bin")).unwrap();
        compiler(root, "c++", "fake-c++ 1.0", "pass 0");
        // nvcc: the first pass in its own slot, every other one with a token from the
        // jobserver named in MAKEFLAGS (given back when the pass ends), as nvcc 13 does.
        compiler(
            root,
            "cuda/bin/nvcc",
            "Cuda compilation tools, release 13.2, V13.2.1",
            r#"
js=$(echo "$MAKEFLAGS" | sed -n 's/.*--jobserver-auth=\([0-9]*,[0-9]*\).*/\1/p')
case " $* " in *" --jobserver "*) ;; *) js="" ;; esac
r=${js%,*}; w=${js#*,}; i=0; tokens=0
[ -n "$js" ] && echo "jobserver $(readlink /proc/$$/fd/$r) $(readlink /proc/$$/fd/$w)" >> "$log"
for g in $gencodes; do
  if [ $i -gt 0 ] && [ -n "$js" ]; then
    eval "dd bs=1 count=1 status=none <&$r >/dev/null"
    tokens=$((tokens + 1))
    ( pass $i; eval "printf + >&$w" ) &
  else
    pass $i &
  fi
  i=$((i + 1))
done
wait
echo "tokens $tokens" >> "$log"
"#,
        );
        FakeTools { dir }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `kbuild -C project build ARGS` with these tools and `envs`.
    fn build(&self, project: &Path, args: &[&str], envs: &[(&str, &str)]) -> Output {
        let mut cmd = bin();
        cmd.arg("-C").arg(project).arg("build").args(args);
        cmd.arg("--python").arg(self.root().join("python"));
        cmd.arg("--nvcc").arg(self.root().join("cuda/bin/nvcc"));
        cmd.env("CXX", self.root().join("c++"));
        // Costs shared through kbuild's cache stay inside the test.
        cmd.env("KBUILD_CACHE_DIR", self.root().join("cache"));
        for var in [
            "KBUILD_PYTHON",
            "VIRTUAL_ENV",
            "CUDA_HOME",
            "CUDA_PATH",
            "MAKEFLAGS",
            "KBUILD_JOBSERVER",
            "KBUILD_SCHEDULE",
            "KBUILD_NVCC_STEPS",
        ] {
            cmd.env_remove(var);
        }
        cmd.envs(envs.iter().copied());
        let out = run(&mut cmd);
        assert!(out.status.success(), "the build fails");
        out
    }

    /// The compile lines of the log (`<tool> pipes=<pipes> [<MAKEFLAGS>] <args…>`), and the
    /// nvcc's `jobserver <read end> <write end>` and `tokens N` lines; cleared.
    fn take_log(&self) -> (Vec<String>, Vec<String>) {
        let log = self.root().join("calls.log");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        std::fs::write(&log, "").unwrap();
        let (notes, calls) = text
            .lines()
            .map(str::to_string)
            .filter(|l| l.contains(" -c ") || l.starts_with("tokens") || l.starts_with("jobserver"))
            .partition(|l| l.starts_with("tokens") || l.starts_with("jobserver"));
        (calls, notes)
    }

    /// The most passes any pass saw running at once.
    fn peak(&self) -> usize {
        let text = std::fs::read_to_string(self.root().join("counts")).unwrap_or_default();
        text.split_whitespace()
            .map(|n| n.parse::<usize>().unwrap())
            .max()
            .unwrap_or(0)
    }
}

/// A compiler that answers kbuild's probes, logs `<name> <pipes> [<MAKEFLAGS>] <args>` for a
/// compile, runs `passes` (shell code seeing `$gencodes`) and writes `-o` and `-MF`.
fn compiler(root: &Path, name: &str, version: &str, passes: &str) {
    let path = root.join(name);
    let script = format!(
        r#"#!/bin/sh
running='{running}'; counts='{counts}'; log='{log}'
{PASS}
case "$1" in
  --version) echo '{version}'; exit 0 ;;
  --list-gpu-arch) printf 'compute_75\ncompute_80\ncompute_90\n'; exit 0 ;;
  -print-file-name=*) echo '{path}'; exit 0 ;;
esac
out=""; dep=""; src=""; prev=""; gencodes=""
for a in "$@"; do
  case "$prev" in
    -o) out="$a" ;;
    -MF) dep="$a" ;;
    -c) src="$a" ;;
    -gencode) gencodes="$gencodes $a" ;;
  esac
  prev="$a"
done
[ -z "$gencodes" ] && gencodes=host
if [ -n "$src" ]; then
  pipes
  echo "{short} pipes=$npipes [$MAKEFLAGS] $*" >> "$log"
  {passes}
  # A source that says so takes a second more (what the costs learn).
  grep -q kbuild-test-slow "$src" 2>/dev/null && sleep 1
fi
[ -n "$out" ] && echo "built from $src" > "$out"
[ -n "$dep" ] && echo "$out: $src" > "$dep"
exit 0
"#,
        running = root.join("running").display(),
        counts = root.join("counts").display(),
        log = root.join("calls.log").display(),
        path = path.display(),
        short = Path::new(name).file_name().unwrap().to_string_lossy(),
    );
    executable(&path, &script);
}

fn executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("JSON summary")
}

#[test]
fn with_kbuild_jobserver_nvcc_shares_the_builds_jobserver_and_compilers_never_outnumber_the_jobs() {
    let project = fixture("relu-v5");
    let tools = FakeTools::new();
    let out = tools.build(
        project.path(),
        &["--json", "-j", "2"],
        &[("KBUILD_JOBSERVER", "1")],
    );
    // How `--json` says the jobs ran (the machine's memory aside).
    let schedule = Redact::new().json(&json(&out)["schedule"], &["memory"]);
    insta::assert_json_snapshot!(schedule);

    let (calls, notes) = tools.take_log();
    let nvcc: Vec<&String> = calls.iter().filter(|c| c.starts_with("nvcc")).collect();
    assert_eq!(nvcc.len(), 1, "{calls:?}");
    // The jobserver's pipe, announced in MAKEFLAGS as make does, open in nvcc, and in no
    // other compiler.
    assert!(nvcc[0].contains(" [-j2 --jobserver-auth="), "{}", nvcc[0]);
    assert!(nvcc[0].contains(" --jobserver "), "{}", nvcc[0]);
    let [jobserver, tokens] = notes.as_slice() else {
        panic!("{notes:?}")
    };
    let pipe = jobserver.split(' ').nth(1).unwrap();
    assert!(
        pipe.starts_with("pipe:") && jobserver.ends_with(pipe),
        "{jobserver}"
    );
    assert!(nvcc[0].contains(pipe), "{}", nvcc[0]);
    let cxx: Vec<&String> = calls.iter().filter(|c| c.starts_with("c++")).collect();
    assert_eq!(cxx.len(), 3, "{calls:?}");
    for cxx in cxx {
        assert!(
            cxx.contains(" [] ") && !cxx.contains(pipe),
            "c++ sees the jobserver: {cxx}"
        );
    }
    // Three capabilities: the first pass in the nvcc's own slot, two with tokens.
    assert_eq!(tokens, "tokens 2");
    let peak = tools.peak();
    assert!((1..=2).contains(&peak), "{peak} passes ran at once at -j2");
}

#[test]
fn with_one_nvcc_per_unit_nvcc_gets_a_fixed_threads_share_and_no_pipe() {
    let project = fixture("relu-v5");
    let tools = FakeTools::new();
    let out = tools.build(
        project.path(),
        &["--json", "-j", "2"],
        &[("KBUILD_NVCC_STEPS", "0")],
    );
    let schedule = Redact::new().json(&json(&out)["schedule"], &["memory"]);
    insta::assert_json_snapshot!(schedule);
    let (calls, notes) = tools.take_log();
    let nvcc: Vec<&String> = calls.iter().filter(|c| c.starts_with("nvcc")).collect();
    assert_eq!(nvcc.len(), 1, "{calls:?}");
    assert!(nvcc[0].contains(" [] "), "{}", nvcc[0]);
    assert!(!nvcc[0].contains("--jobserver"), "{}", nvcc[0]);
    assert!(nvcc[0].contains("--threads "), "{}", nvcc[0]);
    assert_eq!(notes, ["tokens 0"]);
}

#[test]
fn by_default_kbuild_asks_nvcc_for_its_steps_and_compiles_with_one_nvcc_when_it_cannot_read_them() {
    let project = fixture("relu-v5");
    let tools = FakeTools::new();
    let out = tools.build(project.path(), &["--json", "-j", "2"], &[]);
    assert_eq!(json(&out)["schedule"]["nvcc"], "steps");
    forget_objects(project.path());
    let out = tools.build(project.path(), &["-j", "2", "-v", "--memory", "8G"], &[]);
    // This nvcc prints no plan for `--dryrun`: the unit compiles with one nvcc, and `-v` says
    // why. (The real nvcc's steps: tests/it/nvcc_steps.rs.)
    insta::assert_snapshot!(schedule_lines(&out));
    let (calls, _) = tools.take_log();
    let nvcc: Vec<&String> = calls.iter().filter(|c| c.starts_with("nvcc")).collect();
    assert_eq!(
        nvcc.len(),
        4,
        "two builds, a dryrun and a compile each: {calls:?}"
    );
    assert!(
        nvcc[0].contains("--dryrun --keep --keep-dir "),
        "{}",
        nvcc[0]
    );
    assert!(!nvcc[1].contains("--dryrun"), "{}", nvcc[1]);
    // The jobserver the steps would share is not handed to nvcc.
    assert!(
        nvcc[1].contains(" [] ") && nvcc[1].contains("--threads "),
        "{}",
        nvcc[1]
    );
}

/// What `-v` says about how the build's jobs run: the `Compiling` line, nvcc's mode and the
/// order, the memory budget, and why a unit does not run as nvcc's steps (each job's own
/// lines come in the order the jobs end, with times).
fn schedule_lines(out: &Output) -> String {
    let said = String::from_utf8_lossy(&out.stderr);
    let about_the_schedule = [
        "Compiling ",
        "jobs start ",
        "memory budget ",
        "compiles with one nvcc",
    ];
    said.lines()
        .filter(|l| about_the_schedule.iter().any(|what| l.contains(what)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The labels in the order the build started them (`-v` prints `start <label>`).
fn started(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("Verbose start "))
        // Compile units only (links are reported as units too).
        .filter(|label| label.ends_with(']'))
        .map(str::to_string)
        .collect()
}

/// Forget every object, keeping `costs.json`: the next build compiles everything again.
fn forget_objects(project: &Path) {
    let work = project.join("build/.kbuild");
    std::fs::remove_dir_all(work.join("cache")).unwrap();
    std::fs::remove_file(work.join("fresh.json")).unwrap();
}

#[test]
fn the_next_build_starts_the_jobs_the_last_one_timed_longest_first() {
    let project = fixture("relu-v5");
    let root = project.path();
    let tools = FakeTools::new();
    // One job at a time: the start order is the schedule.
    let args = ["-v", "-j", "1"];
    let no_js = [("KBUILD_JOBSERVER", "0")];
    let planned = started(&tools.build(root, &args, &no_js));
    assert_eq!(planned.len(), 4, "{planned:?}");

    let costs_path = root.join("build/.kbuild/costs.json");
    let mut costs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&costs_path).unwrap()).unwrap();
    let seconds = costs["seconds"].as_object_mut().unwrap();
    let objects: Vec<String> = seconds.keys().cloned().collect();
    assert_eq!(
        objects.len(),
        4,
        "one time per compiled object: {seconds:?}"
    );
    assert!(objects.iter().all(|o| o.ends_with(".o")), "{objects:?}");

    // Costs rising in plan order, the first job's left out here and in kbuild's cache: it is
    // new to the schedule.
    std::fs::remove_dir_all(tools.root().join("cache/costs")).unwrap();
    let object_of = |label: &str| {
        let stem = label.split(' ').next().unwrap().replace('/', "__");
        let variant = if label.ends_with("[cpu]") {
            "cpu"
        } else {
            "cu"
        };
        objects
            .iter()
            .position(|o| o.contains(&stem) && o.contains(variant))
            .unwrap_or_else(|| panic!("no object for `{label}` in {objects:?}"))
    };
    let mut recorded = BTreeMap::new();
    for (rank, label) in planned.iter().enumerate().skip(1) {
        recorded.insert(objects[object_of(label)].clone(), rank as f64);
    }
    costs["seconds"] = serde_json::to_value(&recorded).unwrap();
    std::fs::write(&costs_path, serde_json::to_vec(&costs).unwrap()).unwrap();
    forget_objects(root);
    let longest_first = started(&tools.build(root, &args, &no_js));
    let expected: Vec<String> = std::iter::once(planned[0].clone())
        .chain(planned[1..].iter().rev().cloned())
        .collect();
    assert_eq!(longest_first, expected);

    forget_objects(root);
    let fifo = [("KBUILD_JOBSERVER", "0"), ("KBUILD_SCHEDULE", "fifo")];
    assert_eq!(
        started(&tools.build(root, &args, &fifo)),
        plan_order(&tools, root)
    );
}

/// The compile units in plan order (`--dry-run` lists them so).
fn plan_order(tools: &FakeTools, project: &Path) -> Vec<String> {
    let out = tools.build(project, &["--dry-run"], &[]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("  compile "))
        .map(str::to_string)
        .collect()
}

/// The source of the unit `label` (`relu_cuda/relu.cu [cuda]`) in `project`.
fn source_of(project: &Path, label: &str) -> PathBuf {
    project.join(label.split(' ').next().unwrap())
}

/// Append `n` explicit template instantiations to `source`: a unit that costs more to compile.
fn instantiate(source: &Path, n: usize) {
    let mut text = std::fs::read_to_string(source).unwrap();
    for i in 0..n {
        text.push_str(&format!("template void kbuild_test_heavy<{i}>(float*);\n"));
    }
    std::fs::write(source, text).unwrap();
}

#[test]
fn a_first_build_starts_the_unit_predicted_longest_first_even_when_it_comes_last() {
    let project = fixture("relu-v5");
    let root = project.path();
    let tools = FakeTools::new();
    let planned = plan_order(&tools, root);
    assert_eq!(planned.len(), 4, "{planned:?}");
    let last = planned.last().unwrap().clone();
    instantiate(&source_of(root, &last), 1000);
    let first_build = started(&tools.build(root, &["-v", "-j", "1"], &[]));
    assert_eq!(first_build[0], last, "{first_build:?}");
    assert_eq!(
        plan_order(&tools, root),
        planned,
        "the plan keeps its order"
    );
}

#[test]
fn costs_a_build_timed_are_known_to_a_second_work_dir_through_kbuilds_cache() {
    let (a, b) = (fixture("relu-v5"), fixture("relu-v5"));
    let tools = FakeTools::new();
    let planned = plan_order(&tools, a.path());
    // A unit of its own source, not predicted the longest, is in fact the slowest (the fake
    // compiler sleeps on it).
    let args = ["-v", "-j", "1"];
    let predicted = started(&tools.build(a.path(), &args, &[]));
    let cheapest = "relu_cpu/relu_cpu.cpp [cpu]".to_string();
    assert_ne!(predicted[0], cheapest, "{predicted:?}");
    for project in [&a, &b] {
        let source = source_of(project.path(), &cheapest);
        let text = std::fs::read_to_string(&source).unwrap();
        std::fs::write(&source, format!("{text}// kbuild-test-slow\n")).unwrap();
    }
    forget_objects(a.path());
    std::fs::remove_file(a.path().join("build/.kbuild/costs.json")).unwrap();
    tools.build(a.path(), &args, &[]);
    // A fresh work dir of the same project knows the times from the cache.
    let second = started(&tools.build(b.path(), &args, &[]));
    assert_eq!(
        second[0], cheapest,
        "planned {planned:?}, started {second:?}"
    );
    // With a cache of its own it only has the prediction.
    forget_objects(b.path());
    std::fs::remove_file(b.path().join("build/.kbuild/costs.json")).unwrap();
    let own_cache = tools.root().join("other-cache");
    let own = [("KBUILD_CACHE_DIR", own_cache.to_str().unwrap())];
    let own = started(&tools.build(b.path(), &args, &own));
    assert_ne!(own[0], cheapest, "{own:?}");
}

#[test]
fn a_unit_left_to_the_tail_gets_split_compile_and_the_dry_run_and_v_say_why() {
    let project = fixture("relu-v5");
    let root = project.path();
    let tools = FakeTools::new();
    instantiate(&root.join("relu_cuda/relu.cu"), 100);
    let out = tools.build(root, &["--dry-run", "-j", "8"], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    let cuda = text
        .split("  compile ")
        .find(|unit| unit.starts_with("relu_cuda/relu.cu"))
        .unwrap_or_else(|| panic!("{text}"));
    // Split for cicc only (`-Xcicc=-split-compile=2`: ptxas writes its options into the cubin,
    // issue #38), and why: in the tail, predicted from its source.
    let redact = Redact::new()
        .path(root, "[project]")
        .path(tools.root(), "[tools]");
    let compile = cuda.split("\n  link").next().unwrap_or(cuda);
    insta::assert_snapshot!(redact.text(compile));
    // Nothing else is split, and the C++ units never are.
    assert_eq!(text.matches("split-compile=").count(), 2, "{text}");

    let out = tools.build(root, &["--dry-run", "--json", "-j", "8"], &[]);
    let plans = json(&out);
    let jobs = plans["variants"].as_array().unwrap().iter();
    let split: Vec<&serde_json::Value> = jobs
        .flat_map(|v| v["compile"].as_array().unwrap())
        .filter(|j| !j["split"].is_null())
        .collect();
    assert_eq!(split.len(), 1, "{plans}");
    assert_eq!(split[0]["label"], "relu_cuda/relu.cu [cuda]");
    assert_eq!(split[0]["split"]["threads"], 2);

    let out = tools.build(root, &["-v", "-j", "8"], &[]);
    let said = String::from_utf8_lossy(&out.stderr);
    let split: Vec<&str> = said.lines().filter(|l| l.contains("split `")).collect();
    insta::assert_snapshot!(split.join("\n"));
    // The fake nvcc cannot say its steps: it runs as one nvcc, with the threads it has slots
    // for (at most the two asked for).
    let (calls, _) = tools.take_log();
    let nvcc: Vec<&String> = calls
        .iter()
        .filter(|c| c.starts_with("nvcc") && !c.contains("--dryrun"))
        .collect();
    assert_eq!(nvcc.len(), 1, "{calls:?}");
    assert!(
        nvcc[0].contains("-Xcicc=-split-compile=2") || nvcc[0].contains("-Xcicc=-split-compile=1"),
        "{}",
        nvcc[0]
    );
}

/// Leaf compiler processes (no drivers, no shells) below the nvcc processes compiling
/// sources under `root`.
/// nvcc's device passes (cicc, ptxas) running now for sources under `root`.
fn device_passes_under(root: &Path) -> usize {
    let mut parent: Vec<(u32, u32, String)> = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        let mut rest = stat[close + 1..].split_whitespace();
        let state = rest.next().unwrap_or("Z");
        let ppid = rest.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if state != "Z" {
            parent.push((pid, ppid, comm));
        }
    }
    let root = root.to_string_lossy();
    let mut tree: Vec<u32> = parent
        .iter()
        .filter(|(pid, _, comm)| {
            comm == "nvcc"
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(root.as_ref()))
        })
        .map(|(pid, _, _)| *pid)
        .collect();
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(
            parent
                .iter()
                .filter(|(_, pp, _)| *pp == p)
                .map(|(c, _, _)| *c),
        );
        i += 1;
    }
    parent
        .iter()
        .filter(|(pid, _, comm)| tree.contains(pid) && matches!(comm.as_str(), "cicc" | "ptxas"))
        .count()
}

fn cuda_jobs(root: &Path, nvcc: &Path) -> Vec<CompileJob> {
    ["a.cu", "b.cu", "c.cu"]
        .iter()
        .map(|name| CompileJob {
            lang: Lang::Cuda,
            gencodes: vec![
                gencode(8, 0, false),
                gencode(8, 6, false),
                gencode(9, 0, false),
            ],
            compiler_id: "nvcc".to_string(),
            ..job(root, nvcc, name)
        })
        .collect()
}

fn elf_list(cuobjdump: &Path, object: &Path) -> String {
    let out = Command::new(cuobjdump)
        .arg("--list-elf")
        .arg(object)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// nvcc 13.0-13.2 find a jobserver they are given (`--jobserver`) and then run a unit's device
/// passes one at a time, with tokens free in the pipe: that is why kbuild passes it only when
/// `KBUILD_JOBSERVER=1` asks. With a fixed `--threads` they run at once. If a later nvcc runs
/// them at once under the jobserver too, this test fails: the lever can then be on by default.
#[test]
fn real_nvcc_runs_device_passes_at_once_with_threads_but_one_at_a_time_under_a_jobserver() {
    let nvcc: PathBuf = crate::compile_real::find_nvcc()
        .expect("no nvcc: run scripts/setup (it installs cuda-toolkit[nvcc] into .venv) or set KBUILD_TEST_NVCC");
    let kernel = "template <int N> __device__ float f(float x) { float s = 0;\n\
                  #pragma unroll\n for (int i = 0; i < N; i++) s += __sinf(x * i) * __cosf(s + i);\n\
                  return s; }\n__global__ void k(float* o) { o[threadIdx.x] = f<600>(o[threadIdx.x]); }\n";
    // The cubins the object holds, with a fixed `--threads` and with the jobserver.
    let mut elf: Vec<String> = Vec::new();
    for jobserver in [false, true] {
        // Sampling sees overlap a loaded machine makes (a pass reaped late, nvcc's own timing):
        // a behaviour shows in the first of three tries that is not blurred by it. A later nvcc
        // that runs the passes at once under the jobserver fails all three.
        let mut means = Vec::new();
        for _ in 0..3 {
            let (mean, list) = device_passes_at_once(kernel, &nvcc, jobserver);
            means.push(mean);
            let settled = if jobserver { mean < 1.3 } else { mean > 1.5 };
            if settled {
                for sm in ["sm_80", "sm_86", "sm_90"] {
                    assert_eq!(list.matches(&format!("{sm}.cubin")).count(), 1, "{list}");
                }
                assert_eq!(list.lines().count(), 3, "{list}");
                elf.push(list);
                break;
            }
        }
        assert_eq!(
            elf.len(),
            usize::from(jobserver) + 1,
            "device passes at once in three tries ({}): {means:.2?}",
            if jobserver {
                "under the jobserver, want < 1.3"
            } else {
                "with --threads 3, want > 1.5"
            }
        );
    }
    assert_eq!(elf[0], elf[1]);
}

/// A C++ unit of a templated project: the same file but for `size`, how many functions it
/// instantiates (which a source scan does not see), and the digits of its namespace.
fn sized_unit(index: usize, size: usize) -> String {
    format!(
        "#include <utility>\nconstexpr int kSize = {size:4};\nnamespace unit_{index} {{\n\
         template <int I> long f(long x) {{ for (int i = 0; i < 64; ++i) x = x * 31 + I * i; \
         return x; }}\n\
         template <int... I> long all(long x, std::integer_sequence<int, I...>) {{ \
         return (f<I>(x) + ...); }}\n\
         long run(long x) {{ return all(x, std::make_integer_sequence<int, kSize>{{}}); }}\n}}\n"
    )
}

#[test]
fn once_a_unit_compiled_its_waiting_siblings_start_by_the_constant_their_cost_follows() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let gxx = PathBuf::from("g++");
    let sizes = [4, 8, 64, 16, 32];
    let jobs: Vec<CompileJob> = (sizes.iter().enumerate())
        .map(|(i, &size)| {
            let name = format!("unit_{i}.cpp");
            write(root, &name, &sized_unit(i, size));
            job(root, &gxx, &name)
        })
        .collect();
    // One at a time, in source order as planned (every unit predicted alike).
    let settings = CompileSettings::local(root.join("cache"), 1, NvccMode::Steps);
    let recorder = Recorder::default();
    let result = compile_all(&jobs, &settings, &recorder);
    let said = recorder.take();
    assert_eq!(result.unwrap().compiled.len(), 5, "{said:?}");
    let started: Vec<&str> = said
        .iter()
        .filter_map(|l| l.strip_prefix("start "))
        .collect();
    assert_eq!(
        started,
        [
            "unit_0.cpp",
            "unit_2.cpp",
            "unit_4.cpp",
            "unit_3.cpp",
            "unit_1.cpp"
        ],
        "{said:?}"
    );
    let reranked = said
        .iter()
        .find(|l| l.contains("re-ranked"))
        .expect("-v says so");
    assert!(
        reranked.contains(
            "re-ranked 4 waiting units like `unit_0.cpp` by a number their costs follow (1 of \
             them measured): `unit_2.cpp` next"
        ) && reranked.contains("(`constexpr int kSize =   64;`)"),
        "{reranked}"
    );
}

/// Compile `kernel` as one unit for three capabilities (nvcc's `--threads 3`, or under a
/// 4-slot jobserver) and sample how many device passes run at once: the mean over the samples
/// where any runs, and the cubins the object holds.
fn device_passes_at_once(kernel: &str, nvcc: &Path, jobserver: bool) -> (f64, String) {
    let cuobjdump = nvcc.with_file_name("cuobjdump");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.cu", kernel);
    let jobs: Vec<CompileJob> = cuda_jobs(root, nvcc).into_iter().take(1).collect();
    // One unit at -j1 of a 4-slot jobserver: 3 tokens stay free for its device passes.
    let mode = if jobserver {
        NvccMode::Jobserver
    } else {
        NvccMode::Threads
    };
    let settings = CompileSettings {
        jobserver: jobserver.then(|| Arc::new(Jobserver::new(4).unwrap())),
        // Three device-pass threads: one per capability.
        runs: jobs.iter().map(|j| RunChoice::of(j, mode, 3)).collect(),
        ..CompileSettings::local(root.join("cache"), 1, mode)
    };
    let done = AtomicBool::new(false);
    let recorder = Recorder::default();
    // Device passes running at each sample while any runs: a pass starting as the last
    // one ends can show 2 for a moment even when nvcc runs them one at a time.
    let busy: Vec<usize> = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut busy = Vec::new();
            while !done.load(Ordering::SeqCst) {
                let n = device_passes_under(root);
                if n > 0 {
                    busy.push(n);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            busy
        });
        let summary = compile_all(&jobs, &settings, &recorder);
        done.store(true, Ordering::SeqCst);
        assert_eq!(summary.unwrap().compiled.len(), 1);
        sampler.join().unwrap()
    });
    // nvcc says so on stderr when it finds no jobserver; kbuild passes that on.
    assert!(
        !recorder
            .take()
            .iter()
            .any(|l| l.contains("no compatible jobserver")),
        "nvcc did not find the jobserver"
    );
    let mean = busy.iter().sum::<usize>() as f64 / busy.len().max(1) as f64;
    (mean, elf_list(&cuobjdump, &jobs[0].object))
}

//! Memory-aware scheduling (issue #21 item 3). Under a real memory cgroup: four real g++ units
//! of ~170 MB each, `-j4`, in a cgroup limited to 480 MB. kbuild finds the limit, runs units
//! it never measured one at a time, learns their peaks (`memory.json`) and then runs two at
//! once; the same build told it has 64 GiB starts all four and the kernel's OOM killer stops it.
//! On a first build, nvcc's steps reserve by the size of what they read, not 3 GiB each.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::kbuild::{kbuild, run};

/// The cgroup's limit: above two heavy units learned (2 × 170 MB + an eighth), below four.
const LIMIT: u64 = 480 << 20;

/// Elements of each heavy unit's table: g++ needs ~170 MB to compile a million.
const ELEMENTS: usize = 1_000_000;

const BUILD_TOML: &str = r#"[general]
name = "memtest"
version = 1
edition = 5
license = "apache-2.0"
backends = ["cpu"]

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.heavy]
backend = "cpu"
depends = []
src = ["heavy/t0.cpp", "heavy/t1.cpp", "heavy/t2.cpp", "heavy/t3.cpp"]
"#;

/// A memory cgroup made for one command below the one this test runs in (v1 or v2), removed
/// on drop.
struct MemCgroup {
    dir: PathBuf,
    v2: bool,
}

impl MemCgroup {
    /// A child of this process's memory cgroup limited to `limit` bytes; `Err(why)` when this
    /// machine has no memory cgroup this test may create.
    fn new(limit: u64, name: &str) -> Result<Self, String> {
        let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
        let root = Path::new("/sys/fs/cgroup");
        let (parent, v2) = own
            .lines()
            .find_map(|l| {
                let mut f = l.splitn(3, ':');
                let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
                let path = path.trim_start_matches('/');
                if ctl.split(',').any(|c| c == "memory") {
                    Some((root.join("memory").join(path), false))
                } else if ctl.is_empty() && root.join(path).join("memory.max").exists() {
                    Some((root.join(path), true))
                } else {
                    None
                }
            })
            .ok_or("no memory controller in /proc/self/cgroup")?;
        let dir = parent.join(format!("kbuild-test-{name}-{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let cg = MemCgroup { dir, v2 };
        let file = if v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        };
        std::fs::write(cg.dir.join(file), limit.to_string())
            .map_err(|e| format!("write {file}: {e}"))?;
        Ok(cg)
    }

    /// `cmd` run inside the cgroup: a shell joins it, then execs the command.
    fn run(&self, cmd: &Command) -> Output {
        let mut inside = Command::new("sh");
        inside
            .arg("-c")
            .arg(r#"echo $$ > "$0/cgroup.procs" && exec "$@""#)
            .arg(&self.dir)
            .arg(cmd.get_program())
            .args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => inside.env(k, v),
                None => inside.env_remove(k),
            };
        }
        run(&mut inside)
    }

    /// How many processes the kernel's OOM killer killed in this cgroup.
    fn oom_kills(&self) -> u64 {
        let (file, key) = if self.v2 {
            ("memory.events", "oom_kill ")
        } else {
            ("memory.oom_control", "oom_kill ")
        };
        let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Write the four heavy units, `tag` making each source differ from the last build's.
fn write_heavy(root: &Path, elements: usize, tag: &str) {
    std::fs::create_dir_all(root.join("heavy")).unwrap();
    for k in 0..4 {
        let values: Vec<String> = (0..elements).map(|i| (i * 7 % 1000).to_string()).collect();
        let text = format!(
            "// {tag}\nextern const int table{k}[] = {{{}}};\n",
            values.join(",")
        );
        std::fs::write(root.join(format!("heavy/t{k}.cpp")), text).unwrap();
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn build(root: &Path, extra: &[&str]) -> Command {
    let mut cmd = kbuild(root);
    // A fixed op namespace: the heavy sources change, the binding unit stays compiled.
    cmd.args(["build", "-v", "-j4", "--unique-id", "memtest"])
        .args(extra);
    cmd.env_remove("KBUILD_MEMORY");
    // A cache of its own: what another run learned of these units must not be known here.
    cmd.env("KBUILD_CACHE_DIR", root.join("kbuild-cache"));
    cmd
}

#[test]
fn a_build_under_a_memory_limit_runs_fewer_units_at_once_instead_of_being_killed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("torch-ext/memtest")).unwrap();
    std::fs::write(root.join("build.toml"), BUILD_TOML).unwrap();
    std::fs::write(root.join("torch-ext/memtest/__init__.py"), "").unwrap();
    std::fs::write(
        root.join("torch-ext/torch_binding.cpp"),
        "int memtest_binding() { return 0; }\n",
    )
    .unwrap();
    // Outside the cgroup first, with tiny tables: torch's probe alone needs ~650 MB, and its
    // answers are remembered (toolchain.json) so the builds below start no Python. Its
    // peaks are forgotten: the heavy units below are new work, never measured.
    write_heavy(root, 1, "tiny");
    assert!(run(&mut build(root, &[])).status.success());
    let record = root.join("build/.kbuild/memory.json");
    std::fs::remove_file(&record).unwrap();

    write_heavy(root, ELEMENTS, "first");
    let cgroup = match MemCgroup::new(LIMIT, "learn") {
        Ok(cg) => cg,
        Err(why) => {
            eprintln!("SKIPPED: no memory cgroup can be made here: {why}");
            return;
        }
    };
    let out = cgroup.run(&build(root, &[]));
    let said = stderr(&out);
    assert!(out.status.success(), "the limited build completes");
    assert_eq!(cgroup.oom_kills(), 0);
    assert!(
        said.contains("(the cgroup's limit less its usage)"),
        "{said}"
    );
    assert_eq!(
        said.matches("it ran alone").count(),
        4,
        "never measured: 3 GiB each"
    );
    let learned: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&record).unwrap()).expect("memory.json is JSON");
    let peaks = learned["peak_bytes"].as_object().expect("peaks by object");
    for k in 0..4 {
        let unit = format!("/obj/heavy__t{k}.cpp.o");
        let (key, peak) = peaks
            .iter()
            .find(|(key, _)| key.ends_with(&unit))
            .expect("a peak per heavy unit");
        let peak = peak.as_u64().unwrap();
        assert!(
            (100 << 20..LIMIT / 2).contains(&peak),
            "{key}: {peak} bytes"
        );
    }
    drop(cgroup);

    // Learned: two units fit at once, and none is larger than the budget.
    write_heavy(root, ELEMENTS, "second");
    let cgroup = MemCgroup::new(LIMIT, "learned").unwrap();
    let out = cgroup.run(&build(root, &[]));
    assert!(
        out.status.success(),
        "the build with learned peaks completes"
    );
    assert_eq!(cgroup.oom_kills(), 0);
    assert!(!stderr(&out).contains("it ran alone"));
    drop(cgroup);

    // Told it has 64 GiB, kbuild starts all four: more than the cgroup holds.
    write_heavy(root, ELEMENTS, "third");
    let cgroup = MemCgroup::new(LIMIT, "unlimited").unwrap();
    let out = cgroup.run(&build(root, &["--memory", "64G"]));
    assert!(
        !out.status.success(),
        "four heavy units at once exceed {LIMIT} bytes"
    );
    assert!(cgroup.oom_kills() >= 1, "{}", stderr(&out));
}

/// On a first build nothing is measured: each of nvcc's steps reserves what the size of the
/// files it reads suggests (a small unit's `cicc` about 64 MB more than 160 times its
/// preprocessed source) instead of 3 GiB, so under a 1 GiB budget they run beside each other
/// and none runs alone. Real nvcc; the gate records what each reached.
#[test]
fn a_first_build_reserves_for_nvccs_steps_by_what_they_read_and_fits_a_small_budget() {
    use kbuild::compile::{CompileSettings, compile_all};
    use kbuild::plan::{CompileJob, Lang};
    use kbuild::report::Recorder;
    use kbuild::schedule::memory::{MemoryBudget, MemoryGate};
    use kbuild::schedule::{NvccMode, RunChoice};
    use std::sync::Arc;

    use crate::common::fake_cc::{gencode, job, write};

    let nvcc = crate::nvcc_steps::nvcc();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "k.cu",
        "__global__ void k(float* o) { o[threadIdx.x] = __sinf(o[threadIdx.x]); }\n",
    );
    let unit = CompileJob {
        lang: Lang::Cuda,
        gencodes: vec![gencode(8, 0, false), gencode(9, 0, false)],
        compiler_id: "nvcc".to_string(),
        ..job(root, &nvcc, "k.cu")
    };
    let run = RunChoice {
        critical: true,
        ..RunChoice::of(&unit, NvccMode::Steps, 2)
    };
    let gate = Arc::new(MemoryGate::load(MemoryBudget::given(1 << 30), root));
    let settings = CompileSettings {
        memory: Some(Arc::clone(&gate)),
        runs: vec![run],
        ..CompileSettings::local(root.join("cache"), 2, NvccMode::Steps)
    };
    let recorder = Recorder::default();
    let result = compile_all(std::slice::from_ref(&unit), &settings, &recorder);
    let said = recorder.take();
    assert_eq!(result.unwrap().compiled, ["k.cu"], "{said:?}");
    assert_eq!(gate.ran_alone(), Vec::<(String, u64)>::new());
    gate.save().unwrap();
    let record: serde_json::Value = serde_json::from_slice(
        &std::fs::read(kbuild::schedule::memory::record_path(root)).unwrap(),
    )
    .unwrap();
    let steps: Vec<&String> = record["peak_bytes"].as_object().unwrap().keys().collect();
    for step in [
        "cicc compute_80",
        "cicc compute_90",
        "ptxas sm_90",
        "cudafe++",
    ] {
        assert!(
            steps.iter().any(|k| k.ends_with(&format!("#{step}"))),
            "{step} not learned: {steps:?}"
        );
    }
}

/// The peaks a build learns also go to kbuild's cache, by what each unit compiles: a fresh
/// work directory of the same sources (here another `--out-dir`, as after `kbuild clean` or in
/// another checkout) starts from them. Under a 1 GiB budget the first build sizes both C++
/// units by preprocessing them (never measured); the second, in a new work directory, knows
/// their peaks and preprocesses nothing.
#[test]
fn a_fresh_work_directory_starts_from_the_peaks_kbuilds_cache_learned() {
    use crate::common::kbuild::fixture;

    let project = fixture("relu-v5");
    let root = project.path();
    let cache = tempfile::tempdir().unwrap();
    let build = |out: &str| {
        let mut cmd = kbuild(root);
        cmd.args(["build", "-v", "-j2", "--backend", "cpu", "--memory", "1G"])
            .arg("--out-dir")
            .arg(root.join(out))
            .env("KBUILD_CACHE_DIR", cache.path())
            .env_remove("KBUILD_MEMORY");
        let out = run(&mut cmd);
        assert!(out.status.success(), "the build failed");
        stderr(&out)
    };
    let first = build("out-a");
    assert_eq!(first.matches("was never measured").count(), 2, "{first}");
    assert!(cache.path().join("memory/v1.json").exists());
    let second = build("out-b");
    assert_eq!(second.matches("was never measured").count(), 0, "{second}");
    assert_eq!(second.matches("it ran alone").count(), 0, "{second}");
}

/// A C++ unit is one compiler process whose input (torch's headers) exists only inside it, so
/// never measured it reserved a conservative 3 GiB and, under a budget smaller than that, ran
/// alone. Where that size could hold others back (here 2 jobs of 3 GiB against 1 GiB) kbuild
/// preprocesses the unit first and reserves the host compile's factor over its size: both
/// units of the relu fixture fit, none runs alone, and each guess holds the peak then learned.
#[test]
fn a_first_build_sizes_a_cxx_unit_by_its_preprocessed_source_and_runs_none_alone() {
    use crate::common::kbuild::fixture;

    let project = fixture("relu-v5");
    let root = project.path();
    let mut cmd = kbuild(root);
    cmd.args(["build", "-v", "-j2", "--backend", "cpu", "--memory", "1G"])
        .env("KBUILD_CACHE_DIR", root.join("kbuild-cache"))
        .env_remove("KBUILD_MEMORY");
    let out = run(&mut cmd);
    let said = stderr(&out);
    assert!(out.status.success(), "{said}");
    assert_eq!(said.matches("it ran alone").count(), 0, "{said}");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("build/.kbuild/memory.json")).unwrap())
            .unwrap();
    let peaks = record["peak_bytes"].as_object().unwrap();
    let mut guessed = 0;
    for line in said.lines().filter(|l| l.contains("was never measured")) {
        // `<label>` was never measured: preprocessed to 8 MiB, it reserves 949 MiB (...)
        let label = line.split('`').nth(1).unwrap();
        let source = label.split(' ').next().unwrap().replace('/', "__");
        let reserved = line.split("it reserves ").nth(1).unwrap();
        let mib: f64 = reserved.split(' ').next().unwrap().parse().unwrap();
        assert!(reserved.split(' ').nth(1) == Some("MiB"), "{line}");
        let (key, peak) = peaks
            .iter()
            .find(|(k, _)| k.ends_with(&format!("{source}.o")))
            .unwrap_or_else(|| panic!("no peak learned for {label}: {peaks:?}"));
        let peak = peak.as_u64().unwrap() as f64 / (1 << 20) as f64;
        assert!(
            peak <= mib,
            "{key}: reached {peak:.0} MiB, reserved {mib} MiB"
        );
        assert!(
            peaks.contains_key(&format!("{key}#preprocess")),
            "the preprocessor ran under the gate: {peaks:?}"
        );
        guessed += 1;
    }
    assert_eq!(guessed, 2, "both C++ units were sized: {said}");
}

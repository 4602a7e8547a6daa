//! Concurrent publishes of one branch: every variant the branch ends with holds the files of
//! exactly one run that reported success, and the Hub copy passes `kbuild check`. Three racers,
//! two of them the same build, all succeed: a run that lost reads the new head and its files
//! as one, and runs of one build never pull a shared staging branch from under each other.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha1::Digest as _;

use crate::common::hub::{Hub, Run, TOKEN};
use crate::common::kbuild::{bin, run};
use crate::common::variant::{CPU_VARIANT, VariantSpec, redigest, write_variant};

const REPO: &str = "org/relu";
const OTHER: &str = "torch-cpu";
const RUNS: usize = 8;
const ROUNDS: usize = 20;

/// Git blob id of `content`, as the Hub's tree lists a regular file.
/// How the Hub names `content`: binary files (the Hub's rule: a NUL byte) go through LFS and
/// are known by their sha256, text files by their git blob id.
fn content_id(content: &[u8]) -> String {
    if content.contains(&0) {
        format!("sha256:{}", hex::encode(sha2::Sha256::digest(content)))
    } else {
        format!("git:{}", git_oid(content))
    }
}

fn git_oid(content: &[u8]) -> String {
    let mut h = sha1::Sha1::new();
    h.update(format!("blob {}\0", content.len()));
    h.update(content);
    hex::encode(h.finalize())
}

/// A real (libc-only) shared object, so that the Hub copy can pass `kbuild check`.
fn extension(dir: &Path) -> Vec<u8> {
    let src = dir.join("ext.c");
    std::fs::write(&src, "int kbuild_race_probe(void) { return 1; }\n").unwrap();
    let so = dir.join("ext.so");
    let out = run(std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&src));
    assert!(out.status.success(), "cc failed");
    std::fs::read(so).unwrap()
}

/// One run's build: its variants, each with an `__init__.py` that names the run, so that the
/// same variant from two runs differs (two commits of the same project).
struct Build {
    _project: tempfile::TempDir,
    dir: PathBuf,
    /// `build/<variant>/<file>` -> git oid, per variant.
    files: BTreeMap<String, BTreeMap<String, String>>,
}

fn build(tag: &str, variants: &[&str], so: &[u8]) -> Build {
    let project = tempfile::tempdir().unwrap();
    let dir = project.path().join("build");
    let mut files = BTreeMap::new();
    for &name in variants {
        let id = if name == CPU_VARIANT {
            "_relu_cpu_abc1234"
        } else {
            "_relu_cpu_fff0000"
        };
        let spec = VariantSpec {
            dir_name: name,
            id,
            so: Some(so.to_vec()),
            ..VariantSpec::default()
        };
        let variant = write_variant(&dir, &spec);
        let init = variant.join("__init__.py");
        let text = std::fs::read_to_string(&init).unwrap();
        std::fs::write(&init, format!("{text}# built by run {tag}\n")).unwrap();
        redigest(&variant);
        files.insert(name.to_string(), local_files(&variant, name));
    }
    Build {
        _project: project,
        dir,
        files,
    }
}

fn local_files(variant: &Path, name: &str) -> BTreeMap<String, String> {
    std::fs::read_dir(variant)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| {
            let path = format!("build/{name}/{}", e.file_name().to_string_lossy());
            (path, content_id(&std::fs::read(e.path()).unwrap()))
        })
        .collect()
}

/// `v1`'s files under `build/`, per variant.
fn branch_variants(hub: &Hub) -> BTreeMap<String, BTreeMap<String, String>> {
    let (status, body) = hub.request(
        "GET",
        "/api/kernels/org/relu/tree/v1/build?recursive=true",
        b"",
    );
    assert_eq!(status, 200, "{body}");
    let tree: Value = serde_json::from_str(&body).unwrap();
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for e in tree
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "file")
    {
        let path = e["path"].as_str().unwrap().to_string();
        let variant = path.split('/').nth(1).unwrap().to_string();
        // An LFS file is known by its content's sha256, a regular one by its git blob id.
        let oid = match e["lfs"]["oid"].as_str() {
            Some(sha256) => format!("sha256:{sha256}"),
            None => format!("git:{}", e["oid"].as_str().unwrap()),
        };
        out.entry(variant).or_default().insert(path, oid);
    }
    out
}

/// Which variants run `i` publishes: one, the other, or both.
fn variants_of(i: usize) -> &'static [&'static str] {
    match i % 3 {
        0 => &[CPU_VARIANT],
        1 => &[OTHER],
        _ => &[CPU_VARIANT, OTHER],
    }
}

fn round(hub: &Hub, r: usize, so: &[u8]) {
    let builds: Vec<Build> = (0..RUNS)
        .map(|i| build(&format!("{r}-{i}"), variants_of(i), so))
        .collect();
    let runs: Vec<Run> = std::thread::scope(|scope| {
        let handles: Vec<_> = builds
            .iter()
            .enumerate()
            .map(|(i, b)| {
                scope.spawn(move || {
                    // Odd runs make several commits: staged, then landed.
                    let batch = if i % 2 == 1 { "2" } else { "100" };
                    let env = [("HF_TOKEN", TOKEN), ("KBUILD_PUBLISH_BATCH_FILES", batch)];
                    hub.publish_with(&b.dir, &["--repo", REPO], &env)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, run) in runs.iter().enumerate() {
        run.assert_no_token();
        assert!(
            !run.stderr.contains("panicked"),
            "run {r}-{i}: {}",
            run.stderr
        );
        if !run.ok {
            // A run that lost for good says so and what to do.
            assert!(
                run.stderr.contains("error: ") && run.stderr.contains("hint: "),
                "run {r}-{i} failed without a clear message:\n{}",
                run.stderr
            );
        }
    }
    assert!(runs.iter().any(|r| r.ok), "no run of round {r} succeeded");
    for (variant, on_branch) in branch_variants(hub) {
        let owners: Vec<usize> = (0..RUNS)
            .filter(|&i| runs[i].ok && builds[i].files.get(&variant) == Some(&on_branch))
            .collect();
        assert_eq!(
            owners.len(),
            1,
            "round {r}: `{variant}` on v1 is not the files of one successful run: {on_branch:#?}\n\
             stderr of the runs:\n{}",
            runs.iter()
                .map(|r| r.stderr.as_str())
                .collect::<Vec<_>>()
                .join("\n---\n")
        );
    }
}

#[test]
fn concurrent_publishes_of_one_branch_leave_each_variant_whole_from_one_successful_run() {
    let hub = Hub::start(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let so = extension(tmp.path());
    for r in 0..ROUNDS {
        round(&hub, r, &so);
    }
    assert_eq!(branch_variants(&hub).len(), 2, "both variants end up on v1");
    // The Hub copy, as `kernels` downloads it, passes `kbuild check`.
    let copy = tempfile::tempdir().unwrap();
    hub.python(&format!(
        "import huggingface_hub as h; \
         h.snapshot_download('org/relu', repo_type='kernel', revision='v1', local_dir={:?})",
        copy.path()
    ));
    let check = run(bin().arg("check").arg(copy.path().join("build")));
    assert!(
        check.status.success(),
        "kbuild check of the Hub copy failed:\n{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}

/// One round of three racers on `v1`: two runs of the same build (staged in several commits,
/// so both want the same staging branch) and one of another; every run must succeed.
fn clean_round(hub: &Hub, r: usize, so: &[u8]) {
    let same = build(&format!("same-{r}"), &[CPU_VARIANT, OTHER], so);
    let twin = Build {
        _project: tempfile::tempdir().unwrap(),
        dir: PathBuf::new(),
        files: same.files.clone(),
    };
    let twin_dir = twin._project.path().join("build");
    crate::common::kbuild::copy_dir(&same.dir, &twin_dir);
    let other = build(&format!("other-{r}"), variants_of(r), so);
    let builds = [&same.dir, &twin_dir, &other.dir];
    let runs: Vec<Run> = std::thread::scope(|scope| {
        let handles: Vec<_> = (builds.iter().enumerate())
            .map(|(i, dir)| {
                scope.spawn(move || {
                    let batch = if i < 2 { "2" } else { ["2", "100"][r % 2] };
                    let env = [("HF_TOKEN", TOKEN), ("KBUILD_PUBLISH_BATCH_FILES", batch)];
                    hub.publish_with(dir, &["--repo", REPO], &env)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let failed: Vec<String> = (runs.iter().enumerate())
        .filter(|(_, run)| !run.ok)
        .map(|(i, run)| format!("racer {i}:\n{}", run.stderr))
        .collect();
    assert!(failed.is_empty(), "round {r}: {}", failed.join("\n---\n"));
    let files = [&same.files, &same.files, &other.files];
    for (variant, on_branch) in branch_variants(hub) {
        let whole = files.iter().any(|f| f.get(&variant) == Some(&on_branch));
        assert!(
            whole,
            "round {r}: `{variant}` on v1 is mixed: {on_branch:#?}"
        );
    }
}

#[test]
fn three_racers_two_of_one_build_all_succeed_for_twenty_rounds_and_never_mix_a_branch() {
    let hub = Hub::start(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let so = extension(tmp.path());
    for r in 0..ROUNDS {
        clean_round(&hub, r, &so);
    }
    // No staging branch is left behind.
    let (_, refs) = hub.request("GET", "/api/kernels/org/relu/refs", b"");
    assert!(!refs.contains("kbuild-staging-"), "{refs}");
}

//! `depends = ["cutlass_3_9"]`, a release PyPI lacks: kbuild clones its tag (`v3.9.2`) into its
//! cache, as kernel-builder's Nix does. `KBUILD_CUTLASS_GIT` points the clone at a real local
//! repository made here, so no network is needed.

use std::path::Path;
use std::process::Command;

use crate::common::kbuild::{fixture, kbuild, python_ok, run, stdout_json};

/// What the fixture's kernel adds: CUTLASS_VERSION of 3.9.2 plus the marker header's 0.25.
const EXPECTED_ADD: f32 = 392.25;

/// `git` with no user or system configuration in the way.
fn git(dir: &Path, args: &[&str]) {
    let out = run(Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args([
            "-c",
            "user.name=kbuild test",
            "-c",
            "user.email=test@kbuild",
        ])
        .args(args));
    assert!(out.status.success(), "git {args:?}");
}

/// A git repository at `<dir>/cutlass` whose tag `tag` holds a CUTLASS tree of `major.minor`
/// (a `version.h` and the marker header the fixture includes); returns its `file://` URL.
fn cutlass_repo(dir: &Path, tag: &str, (major, minor): (u32, u32)) -> String {
    let repo = dir.join("cutlass");
    let include = repo.join("include/cutlass");
    std::fs::create_dir_all(&include).unwrap();
    std::fs::write(
        include.join("version.h"),
        format!(
            "#pragma once\n#define CUTLASS_MAJOR {major}\n#define CUTLASS_MINOR {minor}\n\
             #define CUTLASS_PATCH 2\n\
             #define CUTLASS_VERSION ((CUTLASS_MAJOR)*100 + (CUTLASS_MINOR)*10 + CUTLASS_PATCH)\n"
        ),
    )
    .unwrap();
    std::fs::write(
        include.join("kbuild_marker.h"),
        "#pragma once\nnamespace cutlass {\ninline constexpr float kbuild_marker = 0.25f;\n}\n",
    )
    .unwrap();
    git(&repo, &["init", "--quiet"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "--quiet", "-m", "cutlass"]);
    git(&repo, &["tag", tag]);
    format!("file://{}", repo.display())
}

/// `kbuild` with only the dependency settings given here (none inherited from the shell).
fn kbuild_with(project: &Path, cache: &Path, git_url: &str) -> Command {
    let mut cmd = kbuild(project);
    cmd.env("KBUILD_CACHE_DIR", cache)
        .env("KBUILD_CUTLASS_GIT", git_url)
        .env_remove("CUTLASS_HOME")
        .env_remove("KBUILD_OFFLINE");
    cmd
}

/// The entries of `<cache>/cutlass` (staging directories included), sorted.
fn cache_entries(cache: &Path) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(cache.join("cutlass")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = dir
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// stderr with this run's temporary paths named, for a snapshot.
fn redacted(out: &std::process::Output, paths: &[(&Path, &str)]) -> String {
    let mut text = String::from_utf8_lossy(&out.stderr).into_owned();
    for (path, name) in paths {
        text = text.replace(&path.display().to_string(), name);
    }
    without_staging_suffix(&text)
}

/// `.fetch-XXXXXX` (the staging directory's random suffix) as `.fetch-*`.
fn without_staging_suffix(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(".fetch-") {
        out.push_str(&rest[..at]);
        out.push_str(".fetch-*");
        rest = rest[at + ".fetch-".len()..].trim_start_matches(|c: char| c.is_alphanumeric());
    }
    out.push_str(rest);
    out
}

#[test]
fn a_dry_run_plans_the_clone_of_the_release_tag_and_writes_nothing() {
    let project = fixture("cutlass-git");
    let repos = tempfile::tempdir().unwrap();
    let url = cutlass_repo(repos.path(), "v3.9.2", (3, 9));
    let cache = tempfile::tempdir().unwrap();
    let entry = cache.path().join("cutlass/3.9.2");

    let out = run(kbuild_with(project.path(), cache.path(), &url).args(["build", "--dry-run"]));
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "fetch git clone --depth 1 --branch v3.9.2 {url} into {}",
            entry.display()
        )),
        "{text}"
    );

    let out =
        run(kbuild_with(project.path(), cache.path(), &url).args(["build", "--dry-run", "--json"]));
    assert!(out.status.success());
    let plan = stdout_json(&out);
    assert_eq!(
        plan["fetches"],
        serde_json::json!([{
            "dependency": "cutlass_3_9",
            "source": "git",
            "url": url,
            "tag": "v3.9.2",
            "into": entry.display().to_string(),
        }])
    );
    let kernel = plan["variants"][0]["compile"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["label"].as_str().unwrap().starts_with("marker_cpu/"))
        .unwrap()
        .clone();
    assert!(
        kernel["system_include_dirs"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!(
                entry.join("include").display().to_string()
            )),
        "{kernel}"
    );
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 0);
}

#[test]
fn a_release_pypi_lacks_is_cloned_into_the_cache_and_compiled_into_a_kernel_that_loads() {
    let project = fixture("cutlass-git");
    let root = project.path();
    let repos = tempfile::tempdir().unwrap();
    let url = cutlass_repo(repos.path(), "v3.9.2", (3, 9));
    let cache = tempfile::tempdir().unwrap();

    let out = run(kbuild_with(root, cache.path(), &url).args(["build", "--backend", "cpu"]));
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("git clone --depth 1 --branch v3.9.2 {url}")),
        "{stderr}"
    );
    let entry = cache.path().join("cutlass/3.9.2");
    assert!(entry.join("include/cutlass/kbuild_marker.h").is_file());
    assert!(
        !entry.join(".git").exists(),
        "the cache kept the clone's .git"
    );
    assert_eq!(cache_entries(cache.path()), ["3.9.2"]);

    let code = format!(
        r#"
import pathlib, torch, kernels
k = kernels.get_local_kernel(pathlib.Path({root:?}), backend="cpu")
x = torch.randn(4, 3)
torch.testing.assert_close(k.add_cutlass_marker(x), x + {EXPECTED_ADD}, rtol=0, atol=0)
print("ok")
"#,
        root = root.display().to_string()
    );
    assert_eq!(python_ok(&code, &[]).trim(), "ok");

    // The cache entry now answers: a second project build needs no repository at all.
    let again = run(kbuild_with(root, cache.path(), "file:///nowhere").args([
        "build",
        "--dry-run",
        "--json",
    ]));
    assert!(again.status.success());
    assert_eq!(stdout_json(&again)["fetches"], serde_json::json!([]));
}

/// Build the fixture against a repository whose only tag is `tag`, holding CUTLASS `release`:
/// the build must fail and leave kbuild's cache empty. Returns what it printed, redacted.
fn failed_fetch_output(tag: &str, release: (u32, u32)) -> String {
    let project = fixture("cutlass-git");
    let repos = tempfile::tempdir().unwrap();
    let url = cutlass_repo(repos.path(), tag, release);
    let cache = tempfile::tempdir().unwrap();

    let out =
        run(kbuild_with(project.path(), cache.path(), &url).args(["build", "--backend", "cpu"]));
    assert!(!out.status.success());
    assert_eq!(cache_entries(cache.path()), Vec::<String>::new());
    redacted(
        &out,
        &[
            (repos.path(), "<repos>"),
            (cache.path(), "<cache>"),
            (project.path(), "<project>"),
        ],
    )
}

#[test]
fn a_tag_the_repository_lacks_fails_at_the_depends_entry_and_leaves_the_cache_clean() {
    insta::assert_snapshot!(failed_fetch_output("v3.9.1", (3, 9)));
}

#[test]
fn a_tag_holding_another_release_is_refused_and_leaves_the_cache_clean() {
    insta::assert_snapshot!(failed_fetch_output("v3.9.2", (3, 8)));
}

#[test]
fn offline_a_release_pypi_lacks_is_an_error_naming_the_clone_to_run() {
    let project = fixture("cutlass-git");
    let root = project.path();
    let cache = tempfile::tempdir().unwrap();

    let out = run(
        kbuild_with(root, cache.path(), "https://mirror.example/cutlass")
            .env("KBUILD_OFFLINE", "1")
            .args(["build", "--dry-run"]),
    );
    assert!(!out.status.success());
    assert!(!root.join("build").exists(), "a failed build wrote build/");
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 0);
    insta::assert_snapshot!(redacted(
        &out,
        &[(cache.path(), "<cache>"), (root, "<project>")]
    ));
}

//! Publish uploads regular files only, from inside the directories it publishes: a symbolic link
//! (in a variant, in `benchmarks/`, or as either directory itself) or a FIFO is an error that
//! names the path, raised before anything is sent to the Hub, with or without `--dry-run`.

use std::path::{Path, PathBuf};

use crate::common::hub::{Hub, Run};
use crate::common::variant::{CPU_VARIANT, project_with_variant, redigest};
use crate::publish_cli::redacted;

const REPO: &str = "org/relu";
/// What the fake token file outside the project holds; it must never reach the Hub or the output.
const SECRET: &str = "hf_notForUploadSecretInAFileOutsideTheProject";

/// A directory outside the project with a fake token file in it.
fn outside() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, SECRET).unwrap();
    (dir, token)
}

fn symlink(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

/// Publish and publish `--dry-run`: both must fail with the same error, and the server must have
/// seen no request at all (so certainly no commit). Returns that error output, with `dirs`
/// redacted, for a snapshot: it must name the path, say what it is, and give a hint.
fn refused(build: &Path, dirs: &[(&Path, &str)]) -> String {
    let mut outputs = Vec::new();
    for extra in [&[][..], &["--dry-run"][..]] {
        let hub = Hub::start(&[]);
        let mut args = vec!["--repo", REPO];
        args.extend_from_slice(extra);
        let run: Run = hub.publish(build, &args);
        assert!(!run.ok, "publish {extra:?} succeeded:\n{}", run.stderr);
        assert!(
            !run.stderr.contains(SECRET) && !run.stdout.contains(SECRET),
            "the linked file's content leaked into the output"
        );
        run.assert_no_token();
        assert_eq!(hub.commits_made(), 0);
        assert_eq!(hub.log(), Vec::<String>::new(), "requests were sent");
        assert_eq!(run.stdout, "", "{extra:?}");
        outputs.push(redacted(&run.stderr, &hub, dirs));
    }
    assert_eq!(outputs[0], outputs[1], "publish and --dry-run refuse alike");
    outputs.swap_remove(0)
}

#[test]
fn a_variant_file_linking_outside_is_refused_even_with_its_hash_in_metadata() {
    let (outside_dir, token) = outside();
    let (project, build) = project_with_variant();
    let variant = build.join(CPU_VARIANT);
    let link = variant.join("passwd");
    symlink(&token, &link);
    // kernels-data's hash follows the link: the digest now "covers" it.
    redigest(&variant);
    let metadata = std::fs::read_to_string(variant.join("metadata.json")).unwrap();
    assert!(metadata.contains("\"passwd\""), "{metadata}");
    // Names the path, says it is a symbolic link, and gives a hint.
    insta::assert_snapshot!(refused(
        &build,
        &[
            (project.path(), "[project]"),
            (outside_dir.path(), "[outside]")
        ]
    ));
}

#[test]
fn a_variant_init_py_linking_outside_is_refused() {
    let (outside_dir, _token) = outside();
    let (project, build) = project_with_variant();
    let variant = build.join(CPU_VARIANT);
    let init = variant.join("__init__.py");
    let real = outside_dir.path().join("__init__.py");
    std::fs::rename(&init, &real).unwrap();
    symlink(&real, &init);
    redigest(&variant);
    // Names the path, says it is a symbolic link, and gives a hint.
    insta::assert_snapshot!(refused(
        &build,
        &[
            (project.path(), "[project]"),
            (outside_dir.path(), "[outside]")
        ]
    ));
}

#[test]
fn a_variant_directory_that_is_a_link_is_refused() {
    let (project, build) = project_with_variant();
    let elsewhere = tempfile::tempdir().unwrap();
    let real = elsewhere.path().join("variant");
    std::fs::rename(build.join(CPU_VARIANT), &real).unwrap();
    let link = build.join(CPU_VARIANT);
    symlink(&real, &link);
    // Names the path, says it is a symbolic link, and gives a hint.
    insta::assert_snapshot!(refused(
        &build,
        &[
            (project.path(), "[project]"),
            (elsewhere.path(), "[elsewhere]")
        ]
    ));
}

#[test]
fn a_fifo_in_a_variant_is_refused_without_blocking() {
    let (project, build) = project_with_variant();
    let variant = build.join(CPU_VARIANT);
    let fifo = variant.join("pipe");
    let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    // Names the path, says it is a FIFO, and gives a hint.
    insta::assert_snapshot!(refused(&build, &[(project.path(), "[project]")]));
}

#[test]
fn a_benchmark_file_linking_to_a_token_is_refused() {
    let (outside_dir, token) = outside();
    let (project, build) = project_with_variant();
    let bench = project.path().join("benchmarks");
    std::fs::create_dir_all(&bench).unwrap();
    std::fs::write(bench.join("benchmark_relu.py"), "print('bench')\n").unwrap();
    let link = bench.join("notes.txt");
    symlink(&token, &link);
    // Names the path, says it is a symbolic link, and gives a hint.
    insta::assert_snapshot!(refused(
        &build,
        &[
            (project.path(), "[project]"),
            (outside_dir.path(), "[outside]")
        ]
    ));
}

#[test]
fn a_linked_directory_inside_benchmarks_is_refused() {
    let (outside_dir, _token) = outside();
    let (project, build) = project_with_variant();
    let bench = project.path().join("benchmarks");
    std::fs::create_dir_all(&bench).unwrap();
    std::fs::write(bench.join("benchmark_relu.py"), "print('bench')\n").unwrap();
    let link = bench.join("data");
    symlink(outside_dir.path(), &link);
    // Names the path, says it is a symbolic link, and gives a hint.
    insta::assert_snapshot!(refused(
        &build,
        &[
            (project.path(), "[project]"),
            (outside_dir.path(), "[outside]")
        ]
    ));
}

#[test]
fn a_benchmarks_directory_that_is_a_link_is_refused() {
    let (outside_dir, _token) = outside();
    let (project, build) = project_with_variant();
    let link = project.path().join("benchmarks");
    symlink(outside_dir.path(), &link);
    // Names the path, says it is a symbolic link, and gives a hint.
    insta::assert_snapshot!(refused(
        &build,
        &[
            (project.path(), "[project]"),
            (outside_dir.path(), "[outside]")
        ]
    ));
}

#[test]
fn hidden_entries_and_caches_in_benchmarks_are_neither_uploaded_nor_followed() {
    let (outside_dir, _token) = outside();
    let (project, build) = project_with_variant();
    let bench = project.path().join("benchmarks");
    std::fs::create_dir_all(bench.join("__pycache__")).unwrap();
    std::fs::write(bench.join("benchmark_relu.py"), "print('bench')\n").unwrap();
    symlink(outside_dir.path(), &bench.join(".venv"));
    let hub = Hub::start(&[]);
    let s = hub
        .publish(&build, &["--repo", REPO, "--json"])
        .success()
        .json();
    let added: Vec<&str> = s["added"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .filter(|p| p.starts_with("benchmarks/"))
        .collect();
    assert_eq!(added, ["benchmarks/benchmark_relu.py"]);
}

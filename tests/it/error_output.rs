//! What a user reads when kbuild fails: the message, each cause once, then the hint.

use std::path::Path;

use crate::common::kbuild::{fixture, kbuild, python, python_ok, run};
use crate::common::redact::Redact;

/// stderr of `kbuild ARGS…`, which must fail.
fn failing(args: &[&str]) -> String {
    let out = run(crate::common::kbuild::bin()
        .args(args)
        .env_remove("VIRTUAL_ENV"));
    assert!(!out.status.success());
    String::from_utf8(out.stderr).expect("stderr is UTF-8")
}

#[test]
fn build_in_a_missing_directory_names_it_once() {
    insta::assert_snapshot!(failing(&["build", "-C", "/proc/nope"]));
}

#[test]
fn unwritable_output_directory_prints_its_cause_once() {
    // A pure-Python project: the failure is the output directory, not a missing toolchain.
    let project = fixture("silu-noarch");
    let root = project.path().to_str().unwrap();
    let stderr = failing(&["build", "-C", root, "--out-dir", "/proc/nope"]);
    assert_eq!(
        stderr.matches("No such file or directory").count(),
        1,
        "{stderr}"
    );
    insta::assert_snapshot!(stderr);
}

/// What `kbuild -C <project> ARGS…` (the test Python) shows, which must fail: exit status,
/// stdout and stderr, with the project, the test Python's paths and `extra` redacted.
fn failing_in(project: &Path, args: &[&str], extra: Redact) -> String {
    // The C locale: the compiler's quotes are ASCII whatever the machine's locale.
    let out = run(kbuild(project).args(args).env("LC_ALL", "C"));
    assert!(!out.status.success(), "`kbuild {args:?}` succeeded");
    extra.python().path(project, "[project]").output(&out)
}

#[test]
fn a_python_that_does_not_exist_is_named_with_where_it_came_from() {
    let project = fixture("relu-v5");
    insta::assert_snapshot!(failing_in(
        project.path(),
        &["build", "--python", "/nonexistent/python"],
        Redact::new()
    ));
}

#[test]
fn a_python_whose_torch_probe_prints_nothing_is_refused() {
    let project = fixture("relu-v5");
    insta::assert_snapshot!(failing_in(
        project.path(),
        &["list-variants", "--python", "/bin/true"],
        Redact::new()
    ));
}

#[test]
fn a_torch_version_without_a_toolchain_says_how_to_install_it() {
    let project = fixture("relu-v5");
    let cache = tempfile::tempdir().unwrap();
    let torch = python_ok("import torch; print(torch.__version__)", &[]);
    let out = run(kbuild(project.path())
        .args(["build", "--torch", "2.99"])
        .env("KBUILD_CACHE_DIR", cache.path()));
    assert!(!out.status.success());
    insta::assert_snapshot!(
        Redact::new()
            .python()
            .text_of(torch.trim(), "[torch-version]")
            .output(&out)
    );
}

#[test]
fn an_unknown_variant_lists_the_variants_built_here() {
    let project = fixture("relu-v5");
    insta::assert_snapshot!(failing_in(
        project.path(),
        &["build", "--variant", "torch215-cxx11-cu999-x86_64-linux"],
        Redact::new()
    ));
}

#[test]
fn an_unknown_backend_quotes_the_backends_of_build_toml() {
    let project = fixture("relu-v5");
    insta::assert_snapshot!(failing_in(
        project.path(),
        &["build", "--backend", "rocm"],
        Redact::new()
    ));
}

#[test]
fn an_out_dir_inside_a_source_directory_is_refused_before_building() {
    let project = fixture("relu-v5");
    let inside = project.path().join("relu_cpu/out");
    insta::assert_snapshot!(failing_in(
        project.path(),
        &[
            "build",
            "--backend",
            "cpu",
            "--out-dir",
            inside.to_str().unwrap()
        ],
        Redact::new()
    ));
    assert!(!inside.exists());
}

/// The relu fixture with a syntax error in its cpu source, and the arguments of a quiet
/// one-job cpu build (no progress lines or timings; the failing unit is the same each run).
fn broken_cpu_source() -> (tempfile::TempDir, [&'static str; 8]) {
    let project = fixture("relu-v5");
    std::fs::write(
        project.path().join("relu_cpu/relu_cpu.cpp"),
        "int relu_cpu( {\n",
    )
    .unwrap();
    let args = [
        "build",
        "-q",
        "--backend",
        "cpu",
        "-j",
        "1",
        "--unique-id",
        "snap",
    ];
    (project, args)
}

/// The C++ compiler the plan of `args` names (redacted from the snapshots).
fn planned_compiler(root: &Path, args: &[&str]) -> String {
    let plan = crate::common::kbuild::stdout_json(&run(kbuild(root)
        .args(args)
        .args(["--dry-run", "--json"])));
    plan["variants"][0]["compile"][0]["compiler"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_compile_error_shows_the_diagnostics_first_then_could_not_compile_and_no_command() {
    let (project, args) = broken_cpu_source();
    let root = project.path();
    let compiler = planned_compiler(root, &args);
    let shown = failing_in(root, &args, Redact::new().text_of(&compiler, "[c++]"));
    assert!(!shown.contains("[c++]"), "the command is shown without -v");
    insta::assert_snapshot!(shown);
}

#[test]
fn a_compile_error_with_verbose_adds_the_command_that_reproduces_it() {
    let (project, args) = broken_cpu_source();
    let root = project.path();
    let compiler = planned_compiler(root, &args);
    let out = run(kbuild(root)
        .args(args.iter().filter(|a| **a != "-q"))
        .arg("-v")
        .env("LC_ALL", "C"));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = stderr
        .lines()
        .skip_while(|l| !l.starts_with("error:"))
        .collect();
    assert_eq!(
        tail[0],
        "error: could not compile `relu_cpu/relu_cpu.cpp` (cpu)"
    );
    assert!(
        tail[1].starts_with(&format!("  caused by: `{compiler} -c "))
            && tail[1].ends_with("` exited with status 1"),
        "{stderr}"
    );
}

#[test]
fn a_compile_error_under_json_lists_each_diagnostic_with_file_line_and_column() {
    let (project, args) = broken_cpu_source();
    let root = project.path();
    let out = run(kbuild(root).args(args).arg("--json").env("LC_ALL", "C"));
    assert!(!out.status.success());
    // The command (with the machine's paths) is in `causes` and `compiler.command`.
    let report = Redact::new()
        .path(root, "[project]")
        .stdout_json(&out, &["command", "causes"]);
    insta::assert_json_snapshot!(report["error"]);
}

#[test]
fn a_compile_error_keeps_the_compilers_colour_when_colour_is_forced() {
    let (project, args) = broken_cpu_source();
    let root = project.path();
    let out = run(kbuild(root)
        .args(args)
        .env("CLICOLOR_FORCE", "1")
        .env_remove("NO_COLOR"));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    // gcc's bold red `error:` in its diagnostics, and kbuild's own.
    assert!(stderr.contains("\x1b[01;31m\x1b[Kerror: "), "{stderr:?}");
    assert!(
        stderr.contains("\x1b[1;31merror\x1b[0m: could not compile"),
        "{stderr:?}"
    );
    let plain = run(kbuild(root).args(args).env("NO_COLOR", "1"));
    assert!(!String::from_utf8_lossy(&plain.stderr).contains('\x1b'));
}

#[test]
fn an_nvcc_error_gets_a_hint_drawn_from_what_nvcc_printed() {
    let project = fixture("relu-v5");
    let root = project.path();
    // bf16 without its header: nvcc's front end says the type is undefined.
    std::fs::write(
        root.join("relu_cuda/relu.cu"),
        "__global__ void k(__nv_bfloat16 *x) {}\n",
    )
    .unwrap();
    let args = [
        "build",
        "-q",
        "--backend",
        "cuda",
        "--cuda-capabilities",
        "8.0",
        "-j",
        "1",
        "--unique-id",
        "snap",
    ];
    let out = run(kbuild(root).args(args).env("LC_ALL", "C"));
    assert!(!out.status.success());
    let stderr = Redact::new().path(root, "[project]").stderr(&out);
    let from_error: String = stderr
        .lines()
        .skip_while(|l| !l.contains("): error"))
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!(from_error);
}

#[test]
fn pack_and_check_without_a_build_say_to_build_first() {
    let project = fixture("relu-v5");
    let root = project.path();
    insta::assert_snapshot!(
        "pack_without_build_dir",
        failing_in(root, &["pack"], Redact::new())
    );
    insta::assert_snapshot!(
        "check_without_build_dir",
        failing_in(root, &["check"], Redact::new())
    );
    std::fs::create_dir(root.join("build")).unwrap();
    insta::assert_snapshot!(
        "pack_with_an_empty_build_dir",
        failing_in(root, &["pack"], Redact::new())
    );
    insta::assert_snapshot!(
        "check_with_an_empty_build_dir",
        failing_in(root, &["check"], Redact::new())
    );
}

#[test]
fn removing_a_toolchain_that_is_not_installed_lists_the_installed_ones() {
    let project = fixture("relu-v5");
    let cache = tempfile::tempdir().unwrap();
    let out = run(kbuild(project.path())
        .args(["toolchain", "remove", "torch2.99-cu130"])
        .env("KBUILD_CACHE_DIR", cache.path()));
    assert!(!out.status.success());
    insta::assert_snapshot!(Redact::new().output(&out));
}

#[test]
fn an_unknown_option_is_a_usage_error_with_exit_code_2() {
    let out = run(crate::common::kbuild::bin().args(["build", "--frobnicate"]));
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!(Redact::new().output(&out));
}

/// stdout of `kbuild ARGS…`, which must fail, parsed as JSON.
fn failing_json(args: &[&str]) -> (serde_json::Value, String) {
    let out = run(crate::common::kbuild::bin()
        .args(args)
        .env_remove("VIRTUAL_ENV"));
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    let json = serde_json::from_str(&stdout).expect("stdout is JSON");
    (json, stdout)
}

#[test]
fn json_failure_prints_the_error_its_causes_and_hint_on_stdout() {
    let project = fixture("silu-noarch");
    let root = project.path().to_str().unwrap();
    let (_, stdout) = failing_json(&["build", "-C", root, "--out-dir", "/proc/nope", "--json"]);
    insta::assert_snapshot!(stdout);
}

#[test]
fn every_json_command_reports_its_failure_on_stdout() {
    for args in [
        &["build", "--json"][..],
        &["wheel", "--json"],
        &["list-variants", "--json"],
        &["check-config", "--json"],
        &["pack", "--json"],
        &["publish", "--dry-run", "--json"],
        &["check", "--json"],
    ] {
        let mut args = args.to_vec();
        args.extend(["-C", "/proc/nope"]);
        let (report, _) = failing_json(&args);
        let error = &report["error"];
        assert!(error["message"].is_string(), "{args:?}: {report}");
        assert!(error["causes"].is_array(), "{args:?}: {report}");
    }
}

#[test]
fn check_of_a_missing_path_says_it_does_not_exist_and_what_path_may_be() {
    let project = fixture("silu-noarch");
    let root = project.path().to_str().unwrap();
    let stderr = failing(&["check", "-C", root, "nonexist"]);
    insta::assert_snapshot!(stderr);
}

#[test]
fn check_of_a_directory_of_artifacts_points_at_one_of_them_not_at_build_dir() {
    let project = fixture("silu-noarch");
    let root = project.path();
    assert!(run(kbuild(root).args(["wheel"])).status.success());
    assert!(run(kbuild(root).args(["pack"])).status.success());
    let out = run(kbuild(root).arg("check").arg(root.join("dist")));
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr)
        .unwrap()
        .replace(&root.display().to_string(), "[project]");
    assert!(!stderr.contains("--build-dir"), "{stderr}");
    insta::assert_snapshot!(stderr);
}

#[test]
fn a_locked_toolchain_that_is_not_installed_hints_plain_toolchain_install() {
    let project = fixture("relu-v5");
    let root = project.path();
    let cache = tempfile::tempdir().unwrap();
    std::fs::write(
        root.join("kbuild.lock"),
        "version = 1\n\n[[toolchain]]\nname = \"torch2.14-cpu\"\ntorch = \"2.14\"\n\
         compute = \"cpu\"\nrequested = [\"torch==2.14.*\"]\npackages = [\"torch==2.14.0\"]\n",
    )
    .unwrap();
    let out = run(kbuild(root)
        .args(["build", "--dry-run"])
        .env("KBUILD_CACHE_DIR", cache.path()));
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr)
        .unwrap()
        .replace(&python().display().to_string(), "[python]");
    let torch = torch_found(&stderr);
    insta::assert_snapshot!(stderr.replace(&torch, "[torch]"));
}

/// The version after "has torch " in `text` (the test Python's torch).
fn torch_found(text: &str) -> String {
    let start = text.find("has torch ").expect("names the torch found") + "has torch ".len();
    text[start..].split_whitespace().next().unwrap().to_string()
}

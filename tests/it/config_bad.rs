//! Bad build.toml files: `kbuild check-config` and `kbuild build` both fail with the same
//! `build.toml:LINE:COL: <message>` and `hint:`, and leave `build/` exactly as it was.
//!
//! Each case writes a small project into a temp dir. `@@` in a case's build.toml marks where the
//! error must point; it is removed before the file is written. The whole stderr is a snapshot
//! named after the case.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::SystemTime;

use crate::common::redact::Redact;

/// `[general]` and `[torch]` of a valid project; cases append kernels or replace it.
const HEAD: &str = r#"[general]
name = "ok-kernel"
version = 1
license = "apache-2.0"
backends = ["cuda", "cpu"]

[torch]
src = ["torch-ext/torch_binding.cpp"]
"#;

/// A valid kernel table to append after `HEAD`.
const RELU: &str = r#"
[kernel.relu]
backend = "cuda"
depends = ["torch"]
src = ["kernels/relu.cu"]
"#;

struct Case {
    /// The test's name, which names its snapshot.
    name: &'static str,
    toml: String,
    /// Extra changes to the project tree before running.
    setup: fn(&Path),
}

fn no_setup(_: &Path) {}

/// The files of a valid project named `ok-kernel`.
fn write_project(dir: &Path, toml: &str) {
    let files = [
        (
            "torch-ext/torch_binding.cpp",
            "#include \"registration.h\"\n",
        ),
        ("torch-ext/ok_kernel/__init__.py", ""),
        ("kernels/relu.cu", "__global__ void relu() {}\n"),
        ("kernels/relu_cpu.cpp", "void relu_cpu() {}\n"),
        ("include/relu.h", "#pragma once\n"),
        ("build/sentinel.txt", "previous build output\n"),
    ];
    for (path, text) in files {
        let p = dir.join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    fs::write(dir.join("build.toml"), toml).unwrap();
}

/// (line, column) of the `@@` marker, and the text without it.
fn locate_marker(toml: &str) -> ((usize, usize), String) {
    let at = toml
        .find("@@")
        .expect("case marks the error position with @@");
    let before = &toml[..at];
    let line = before.matches('\n').count() + 1;
    let col = before[before.rfind('\n').map_or(0, |i| i + 1)..]
        .chars()
        .count()
        + 1;
    ((line, col), toml.replacen("@@", "", 1))
}

/// Every path under `build/` with its contents and modification time.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                stack.push(e.path());
            }
            let data = if meta.is_file() {
                fs::read(e.path()).unwrap()
            } else {
                Vec::new()
            };
            out.push((e.path(), data, meta.modified().unwrap()));
        }
    }
    out.sort();
    out
}

fn kbuild(project: &Path, cwd: &Path, args: &[&str]) -> Output {
    crate::common::kbuild::bin()
        .arg("-C")
        .arg(project)
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn run_case(case: Case) {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("proj");
    let cwd = tmp.path().join("cwd");
    fs::create_dir_all(&cwd).unwrap();
    let ((line, col), toml) = locate_marker(&case.toml);
    write_project(&project, &toml);
    (case.setup)(&project);
    let before = snapshot(&project.join("build"));
    let expected_at = format!("error: [proj]/build.toml:{line}:{col}: ");
    let redact = Redact::new()
        .path(&project, "[proj]")
        .path(tmp.path(), "[tmp]");

    let mut first_stderr: Option<String> = None;
    for args in [&["check-config"][..], &["build"][..]] {
        let out = kbuild(&project, &cwd, args);
        let stderr = redact.stderr(&out);
        assert!(
            !out.status.success(),
            "`kbuild {args:?}` succeeded on a bad build.toml:\n{toml}"
        );
        assert_eq!(out.status.code(), Some(1), "`kbuild {args:?}`: {stderr}");
        assert!(
            !stderr.contains("panicked"),
            "`kbuild {args:?}` panicked: {stderr}"
        );
        assert!(
            stderr.starts_with(&expected_at),
            "`kbuild {args:?}`: expected the error at `{expected_at}`, got:\n{stderr}"
        );
        assert!(
            stderr.lines().any(|l| l.starts_with("  hint: ")),
            "no `hint:` line in: {stderr}"
        );
        match &first_stderr {
            None => {
                insta::assert_snapshot!(case.name, stderr);
                first_stderr = Some(stderr);
            }
            Some(first) => assert_eq!(
                &stderr, first,
                "`kbuild build` and `kbuild check-config` report it differently"
            ),
        }
        assert!(out.stdout.is_empty(), "stdout should be empty on error");
        assert_eq!(
            snapshot(&project.join("build")),
            before,
            "`kbuild {args:?}` changed build/"
        );
        assert_eq!(
            fs::read_dir(&cwd).unwrap().count(),
            0,
            "files created in cwd"
        );
    }
}

macro_rules! bad_config {
    ($name:ident, $toml:expr $(, $setup:expr)? $(,)?) => {
        #[test]
        fn $name() {
            #[allow(unused_mut, unused_assignments)]
            let mut setup: fn(&Path) = no_setup;
            $(setup = $setup;)?
            run_case(Case {
                name: stringify!($name),
                toml: $toml.to_string(),
                setup,
            });
        }
    };
}

bad_config!(
    unknown_key_in_kernel_suggests_the_closest_key,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = [\"kernels/relu.cu\"]\n@@cuda-flag = [\"-O3\"]\n"
    ),
);

bad_config!(
    unknown_top_level_table_suggests_kernel,
    format!("{HEAD}\n[@@kernels.relu]\nbackend = \"cuda\"\n"),
);

bad_config!(
    src_written_as_a_string_is_a_type_error,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = @@\"kernels/relu.cu\"\n"
    ),
);

bad_config!(
    empty_kernel_src_is_rejected,
    format!("{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = @@[]\n"),
);

bad_config!(
    missing_source_file_is_named_with_a_suggestion,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = [@@\"kernels/rleu.cu\"]\n"
    ),
);

bad_config!(
    source_in_a_missing_directory_is_reported,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = [\"kernels/relu.cu\", @@\"kernels/x/x.cu\"]\n"
    ),
);

bad_config!(
    absolute_source_path_is_rejected,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = [@@\"/etc/relu.cu\"]\n"
    ),
);

bad_config!(
    parent_dir_escaping_the_root_is_rejected,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = [@@\"kernels/../../outside.cu\"]\n"
    ),
);

bad_config!(
    symlink_leading_out_of_the_root_is_rejected,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = [@@\"kernels/linked.cu\"]\n"
    ),
    |dir: &Path| {
        let outside = dir.parent().unwrap().join("outside.cu");
        fs::write(&outside, "// outside\n").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("kernels/linked.cu")).unwrap();
    },
);

bad_config!(
    include_directory_that_does_not_exist_is_rejected,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = [\"kernels/relu.cu\"]\ninclude = [@@\"inc\"]\n"
    ),
);

bad_config!(
    duplicate_kernel_table_points_at_the_second_one,
    format!("{HEAD}{RELU}\n[kernel.@@relu]\nbackend = \"cpu\"\n"),
);

bad_config!(
    unknown_backend_suggests_the_closest_backend,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = @@\"cuda2\"\ndepends = [\"torch\"]\nsrc = [\"kernels/relu.cu\"]\n"
    ),
);

bad_config!(
    unknown_backend_in_general_backends_is_rejected,
    HEAD.replace(
        "backends = [\"cuda\", \"cpu\"]",
        "backends = [\"cuda\", @@\"cpux\"]"
    ),
);

bad_config!(
    capability_without_minor_suggests_major_dot_zero,
    format!("{HEAD}{RELU}cuda-capabilities = [\"8.0\", @@\"9\"]\n"),
);

bad_config!(
    capability_in_nvcc_spelling_is_translated_in_the_hint,
    format!("{HEAD}{RELU}cuda-capabilities = [@@\"sm_90\"]\n"),
);

bad_config!(
    capability_that_is_not_a_number_is_rejected,
    format!("{HEAD}{RELU}cuda-capabilities = [@@\"abc\"]\n"),
);

bad_config!(
    capability_list_without_a_real_capability_is_rejected,
    format!("{HEAD}{RELU}cuda-capabilities = [@@\"11.8\", \"99999.0\"]\n"),
);

bad_config!(
    matrix_dtype_alias_suggests_the_torch_name,
    format!("{HEAD}{RELU}\n[kbuild.cuda-capabilities]\n\"9.0\" = [\"float32\", @@\"fp16\"]\n"),
);

bad_config!(
    matrix_capability_with_no_dtypes_is_rejected,
    format!("{HEAD}{RELU}\n[kbuild.cuda-capabilities]\n\"8.0\" = [\"float32\"]\n\"9.0\" = @@[]\n"),
);

bad_config!(
    matrix_key_that_is_not_a_capability_is_rejected,
    format!("{HEAD}{RELU}\n[kbuild.cuda-capabilities]\n@@\"sm_80\" = [\"float32\"]\n"),
);

bad_config!(
    unknown_key_in_kbuild_table_is_rejected,
    format!("{HEAD}{RELU}\n[kbuild]\n@@cuda-capability = {{ \"9.0\" = [\"float32\"] }}\n"),
);

bad_config!(
    kernel_capability_outside_the_matrix_is_rejected,
    format!(
        "{HEAD}{RELU}cuda-capabilities = [\"9.0\", @@\"8.6\"]\n\n[kbuild.cuda-capabilities]\n\"8.0\" = [\"float32\"]\n\"9.0\" = [\"float32\", \"bfloat16\"]\n"
    ),
);

bad_config!(
    kernel_name_with_underscore_suggests_dashes,
    HEAD.replace("name = \"ok-kernel\"", "name = @@\"ok_kernel\""),
);

bad_config!(
    negative_version_is_rejected,
    HEAD.replace("version = 1", "version = @@-1"),
);

bad_config!(
    version_written_as_a_string_is_a_type_error,
    HEAD.replace("version = 1", "version = @@\"1\""),
);

bad_config!(
    missing_general_table_is_reported_at_the_top,
    "@@[torch]\nsrc = [\"torch-ext/torch_binding.cpp\"]\n",
);

bad_config!(
    missing_name_points_at_general,
    HEAD.replace("[general]\nname = \"ok-kernel\"\n", "@@[general]\n"),
);

bad_config!(
    torch_and_torch_noarch_together_are_rejected,
    format!("{HEAD}\n@@[torch-noarch]\npyext = [\"py\"]\n"),
);

bad_config!(
    unknown_depends_entry_suggests_a_known_one,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\", @@\"cutlass_4.5\"]\nsrc = [\"kernels/relu.cu\"]\n"
    ),
);

bad_config!(
    missing_python_package_init_says_to_create_it,
    HEAD.replace("name = \"ok-kernel\"", "name = @@\"other-kernel\""),
);

bad_config!(
    unsupported_edition_names_the_supported_ones,
    HEAD.replace("version = 1\n", "version = 1\nedition = @@4\n"),
);

bad_config!(
    edition_5_key_in_a_v4_file_says_which_edition_it_needs,
    HEAD.replace(
        "version = 1\n",
        "version = 1\n@@kernel-depends = [{ repo-id = \"org/k\", version = 1 }]\n"
    ),
);

bad_config!(
    cuda_capabilities_on_a_cpu_kernel_is_rejected,
    format!(
        "{HEAD}\n[kernel.relu_cpu]\nbackend = \"cpu\"\ndepends = [\"torch\"]\nsrc = [\"kernels/relu_cpu.cpp\"]\n@@cuda-capabilities = [\"9.0\"]\n"
    ),
);

bad_config!(
    invalid_toml_syntax_is_located,
    HEAD.replace("license = \"apache-2.0\"", "license = \"apache-2.0@@\n"),
);

bad_config!(
    kernel_tables_in_a_noarch_project_are_rejected,
    format!(
        "{}\n@@[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = [\"kernels/relu.cu\"]\n",
        HEAD.replace(
            "[torch]\nsrc = [\"torch-ext/torch_binding.cpp\"]",
            "[torch-noarch]"
        )
    ),
);

bad_config!(
    empty_backends_list_is_rejected,
    HEAD.replace("backends = [\"cuda\", \"cpu\"]", "backends = @@[]"),
);

bad_config!(
    missing_depends_is_reported_like_kernel_builder_does,
    format!("{HEAD}\n@@[kernel.relu]\nbackend = \"cuda\"\nsrc = [\"kernels/relu.cu\"]\n"),
);

bad_config!(
    torch_and_tvm_ffi_together_are_rejected,
    format!("{HEAD}\n@@[tvm-ffi]\nsrc = [\"torch-ext/torch_binding.cpp\"]\n"),
);

bad_config!(
    tvm_ffi_without_src_is_rejected,
    HEAD.replace(
        "[torch]\nsrc = [\"torch-ext/torch_binding.cpp\"]",
        "@@[tvm-ffi]\ninclude = [\"include\"]"
    ),
);

bad_config!(
    tvm_ffi_project_needs_its_package_in_tvm_ffi_ext,
    HEAD.replace("name = \"ok-kernel\"", "name = @@\"ok-kernel\"")
        .replace("[torch]", "[tvm-ffi]"),
);

/// `HEAD` as edition 5.
fn head_v5() -> String {
    HEAD.replace("version = 1\n", "version = 1\nedition = 5\n")
}

bad_config!(
    general_minver_is_not_a_build_toml_key,
    head_v5().replace("edition = 5\n", "edition = 5\n@@minver = \"0.17\"\n"),
);

bad_config!(
    per_backend_stable_abi_needs_edition_5,
    format!("{HEAD}\n@@[torch.stable-abi]\ncuda = \"2.10\"\n"),
);

bad_config!(
    stable_abi_table_with_an_unknown_backend_suggests_one,
    format!("{}\n[torch.stable-abi]\n@@cdua = \"2.10\"\n", head_v5()),
);

bad_config!(
    torch_bound_that_is_not_a_version_is_rejected,
    format!("{HEAD}minver = @@\"2.x\"\n"),
);

bad_config!(
    cuda_minver_that_is_not_a_version_is_rejected,
    format!("{HEAD}{RELU}cuda-minver = @@\"12.8-rc\"\n"),
);

bad_config!(
    python_dependency_of_another_backend_says_where_it_belongs,
    head_v5().replace(
        "[torch]",
        "[general.neuron]\npython-depends = [@@\"nvidia-cutlass-dsl\"]\n\n[torch]"
    ),
);

bad_config!(
    tpu_has_no_python_dependencies,
    head_v5().replace(
        "[torch]",
        "[general.tpu]\npython-depends = [@@\"jax\"]\n\n[torch]"
    ),
);

bad_config!(
    kernel_dependency_with_version_and_revision_is_rejected,
    head_v5().replace(
        "edition = 5\n",
        "edition = 5\nkernel-depends = [{ repo-id = \"org/k\", version = 1, revision = @@\"abc\" }]\n"
    ),
);

bad_config!(
    project_root_is_not_a_source,
    format!("{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = []\nsrc = [@@\".\"]\n"),
);

bad_config!(
    hip_flags_on_a_cuda_kernel_name_the_backend_they_belong_to,
    format!("{HEAD}{RELU}@@hip-flags = [\"-O3\"]\n"),
);

bad_config!(
    kernel_for_a_backend_without_kernels_is_rejected,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = @@\"neuron\"\ndepends = []\nsrc = [\"kernels/relu.cu\"]\n"
    ),
);

#[test]
fn missing_build_toml_names_the_directory_and_how_to_point_elsewhere() {
    let tmp = tempfile::tempdir().unwrap();
    let out = kbuild(tmp.path(), tmp.path(), &["check-config"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(
        String::from_utf8_lossy(&out.stderr).replace(&tmp.path().display().to_string(), "[proj]")
    );
    assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 0);
}

/// The full stderr of `kbuild check-config` run inside a project written from `toml`.
fn check_config_stderr(toml: &str) -> String {
    let tmp = tempfile::tempdir().unwrap();
    write_project(tmp.path(), toml);
    let out = kbuild(tmp.path(), tmp.path(), &["check-config"]);
    assert_eq!(out.status.code(), Some(1));
    String::from_utf8(out.stderr)
        .unwrap()
        .replace(&tmp.path().display().to_string(), "[proj]")
}

#[test]
fn kernel_with_only_impossible_capabilities_reads_well() {
    insta::assert_snapshot!(check_config_stderr(&format!(
        "{HEAD}{RELU}cuda-capabilities = [\"99999.0\"]\n"
    )));
}

#[test]
fn edition_5_key_without_edition_reads_well() {
    insta::assert_snapshot!(check_config_stderr(&HEAD.replace(
        "[torch]",
        "[general.cuda]\nkernel-depends = [{ repo-id = \"org/k\", version = 1 }]\n\n[torch]"
    )));
}

#[test]
fn misplaced_python_dependency_reads_well() {
    insta::assert_snapshot!(check_config_stderr(&head_v5().replace(
        "[torch]",
        "[general.xpu]\npython-depends = [\"nki\"]\n\n[torch]"
    )));
}

#[test]
fn two_frameworks_read_well() {
    insta::assert_snapshot!(check_config_stderr(&format!(
        "{HEAD}\n[torch-noarch]\npyext = [\"py\"]\n"
    )));
}

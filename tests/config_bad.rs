//! Bad build.toml files: `kbuild check-config` and `kbuild build` both fail with
//! `build.toml:LINE:COL: <message>` and a `hint:`, and leave `build/` exactly as it was.
//!
//! Each case writes a small project into a temp dir. `@@` in a case's build.toml marks where the
//! error must point; it is removed before the file is written.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::SystemTime;

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
    toml: String,
    message: &'static str,
    hint: &'static str,
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
    Command::new(env!("CARGO_BIN_EXE_kbuild"))
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
    let expected_at = format!("build.toml:{line}:{col}: ");

    for args in [&["check-config"][..], &["build"][..]] {
        let out = kbuild(&project, &cwd, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "`kbuild {args:?}` succeeded on a bad build.toml:\n{toml}"
        );
        assert_eq!(out.status.code(), Some(1), "`kbuild {args:?}`: {stderr}");
        assert!(
            !stderr.contains("panicked"),
            "`kbuild {args:?}` panicked: {stderr}"
        );
        let error_line = stderr
            .lines()
            .find(|l| l.starts_with("error: "))
            .unwrap_or_else(|| panic!("no `error:` line in: {stderr}"));
        assert!(
            error_line.contains(&format!("{expected_at}{}", case.message)),
            "`kbuild {args:?}`: expected `{expected_at}{}` in the error, got:\n{stderr}",
            case.message
        );
        let hint_line = stderr
            .lines()
            .find(|l| l.trim_start().starts_with("hint: "))
            .unwrap_or_else(|| panic!("no `hint:` line in: {stderr}"));
        assert!(
            hint_line.contains(case.hint),
            "`kbuild {args:?}`: expected hint containing `{}`, got:\n{stderr}",
            case.hint
        );
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
    ($name:ident, $toml:expr, $message:expr, $hint:expr $(, $setup:expr)?) => {
        #[test]
        fn $name() {
            #[allow(unused_mut, unused_assignments)]
            let mut setup: fn(&Path) = no_setup;
            $(setup = $setup;)?
            run_case(Case {
                toml: $toml.to_string(),
                message: $message,
                hint: $hint,
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
    "unknown key `cuda-flag` in `[kernel.relu]`",
    "did you mean `cuda-flags`? valid keys: `backend`"
);

bad_config!(
    unknown_top_level_table_suggests_kernel,
    format!("{HEAD}\n[@@kernels.relu]\nbackend = \"cuda\"\n"),
    "unknown table `[kernels]`",
    "did you mean `kernel`?"
);

bad_config!(
    src_written_as_a_string_is_a_type_error,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = @@\"kernels/relu.cu\"\n"
    ),
    "`src` in `[kernel.relu]` must be an array of strings, found a string",
    "write it as `src = [\"kernels/relu.cu\"]`"
);

bad_config!(
    empty_kernel_src_is_rejected,
    format!("{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = @@[]\n"),
    "`src` in `[kernel.relu]` is empty",
    "list the files to compile"
);

bad_config!(
    missing_source_file_is_named_with_a_suggestion,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = [@@\"kernels/rleu.cu\"]\n"
    ),
    "source `kernels/rleu.cu` does not exist",
    "did you mean `kernels/relu.cu`?"
);

bad_config!(
    source_in_a_missing_directory_is_reported,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = [\"kernels/relu.cu\", @@\"kernels/x/x.cu\"]\n"
    ),
    "source `kernels/x/x.cu` does not exist",
    "the directory `kernels/x` does not exist either"
);

bad_config!(
    absolute_source_path_is_rejected,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = [@@\"/etc/relu.cu\"]\n"
    ),
    "`/etc/relu.cu` is an absolute path",
    "relative to the project root"
);

bad_config!(
    parent_dir_escaping_the_root_is_rejected,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = [@@\"kernels/../../outside.cu\"]\n"
    ),
    "`kernels/../../outside.cu` is outside the project",
    "move or copy the file into the project"
);

bad_config!(
    symlink_leading_out_of_the_root_is_rejected,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = [@@\"kernels/linked.cu\"]\n"
    ),
    "source `kernels/linked.cu` resolves to",
    "a symlink leads out of the project root",
    |dir: &Path| {
        let outside = dir.parent().unwrap().join("outside.cu");
        fs::write(&outside, "// outside\n").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("kernels/linked.cu")).unwrap();
    }
);

bad_config!(
    include_directory_that_does_not_exist_is_rejected,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = [\"kernels/relu.cu\"]\ninclude = [@@\"inc\"]\n"
    ),
    "include directory `inc` does not exist",
    "did you mean `include`?"
);

bad_config!(
    source_listed_twice_is_rejected,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\"]\nsrc = [\"kernels/relu.cu\", @@\"kernels/relu.cu\"]\n"
    ),
    "source `kernels/relu.cu` is listed twice in `src` of `[kernel.relu]`",
    "remove the second entry"
);

bad_config!(
    duplicate_kernel_table_points_at_the_second_one,
    format!("{HEAD}{RELU}\n[kernel.@@relu]\nbackend = \"cpu\"\n"),
    "duplicate table `[kernel.relu]` (first defined on line 10)",
    "each kernel name may appear once"
);

bad_config!(
    unknown_backend_suggests_the_closest_backend,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = @@\"cuda2\"\ndepends = [\"torch\"]\nsrc = [\"kernels/relu.cu\"]\n"
    ),
    "unknown backend `cuda2`",
    "did you mean `cuda`? valid kernel backends: `cpu`, `cuda`, `metal`, `rocm`, `xpu`"
);

bad_config!(
    unknown_backend_in_general_backends_is_rejected,
    HEAD.replace(
        "backends = [\"cuda\", \"cpu\"]",
        "backends = [\"cuda\", @@\"cpux\"]"
    ),
    "unknown backend `cpux`",
    "did you mean `cpu`?"
);

bad_config!(
    capability_without_minor_suggests_major_dot_zero,
    format!("{HEAD}{RELU}cuda-capabilities = [\"8.0\", @@\"9\"]\n"),
    "invalid CUDA capability `9`",
    "did you mean `9.0`?"
);

bad_config!(
    capability_in_nvcc_spelling_is_translated_in_the_hint,
    format!("{HEAD}{RELU}cuda-capabilities = [@@\"sm_90\"]\n"),
    "invalid CUDA capability `sm_90`",
    "write `9.0`"
);

bad_config!(
    capability_that_is_not_a_number_is_rejected,
    format!("{HEAD}{RELU}cuda-capabilities = [@@\"abc\"]\n"),
    "invalid CUDA capability `abc`",
    "write `major.minor`"
);

bad_config!(
    capability_no_gpu_has_is_rejected,
    format!("{HEAD}{RELU}cuda-capabilities = [@@\"5.2\"]\n"),
    "unknown CUDA capability `5.2`",
    "known capabilities: 7.0, 7.2, 7.5"
);

bad_config!(
    matrix_dtype_alias_suggests_the_torch_name,
    format!("{HEAD}{RELU}\n[kbuild.cuda-capabilities]\n\"9.0\" = [\"float32\", @@\"fp16\"]\n"),
    "unknown dtype `fp16`",
    "did you mean `float16`? valid dtypes: `float32`, `float16`, `bfloat16`"
);

bad_config!(
    matrix_capability_with_no_dtypes_is_rejected,
    format!("{HEAD}{RELU}\n[kbuild.cuda-capabilities]\n\"8.0\" = [\"float32\"]\n\"9.0\" = @@[]\n"),
    "capability `9.0` has no dtypes in `[kbuild.cuda-capabilities]`",
    "list the dtypes to build for it"
);

bad_config!(
    matrix_key_that_is_not_a_capability_is_rejected,
    format!("{HEAD}{RELU}\n[kbuild.cuda-capabilities]\n@@\"sm_80\" = [\"float32\"]\n"),
    "invalid CUDA capability `sm_80`",
    "write `8.0`"
);

bad_config!(
    unknown_key_in_kbuild_table_is_rejected,
    format!("{HEAD}{RELU}\n[kbuild]\n@@cuda-capability = {{ \"9.0\" = [\"float32\"] }}\n"),
    "unknown key `cuda-capability` in `[kbuild]`",
    "did you mean `cuda-capabilities`?"
);

bad_config!(
    kernel_capability_outside_the_matrix_is_rejected,
    format!(
        "{HEAD}{RELU}cuda-capabilities = [\"9.0\", @@\"8.6\"]\n\n[kbuild.cuda-capabilities]\n\"8.0\" = [\"float32\"]\n\"9.0\" = [\"float32\", \"bfloat16\"]\n"
    ),
    "capability `8.6` of `[kernel.relu]` is not in `[kbuild.cuda-capabilities]`",
    "add `\"8.6\" = [...]` to `[kbuild.cuda-capabilities]`"
);

bad_config!(
    kernel_name_with_underscore_suggests_dashes,
    HEAD.replace("name = \"ok-kernel\"", "name = @@\"ok_kernel\""),
    "invalid kernel name `ok_kernel`",
    "e.g. `ok-kernel`"
);

bad_config!(
    version_zero_is_rejected,
    HEAD.replace("version = 1", "version = @@0"),
    "`version` must be a positive integer, found `0`",
    "version = 1"
);

bad_config!(
    version_written_as_a_string_is_a_type_error,
    HEAD.replace("version = 1", "version = @@\"1\""),
    "`version` in `[general]` must be an integer, found a string",
    "write it as `version = 1`"
);

bad_config!(
    missing_general_table_is_reported_at_the_top,
    "@@[torch]\nsrc = [\"torch-ext/torch_binding.cpp\"]\n",
    "missing table `[general]`",
    "add `[general]` with `name`"
);

bad_config!(
    missing_name_points_at_general,
    HEAD.replace("[general]\nname = \"ok-kernel\"\n", "@@[general]\n"),
    "missing key `name` in `[general]`",
    "add `name = \"my-kernel\"`"
);

bad_config!(
    torch_and_torch_noarch_together_are_rejected,
    format!("{HEAD}\n@@[torch-noarch]\npyext = [\"py\"]\n"),
    "`[torch]` and `[torch-noarch]` are exclusive",
    "keep `[torch]` for compiled kernels"
);

bad_config!(
    unknown_depends_entry_suggests_a_known_one,
    format!(
        "{HEAD}\n[kernel.relu]\nbackend = \"cuda\"\ndepends = [\"torch\", @@\"cutlass_4.5\"]\nsrc = [\"kernels/relu.cu\"]\n"
    ),
    "unknown dependency `cutlass_4.5` in `[kernel.relu]`",
    "did you mean `cutlass_4_5`?"
);

bad_config!(
    missing_python_package_init_says_to_create_it,
    HEAD.replace("name = \"ok-kernel\"", "name = @@\"other-kernel\""),
    "the Python package of `other-kernel` is missing: `torch-ext/other_kernel/__init__.py` does not exist",
    "create `torch-ext/other_kernel/__init__.py`"
);

bad_config!(
    unsupported_edition_names_the_supported_ones,
    HEAD.replace("version = 1\n", "version = 1\nedition = @@4\n"),
    "unsupported edition `4`",
    "kbuild reads `edition = 5` and the edition-less v4 format"
);

bad_config!(
    edition_5_key_in_a_v4_file_says_which_edition_it_needs,
    HEAD.replace(
        "version = 1\n",
        "version = 1\n@@kernel-depends = [{ repo-id = \"org/k\", version = 1 }]\n"
    ),
    "unknown key `kernel-depends` in `[general]`",
    "`kernel-depends` is an edition 5 key"
);

bad_config!(
    cuda_capabilities_on_a_cpu_kernel_is_rejected,
    format!(
        "{HEAD}\n[kernel.relu_cpu]\nbackend = \"cpu\"\ndepends = [\"torch\"]\nsrc = [\"kernels/relu_cpu.cpp\"]\n@@cuda-capabilities = [\"9.0\"]\n"
    ),
    "unknown key `cuda-capabilities` in `[kernel.relu_cpu]` (a `cpu` kernel)",
    "applies to `backend = \"cuda\"` kernels only"
);

bad_config!(
    invalid_toml_syntax_is_located,
    HEAD.replace("license = \"apache-2.0\"", "license = \"apache-2.0@@\n"),
    "invalid TOML",
    "fix the syntax at this position"
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
    "`[kernel.relu]` needs `[torch]`",
    "replace `[torch-noarch]` with `[torch]`"
);

bad_config!(
    empty_backends_list_is_rejected,
    HEAD.replace("backends = [\"cuda\", \"cpu\"]", "backends = @@[]"),
    "`backends` is empty",
    "backends = [\"cuda\"]"
);

bad_config!(
    missing_depends_is_reported_like_kernel_builder_does,
    format!("{HEAD}\n@@[kernel.relu]\nbackend = \"cuda\"\nsrc = [\"kernels/relu.cu\"]\n"),
    "missing key `depends` in `[kernel.relu]`",
    "add `depends = [\"torch\"]` (or `depends = []`)"
);

bad_config!(
    tvm_ffi_framework_is_not_supported,
    format!("{}\n[@@tvm-ffi]\nsrc = [\"x.cpp\"]\n", HEAD),
    "`[tvm-ffi]` kernels are not supported",
    "build this kernel with HF's kernel-builder"
);

#[test]
fn missing_build_toml_names_the_directory_and_how_to_point_elsewhere() {
    let tmp = tempfile::tempdir().unwrap();
    let out = kbuild(tmp.path(), tmp.path(), &["check-config"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains(&format!(
            "error: no `build.toml` in `{}`",
            tmp.path().display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: run kbuild in a kernel project, or pass -C <dir>"),
        "{stderr}"
    );
    assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 0);
}

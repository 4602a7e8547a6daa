//! What the object cache's key covers, and what it leaves out: kbuild's cache directory is
//! keyed relative to itself, nvcc's environment flags count, and `-v` names the flag that
//! changed.

use std::path::{Path, PathBuf};

use crate::common::fake_cc::{FakeCompiler, job, write};
use crate::common::kbuild::{copy_dir, fixture, kbuild, run, stdout_json};
use kbuild::compile::{CompileSettings, compile_all};
use kbuild::plan::{CompileJob, Lang};
use kbuild::report::Recorder;
use kbuild::schedule::NvccMode;

fn settings(root: &Path, kbuild_cache: Option<PathBuf>) -> CompileSettings {
    CompileSettings {
        kbuild_cache,
        ..CompileSettings::local(root.join("cache"), 1, NvccMode::Threads)
    }
}

/// `a.cpp` including `dep.h` from `<cache>/include`, as a fetched CUTLASS tree is included.
fn job_with_cache(root: &Path, cc: &FakeCompiler, cache: &Path) -> CompileJob {
    CompileJob {
        include_dirs: vec![cache.join("include")],
        ..job(root, &cc.path, "a.cpp")
    }
}

#[test]
fn moving_the_kbuild_cache_directory_recompiles_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "a.cpp",
        "#include \"dep.h\"\nint a() { return DEP; }\n",
    );
    write(root, "shell-a/kbuild/include/dep.h", "#define DEP 1\n");
    let (cache_a, cache_b) = (root.join("shell-a/kbuild"), root.join("shell-b/kbuild"));
    copy_dir(&cache_a, &cache_b);
    let cc = FakeCompiler::new(root);
    let rec = Recorder::default();

    let first = job_with_cache(root, &cc, &cache_a);
    compile_all(&[first], &settings(root, Some(cache_a.clone())), &rec).unwrap();
    assert_eq!(cc.take_compiled(), ["a.cpp"]);

    // Another shell's KBUILD_CACHE_DIR with the same headers: nothing to compile.
    let moved = job_with_cache(root, &cc, &cache_b);
    let summary = compile_all(
        std::slice::from_ref(&moved),
        &settings(root, Some(cache_b.clone())),
        &rec,
    )
    .unwrap();
    assert_eq!(summary.compiled, Vec::<String>::new());
    assert!(cc.take_compiled().is_empty());

    // A header that differs there is still a change.
    write(root, "shell-b/kbuild/include/dep.h", "#define DEP 2\n");
    compile_all(&[moved], &settings(root, Some(cache_b)), &rec).unwrap();
    assert_eq!(cc.take_compiled(), ["a.cpp"]);
}

#[test]
fn nvcc_environment_flags_count_in_the_key_of_cuda_units_only() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.cpp", "int a() { return 1; }\n");
    write(root, "k.cu", "int k() { return 2; }\n");
    let cc = FakeCompiler::new(root);
    let cuda = CompileJob {
        lang: Lang::Cuda,
        ..job(root, &cc.path, "k.cu")
    };
    let jobs = [job(root, &cc.path, "a.cpp"), cuda];
    let rec = Recorder::default();
    compile_all(&jobs, &settings(root, None), &rec).unwrap();
    assert_eq!(cc.take_compiled(), ["a.cpp", "k.cu"]);

    let lineinfo = CompileSettings {
        nvcc_env: vec![("NVCC_APPEND_FLAGS".into(), "-lineinfo".into())],
        ..settings(root, None)
    };
    rec.take();
    compile_all(&jobs, &lineinfo, &rec).unwrap();
    assert_eq!(cc.take_compiled(), ["k.cu"]);
    let events = rec.take();
    assert!(
        events
            .iter()
            .any(|e| e
                == "verbose compile `k.cu`: flags changed: `NVCC_APPEND_FLAGS=-lineinfo` added"),
        "{events:#?}"
    );
    compile_all(&jobs, &lineinfo, &rec).unwrap();
    assert!(cc.take_compiled().is_empty());
}

#[test]
fn verbose_names_the_flags_that_changed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.cpp", "int a() { return 1; }\n");
    let cc = FakeCompiler::new(root);
    let rec = Recorder::default();
    let plain = job(root, &cc.path, "a.cpp");
    compile_all(std::slice::from_ref(&plain), &settings(root, None), &rec).unwrap();
    let debug = CompileJob {
        flags: vec!["-g".into()],
        ..plain
    };
    rec.take();
    compile_all(&[debug], &settings(root, None), &rec).unwrap();
    let events = rec.take();
    assert!(
        events
            .iter()
            .any(|e| e == "verbose compile `a.cpp`: flags changed: `-g` added"),
        "{events:#?}"
    );
}

fn compiled(out: &std::process::Output) -> Vec<String> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = stdout_json(out);
    json["compiled"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn cxxflags_count_in_the_cache_key_and_verbose_says_which_flag_changed() {
    let project = fixture("relu-v5");
    let root = project.path();
    let build = || {
        let mut cmd = kbuild(root);
        cmd.args(["build", "--backend", "cpu", "--json"]);
        cmd
    };
    assert_eq!(compiled(&run(&mut build())).len(), 2);
    // `-v` says why each unit compiles again.
    let out = run(kbuild(root)
        .args(["-v", "build", "--backend", "cpu"])
        .env("CXXFLAGS", "-g -O1"));
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("flags changed: `-g` `-O1` added").count(),
        2,
        "both units, CXXFLAGS reach every one: {stderr}"
    );
    let again = run(build().env("CXXFLAGS", "-g -O1"));
    assert_eq!(compiled(&again), Vec::<String>::new());
}

#[test]
fn a_python_edit_outside_git_keeps_the_op_namespace_and_recompiles_nothing() {
    let project = fixture("relu-v5");
    let root = project.path();
    let build = || {
        let out = run(kbuild(root).args(["build", "--backend", "cpu", "--json"]));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout_json(&out)
    };
    let first = build();
    let init = root.join("torch-ext/relu/__init__.py");
    let text = std::fs::read_to_string(&init).unwrap();
    std::fs::write(&init, format!("{text}\n# a comment\n")).unwrap();
    let second = build();
    assert_eq!(second["variants"][0]["id"], first["variants"][0]["id"]);
    assert_eq!(second["compiled"], serde_json::json!([]));
    // The variant ships the edit all the same.
    let variant = Path::new(second["variants"][0]["path"].as_str().unwrap());
    let shipped = walkdir::WalkDir::new(variant)
        .into_iter()
        .filter_map(Result::ok)
        .find(|e| e.file_name() == "__init__.py")
        .expect("the variant ships __init__.py");
    let shipped = std::fs::read_to_string(shipped.path()).unwrap();
    assert!(shipped.contains("# a comment"));
}

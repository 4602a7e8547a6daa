//! The object cache through a fake compiler: which units run a compiler on a rebuild.

use std::path::Path;

use crate::common::fake_cc::{FakeCompiler, job, write};
use kbuild::compile::{CompileSettings, CompileSummary, compile_all};
use kbuild::plan::CompileJob;
use kbuild::report::Recorder;
use kbuild::schedule::NvccMode;

struct Project {
    dir: tempfile::TempDir,
    cc: FakeCompiler,
    jobs: Vec<CompileJob>,
}

impl Project {
    /// `a.cpp` includes `a.h`, `b.cpp` includes `b.h` (from `include/`).
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "include/a.h", "int a();\n");
        write(root, "include/b.h", "int b();\n");
        write(root, "a.cpp", "#include \"a.h\"\nint a() { return 1; }\n");
        write(root, "b.cpp", "#include \"b.h\"\nint b() { return 2; }\n");
        let cc = FakeCompiler::new(root);
        let jobs = vec![job(root, &cc.path, "a.cpp"), job(root, &cc.path, "b.cpp")];
        Project { dir, cc, jobs }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn build(&self) -> Result<CompileSummary, kbuild::compile::CompileError> {
        let settings = CompileSettings::local(self.root().join("cache"), 2, NvccMode::Threads);
        compile_all(&self.jobs, &settings, &Recorder::default())
    }

    /// Build and return the sources that ran through the compiler.
    fn rebuild(&self) -> Vec<String> {
        self.build().unwrap();
        self.cc.take_compiled()
    }
}

#[test]
fn first_build_compiles_every_unit() {
    let p = Project::new();
    let summary = p.build().unwrap();
    assert_eq!(summary.compiled, ["a.cpp", "b.cpp"]);
    assert!(summary.cached.is_empty());
    assert_eq!(p.cc.take_compiled(), ["a.cpp", "b.cpp"]);
    assert!(p.root().join("obj/a.o").is_file());
    assert!(p.root().join("obj/a.d").is_file());
}

#[test]
fn no_op_rebuild_runs_no_compiler() {
    let p = Project::new();
    p.rebuild();
    let summary = p.build().unwrap();
    assert_eq!(p.cc.take_compiled(), Vec::<String>::new());
    assert_eq!(summary.cached, ["a.cpp", "b.cpp"]);
    assert!(summary.compiled.is_empty());
}

#[test]
fn editing_one_source_recompiles_only_that_unit() {
    let p = Project::new();
    p.rebuild();
    write(
        p.root(),
        "a.cpp",
        "#include \"a.h\"\nint a() { return 10; }\n",
    );
    assert_eq!(p.rebuild(), ["a.cpp"]);
    assert_eq!(p.rebuild(), Vec::<String>::new());
}

#[test]
fn touching_a_source_without_changing_it_recompiles_nothing() {
    let p = Project::new();
    p.rebuild();
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    let f = std::fs::File::options()
        .write(true)
        .open(p.root().join("a.cpp"))
        .unwrap();
    f.set_modified(later).unwrap();
    assert_eq!(p.rebuild(), Vec::<String>::new());
}

#[test]
fn header_change_recompiles_exactly_its_dependents() {
    let p = Project::new();
    p.rebuild();
    write(p.root(), "include/b.h", "int b(); // changed\n");
    assert_eq!(p.rebuild(), ["b.cpp"]);
    write(p.root(), "include/a.h", "int a(); // changed\n");
    assert_eq!(p.rebuild(), ["a.cpp"]);
}

#[test]
fn header_included_only_in_a_device_pass_is_still_a_dependency() {
    let mut p = Project::new();
    // The fake compiler, like nvcc's host pass, does not report this include.
    write(p.root(), "include/sm80.cuh", "// sm80 path\n");
    write(
        p.root(),
        "c.cpp",
        "#if __CUDA_ARCH__ >= 800\n#include \"sm80.cuh\"\n#endif\nint c() { return 3; }\n",
    );
    let c = job(p.root(), &p.cc.path, "c.cpp");
    p.jobs.push(c);
    p.rebuild();
    let depfile = std::fs::read_to_string(p.root().join("obj/c.d")).unwrap();
    assert!(
        !depfile.contains("sm80.cuh"),
        "the fake compiler must miss it: {depfile}"
    );
    write(p.root(), "include/sm80.cuh", "// sm80 path, changed\n");
    assert_eq!(p.rebuild(), ["c.cpp"]);
}

#[test]
fn changing_flags_recompiles() {
    let mut p = Project::new();
    p.rebuild();
    p.jobs[0].flags.push("-DEXTRA=1".to_string());
    assert_eq!(p.rebuild(), ["a.cpp"]);
    p.jobs[1]
        .defines
        .push(("X".to_string(), Some("2".to_string())));
    assert_eq!(p.rebuild(), ["b.cpp"]);
}

#[test]
fn changing_the_compiler_version_recompiles_everything() {
    let mut p = Project::new();
    p.rebuild();
    for j in &mut p.jobs {
        j.compiler_id = "fake 2.0".to_string();
    }
    assert_eq!(p.rebuild(), ["a.cpp", "b.cpp"]);
}

#[test]
fn moving_the_output_directory_is_not_a_flag_change_but_recompiles_the_new_objects() {
    let mut p = Project::new();
    p.rebuild();
    let out = p.root().join("obj2");
    for j in &mut p.jobs {
        j.object = out.join(j.object.file_name().unwrap());
        j.depfile = out.join(j.depfile.file_name().unwrap());
    }
    assert_eq!(p.rebuild(), ["a.cpp", "b.cpp"]);
    assert_eq!(p.rebuild(), Vec::<String>::new());
}

#[test]
fn deleted_or_modified_object_is_rebuilt() {
    let p = Project::new();
    p.rebuild();
    std::fs::remove_file(p.root().join("obj/a.o")).unwrap();
    std::fs::write(p.root().join("obj/b.o"), "tampered").unwrap();
    assert_eq!(p.rebuild(), ["a.cpp", "b.cpp"]);
}

#[test]
fn failed_compile_keeps_the_previous_object_and_leaves_no_temporary_files() {
    let p = Project::new();
    p.rebuild();
    let good = std::fs::read(p.root().join("obj/a.o")).unwrap();
    let original = std::fs::read_to_string(p.root().join("a.cpp")).unwrap();
    write(p.root(), "a.cpp", "#error broken\n");
    assert!(p.build().is_err());
    p.cc.take_compiled();
    assert_eq!(std::fs::read(p.root().join("obj/a.o")).unwrap(), good);
    let mut names: Vec<String> = std::fs::read_dir(p.root().join("obj"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["a.d", "a.o", "b.d", "b.o"]);
    // Reverting the source makes the old object fresh again: no compiler runs.
    write(p.root(), "a.cpp", &original);
    assert_eq!(p.rebuild(), Vec::<String>::new());
}

#[test]
fn corrupt_cache_entry_means_recompile_not_failure() {
    let p = Project::new();
    p.rebuild();
    for entry in std::fs::read_dir(p.root().join("cache")).unwrap() {
        std::fs::write(entry.unwrap().path(), "{not json").unwrap();
    }
    assert_eq!(p.rebuild(), ["a.cpp", "b.cpp"]);
    assert_eq!(p.rebuild(), Vec::<String>::new());
}

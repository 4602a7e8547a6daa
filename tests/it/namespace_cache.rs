//! The op namespace (`-DTORCH_EXTENSION_NAME=<id>`, new with every commit) recompiles only the
//! units whose files spell it; the link and the loaded module always take the new one.

use std::path::Path;
use std::process::Command;

use crate::common::fake_cc::{FakeCompiler, job, write};
use crate::common::kbuild::{fixture, kbuild, python_ok, run, stdout_json};
use kbuild::compile::{CompileSettings, compile_all};
use kbuild::plan::CompileJob;
use kbuild::report::Recorder;
use kbuild::schedule::NvccMode;

fn settings(root: &Path) -> CompileSettings {
    CompileSettings {
        jobs: 1,
        cache_dir: root.join("cache"),
        kbuild_cache: None,
        nvcc_env: Vec::new(),
        launcher: None,
        jobserver: None,
        order: Vec::new(),
        nvcc: NvccMode::Threads,
        memory: None,
        remote: None,
        dist: None,
    }
}

/// `a.cpp` (plain) and `b.cpp` (includes `reg.h`, which spells the define) under namespace `id`.
fn jobs(root: &Path, cc: &FakeCompiler, id: &str) -> Vec<CompileJob> {
    let defines = vec![("TORCH_EXTENSION_NAME".to_string(), Some(id.to_string()))];
    ["a.cpp", "b.cpp"]
        .into_iter()
        .map(|name| CompileJob {
            defines: defines.clone(),
            ..job(root, &cc.path, name)
        })
        .collect()
}

#[test]
fn a_new_op_namespace_recompiles_only_units_whose_files_spell_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.cpp", "int a() { return 1; }\n");
    write(root, "b.cpp", "#include \"reg.h\"\nREGISTER(ops)\n");
    write(
        root,
        "include/reg.h",
        "#define REGISTER(M) void M##_in(TORCH_EXTENSION_NAME) {}\n",
    );
    let cc = FakeCompiler::new(root);
    let rec = Recorder::default();
    compile_all(&jobs(root, &cc, "_p_1"), &settings(root), &rec).unwrap();
    assert_eq!(cc.take_compiled(), ["a.cpp", "b.cpp"]);

    rec.take();
    let summary = compile_all(&jobs(root, &cc, "_p_2"), &settings(root), &rec).unwrap();
    assert_eq!(summary.compiled, ["b.cpp"]);
    assert_eq!(cc.take_compiled(), ["b.cpp"]);
    let events = rec.take();
    let said = |line: String| assert!(events.contains(&line), "{line}\n{events:#?}");
    said(
        "verbose fresh `a.cpp`: no file it is built from spells `TORCH_EXTENSION_NAME`, so the \
         new op namespace `_p_2` (was `_p_1`) does not change it"
            .into(),
    );
    said(format!(
        "verbose compile `b.cpp`: the op namespace changed (`_p_1` -> `_p_2`) and `{}` spells \
         `TORCH_EXTENSION_NAME`",
        root.join("include/reg.h").display()
    ));
    // The same namespace again: nothing.
    compile_all(&jobs(root, &cc, "_p_2"), &settings(root), &rec).unwrap();
    assert!(cc.take_compiled().is_empty());
}

#[test]
fn a_unit_that_starts_spelling_the_namespace_recompiles_with_each_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.cpp", "int a() { return 1; }\n");
    write(root, "b.cpp", "int b() { return 2; }\n");
    let cc = FakeCompiler::new(root);
    let rec = Recorder::default();
    compile_all(&jobs(root, &cc, "_p_1"), &settings(root), &rec).unwrap();
    compile_all(&jobs(root, &cc, "_p_2"), &settings(root), &rec).unwrap();
    assert_eq!(cc.take_compiled(), ["a.cpp", "b.cpp"], "first build only");

    // Through a header it includes: the header is what spells it.
    write(
        root,
        "include/name.h",
        "const char *n = STR(TORCH_EXTENSION_NAME);\n",
    );
    write(
        root,
        "a.cpp",
        "#include \"name.h\"\nint a() { return 1; }\n",
    );
    compile_all(&jobs(root, &cc, "_p_2"), &settings(root), &rec).unwrap();
    assert_eq!(cc.take_compiled(), ["a.cpp"]);
    compile_all(&jobs(root, &cc, "_p_3"), &settings(root), &rec).unwrap();
    assert_eq!(cc.take_compiled(), ["a.cpp"]);
    // It stops spelling it: the edit compiles, the next namespace does not.
    write(root, "include/name.h", "const char *n = \"fixed\";\n");
    compile_all(&jobs(root, &cc, "_p_3"), &settings(root), &rec).unwrap();
    compile_all(&jobs(root, &cc, "_p_4"), &settings(root), &rec).unwrap();
    assert_eq!(cc.take_compiled(), ["a.cpp"]);
}

fn git(root: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@localhost"])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// `kbuild build --backend cpu --json`: the compiled labels and the variant's id.
fn build(root: &Path) -> (Vec<String>, String) {
    let out = run(kbuild(root).args(["build", "--backend", "cpu", "--json"]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = stdout_json(&out);
    let mut compiled: Vec<String> = json["compiled"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    compiled.sort();
    let id = json["variants"][0]["id"].as_str().unwrap().to_string();
    (compiled, id)
}

/// `kbuild -v build --backend cpu`: what it said.
fn build_verbose(root: &Path) -> String {
    let out = run(kbuild(root).args(["-v", "build", "--backend", "cpu"]));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

/// The op, called through `kernels` and through `torch.ops.<id>` of the namespace it must have.
fn assert_loads_under(root: &Path, id: &str) {
    let code = format!(
        "import pathlib, torch, kernels\n\
         k = kernels.get_local_kernel(pathlib.Path({:?}), backend='cpu')\n\
         x = torch.randn(100)\n\
         torch.testing.assert_close(k.relu(x), torch.clamp(x, min=0))\n\
         out = torch.empty_like(x)\n\
         getattr(torch.ops, {id:?}).relu(out, x)\n\
         torch.testing.assert_close(out, torch.clamp(x, min=0))\n\
         print('ok')",
        root.display().to_string()
    );
    assert_eq!(python_ok(&code, &[]).trim(), "ok");
}

#[test]
fn a_commit_that_changes_no_source_recompiles_only_the_bindings_and_loads_the_new_namespace() {
    let project = fixture("relu-v5");
    let root = project.path();
    git(root, &["init", "-q"]);
    git(root, &["add", "."]);
    git(root, &["commit", "-q", "-m", "v1"]);
    let (compiled, first) = build(root);
    assert_eq!(compiled.len(), 2, "{compiled:?}");

    git(root, &["commit", "-q", "--allow-empty", "-m", "nothing"]);
    let said = build_verbose(root);
    // The build after it has nothing left to do, and says which namespace it built.
    let (compiled, second) = build(root);
    assert_eq!(compiled, Vec::<String>::new());
    assert_ne!(second, first);
    let fresh = format!(
        "fresh `relu_cpu/relu_cpu.cpp [cpu]`: no file it is built from spells \
         `TORCH_EXTENSION_NAME`, so the new op namespace `{second}` (was `{first}`)"
    );
    let binding = format!(
        "compile `torch-ext/torch_binding.cpp [cpu]`: the op namespace changed (`{first}` -> \
         `{second}`) and `{}` spells `TORCH_EXTENSION_NAME`",
        root.join("torch-ext/torch_binding.cpp").display()
    );
    assert!(said.contains(&fresh), "{fresh}\n{said}");
    assert!(said.contains(&binding), "{binding}\n{said}");
    assert!(said.contains("(1 compiled, 1 fresh)"), "{said}");
    assert_loads_under(root, &second);

    // The kernel starts spelling the name: it compiles with every new namespace from then on.
    let kernel = root.join("relu_cpu/relu_cpu.cpp");
    let text = std::fs::read_to_string(&kernel).unwrap();
    let guard = "#ifndef TORCH_EXTENSION_NAME\n#error built outside its extension\n#endif\n";
    std::fs::write(&kernel, format!("{guard}{text}")).unwrap();
    git(root, &["commit", "-q", "-am", "guard"]);
    let (compiled, _) = build(root);
    assert_eq!(compiled.len(), 2, "{compiled:?}");
    git(
        root,
        &["commit", "-q", "--allow-empty", "-m", "nothing again"],
    );
    let (compiled, third) = build(root);
    assert_eq!(compiled.len(), 2, "{compiled:?}");
    assert_loads_under(root, &third);
}

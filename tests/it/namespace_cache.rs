//! The op namespace (`-DTORCH_EXTENSION_NAME=<id>`, new with every commit) never recompiles the
//! units whose preprocessed source does not hold it; those that do get the new id written over the old one in
//! their object when it has the same length (after one probe compile per length learns where it
//! lies), from the object kept for its length when `_dirty` comes or goes, and compile again
//! otherwise. The link and the loaded module always take the new id.

use std::path::{Path, PathBuf};

use crate::common::fake_cc::{FakeCompiler, job, write};
use crate::common::kbuild::{fixture, git, kbuild, python_ok, run, stdout_json};
use crate::common::redact::Redact;
use kbuild::compile::{CompileSettings, compile_all};
use kbuild::plan::CompileJob;
use kbuild::report::Recorder;
use kbuild::schedule::NvccMode;

fn settings(root: &Path) -> CompileSettings {
    CompileSettings::local(root.join("cache"), 1, NvccMode::Threads)
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

/// The fake compiler's objects are copies of the sources: never patchable.
#[test]
fn a_new_op_namespace_recompiles_only_units_whose_preprocessed_source_holds_it() {
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
        "verbose `a.cpp`: the op namespace changed (`_p_1` -> `_p_2`); its preprocessed source \
         under `_p_2` does not hold it"
            .into(),
    );
    said(
        "verbose fresh `a.cpp`: its preprocessed source does not hold the op namespace, so the \
         new op namespace `_p_2` (was `_p_1`) does not change it"
            .into(),
    );
    said(format!(
        "verbose compile `b.cpp`: the op namespace changed (`_p_1` -> `_p_2`) and `{}` spells \
         `TORCH_EXTENSION_NAME`; it cannot be re-applied to the object: not an object file \
         kbuild can read (Unknown file magic)",
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

/// A compiler launcher (`KBUILD_COMPILER_LAUNCHER`) that appends the source of each compile it
/// runs to a log, then runs it: the compiler runs counted outside kbuild.
struct CountingLauncher {
    path: PathBuf,
    log: PathBuf,
}

impl CountingLauncher {
    fn new(dir: &Path) -> Self {
        let path = dir.join("counting-launcher");
        let log = dir.join("compiles.log");
        let script = format!(
            "#!/bin/sh\nprev=\nfor a in \"$@\"; do\n  [ \"$prev\" = -c ] && echo \"$a\" >> '{}'\n  \
             prev=$a\ndone\nexec \"$@\"\n",
            log.display()
        );
        std::fs::write(&path, script).unwrap();
        crate::common::fake_cc::make_executable(&path);
        std::fs::write(&log, "").unwrap();
        CountingLauncher { path, log }
    }

    /// The file names of the sources compiled since the last call, sorted; clears the log.
    fn take(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap();
        std::fs::write(&self.log, "").unwrap();
        let mut names: Vec<String> = (text.lines())
            .map(|l| {
                Path::new(l)
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    }
}

/// What `kbuild build --backend cpu --json` did.
struct Built {
    id: String,
    /// The report's `compiled` and `reapplied` labels, sorted.
    compiled: Vec<String>,
    reapplied: Vec<String>,
}

fn build(root: &Path, launcher: &CountingLauncher) -> Built {
    let out = run(kbuild(root)
        .args(["build", "--backend", "cpu", "--json"])
        .env("KBUILD_COMPILER_LAUNCHER", &launcher.path));
    assert!(out.status.success());
    let json = stdout_json(&out);
    let labels = |key: &str| -> Vec<String> {
        let list = json.get(key).and_then(|v| v.as_array()).cloned();
        let mut labels: Vec<String> = (list.unwrap_or_default().iter())
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        labels.sort();
        labels
    };
    Built {
        id: json["variants"][0]["id"].as_str().unwrap().to_string(),
        compiled: labels("compiled"),
        reapplied: labels("reapplied"),
    }
}

/// `kbuild -v build --backend cpu` (`--json` would silence `-v`): what it said.
fn build_verbose(root: &Path, launcher: &CountingLauncher) -> String {
    let out = run(kbuild(root)
        .args(["-v", "build", "--backend", "cpu"])
        .env("KBUILD_COMPILER_LAUNCHER", &launcher.path));
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{said}");
    said
}

/// What a `-v` build said about the op namespace and what it compiled, with the project, the
/// times, the probe's command, byte offsets ([`without_offsets`]) and `ids` (each id of the
/// test, with its placeholder) redacted.
/// The units compile at
/// once: their lines are sorted.
fn namespace_lines(said: &str, root: &Path, ids: &[(&str, &str)]) -> String {
    let mut redact = Redact::new().path(root, "[project]").timings();
    for (id, name) in ids {
        redact = redact.text_of(id, name);
    }
    let about = ["op namespace", "kept aside", "probe", "Finished "];
    let mut lines: Vec<String> = (said.lines())
        .filter(|l| about.iter().any(|what| l.contains(what)))
        .map(|l| match l.split_once("probe compiled under") {
            // The probe's command: the compile the other tests pin.
            Some(_) => {
                redact.text(l.rsplit_once("`: ").map_or(l, |(said, _)| said)) + "`: [command]"
            }
            None => redact.text(l),
        })
        .collect();
    lines.sort();
    without_offsets(&lines.join("\n"))
}

/// `text` with each `byte N` as `byte [offset]`: where in an object the compiler put a byte
/// is the compiler's.
fn without_offsets(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("byte ") {
        let after = &rest[at + "byte ".len()..];
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        out.push_str(&rest[..at + "byte ".len()]);
        out.push_str(if digits > 0 { "[offset]" } else { "" });
        rest = &after[digits..];
    }
    out + rest
}

/// The shared objects of the built variants (outside `build/.kbuild`), at least one.
fn variant_objects(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let build = root.join("build");
    let found: Vec<_> = walkdir::WalkDir::new(&build)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| {
            !e.path()
                .strip_prefix(&build)
                .unwrap()
                .starts_with(".kbuild")
        })
        .filter(|e| e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "so"))
        .map(|e| (e.path().to_path_buf(), std::fs::read(e.path()).unwrap()))
        .collect();
    assert!(!found.is_empty(), "no .so under {}", build.display());
    found
}

fn count(haystack: &[u8], needle: &str) -> usize {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle.as_bytes())
        .count()
}

/// Every built extension carries `id`, and `old` nowhere but inside `id` (a clean id is the
/// start of its `_dirty` one).
pub(crate) fn assert_carries_only(root: &Path, id: &str, old: &str) {
    for (path, bytes) in variant_objects(root) {
        let ids = count(&bytes, id);
        let inside = if id.contains(old) { ids } else { 0 };
        assert!(ids > 0, "`{id}` not in {}", path.display());
        assert_eq!(count(&bytes, old), inside, "`{old}` in {}", path.display());
    }
}

/// The op, called through `kernels` and through `torch.ops.<id>` of the namespace it must have.
pub(crate) fn assert_loads_under(root: &Path, id: &str) {
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

/// relu-v5 with a README, committed in a git repository of its own.
fn committed_relu() -> tempfile::TempDir {
    let project = fixture("relu-v5");
    let root = project.path();
    std::fs::write(root.join("README.md"), "# relu\n").unwrap();
    git(root, &["init", "-q"]);
    git(root, &["add", "."]);
    git(root, &["commit", "-q", "-m", "v1"]);
    project
}

const BINDING: &str = "torch-ext/torch_binding.cpp [cpu]";
const KERNEL: &str = "relu_cpu/relu_cpu.cpp [cpu]";

/// The probe id a `-v` build said it compiled the bindings under.
fn probe_in(said: &str) -> String {
    let start = "probe compiled under `";
    let at = said
        .find(start)
        .unwrap_or_else(|| panic!("no probe\n{said}"))
        + start.len();
    said[at..].split('`').next().unwrap().to_string()
}

/// The binding's object of a build into `out`.
fn binding_object(out: &Path) -> Vec<u8> {
    let found = walkdir::WalkDir::new(out)
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .find(|p| p.ends_with("obj/torch-ext__torch_binding.cpp.o"));
    std::fs::read(found.expect("the binding's object")).unwrap()
}

/// The binding's object is byte for byte the one g++ makes under the current id, in a build of
/// its own.
fn assert_binding_as_compiled(root: &Path) {
    let elsewhere = tempfile::tempdir().unwrap();
    let out = run(kbuild(root)
        .args(["build", "--backend", "cpu", "--out-dir"])
        .arg(elsewhere.path()));
    assert!(out.status.success());
    assert!(binding_object(&root.join("build")) == binding_object(elsewhere.path()));
}

#[test]
fn a_commit_that_changes_no_source_runs_no_compiler_and_loads_the_new_namespace() {
    let project = committed_relu();
    let root = project.path();
    let logs = tempfile::tempdir().unwrap();
    let launcher = CountingLauncher::new(logs.path());
    let said = build_verbose(root, &launcher);
    // A cold build compiles each unit once: no probe.
    assert_eq!(launcher.take(), ["relu_cpu.cpp", "torch_binding.cpp"]);
    assert!(!said.contains("probe compiled"), "{said}");
    // Nothing changed: nothing runs, and the report names the id.
    let first = build(root, &launcher);
    assert_eq!(launcher.take(), Vec::<String>::new());

    // The first new id: the bindings compile once, under a probe id that tells where the old
    // one lies (g++ builds its `std::string` from a vector constant and an immediate), and the
    // new one is written there.
    git(root, &["commit", "-q", "--allow-empty", "-m", "nothing"]);
    let said = build_verbose(root, &launcher);
    assert_eq!(launcher.take(), ["torch_binding.cpp"], "{said}");
    let second = build(root, &launcher);
    assert_ne!(second.id, first.id);
    assert_eq!(second.id.len(), first.id.len());
    let probe = probe_in(&said);
    assert_eq!(probe.len(), first.id.len());
    let ids = [
        (first.id.as_str(), "[first]"),
        (second.id.as_str(), "[second]"),
        (probe.as_str(), "[probe]"),
    ];
    insta::assert_snapshot!("first_new_id_probes", namespace_lines(&said, root, &ids));
    assert_carries_only(root, &second.id, &first.id);
    assert_carries_only(root, &second.id, &probe);
    assert_loads_under(root, &second.id);
    assert_binding_as_compiled(root);

    // From then on: no compiler.
    git(root, &["commit", "-q", "--allow-empty", "-m", "again"]);
    let said = build_verbose(root, &launcher);
    assert_eq!(launcher.take(), Vec::<String>::new(), "{said}");
    let third = build(root, &launcher);
    let ids = [
        (first.id.as_str(), "[first]"),
        (second.id.as_str(), "[second]"),
        (third.id.as_str(), "[third]"),
    ];
    insta::assert_snapshot!("next_id_reapplied", namespace_lines(&said, root, &ids));
    assert_carries_only(root, &third.id, &second.id);
    assert_loads_under(root, &third.id);
    assert_binding_as_compiled(root);

    // A kernel that spells the name, in a guard: compiled once with the guard, probed at the
    // next commit (its object holds nothing of the id), then re-applied like the bindings.
    let kernel = root.join("relu_cpu/relu_cpu.cpp");
    let text = std::fs::read_to_string(&kernel).unwrap();
    let guard = "#ifndef TORCH_EXTENSION_NAME\n#error built outside its extension\n#endif\n";
    std::fs::write(&kernel, format!("{guard}{text}")).unwrap();
    git(root, &["commit", "-q", "-am", "guard"]);
    let guarded = build(root, &launcher);
    assert_eq!(launcher.take(), ["relu_cpu.cpp"]);
    assert_eq!(guarded.compiled, [KERNEL]);
    assert_eq!(guarded.reapplied, [BINDING]);
    git(
        root,
        &["commit", "-q", "--allow-empty", "-m", "probe the kernel"],
    );
    let probed = build(root, &launcher);
    assert_eq!(launcher.take(), ["relu_cpu.cpp"]);
    assert_eq!(probed.compiled, [KERNEL]);
    assert_eq!(probed.reapplied, [KERNEL, BINDING]);
    git(root, &["commit", "-q", "--allow-empty", "-m", "again"]);
    let last = build(root, &launcher);
    assert_eq!(launcher.take(), Vec::<String>::new());
    assert_eq!(last.compiled, Vec::<String>::new());
    assert_eq!(last.reapplied, [KERNEL, BINDING]);
    assert_carries_only(root, &last.id, &probed.id);
    assert_loads_under(root, &last.id);
}

/// The kept copies of the binding's object, by the length they are kept for.
fn kept_copies(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = walkdir::WalkDir::new(root.join("build/.kbuild"))
        .into_iter()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("torch_binding") && n.ends_with(".o") && n.contains(".ns"))
        .map(|n| n.rsplit('.').nth(1).unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn switching_between_dirty_and_clean_recompiles_the_binding_only_until_each_length_is_learned() {
    let project = committed_relu();
    let root = project.path();
    let logs = tempfile::tempdir().unwrap();
    let launcher = CountingLauncher::new(logs.path());
    let clean = build(root, &launcher);
    assert_eq!(launcher.take(), ["relu_cpu.cpp", "torch_binding.cpp"]);

    // A tracked file changed: the id gains `_dirty`, another length: the bindings compile, and
    // their object for the clean length is kept aside.
    std::fs::write(root.join("README.md"), "# relu, edited\n").unwrap();
    let said = build_verbose(root, &launcher);
    assert_eq!(launcher.take(), ["torch_binding.cpp"], "{said}");
    let dirty = build(root, &launcher);
    assert_eq!(dirty.id, format!("{}_dirty", clean.id));
    let ids = [
        (clean.id.as_str(), "[clean]"),
        (dirty.id.as_str(), "[dirty]"),
    ];
    insta::assert_snapshot!("dirty_recompiles", namespace_lines(&said, root, &ids));
    assert_carries_only(root, &dirty.id, &clean.id);
    assert_loads_under(root, &dirty.id);

    // Committed: the clean copy comes back, and learns its places from a probe (one compile).
    git(root, &["commit", "-q", "-am", "readme"]);
    let said = build_verbose(root, &launcher);
    assert_eq!(launcher.take(), ["torch_binding.cpp"], "the probe\n{said}");
    let committed = build(root, &launcher);
    let probe = probe_in(&said);
    let ids = [
        (clean.id.as_str(), "[clean]"),
        (dirty.id.as_str(), "[dirty]"),
        (committed.id.as_str(), "[committed]"),
        (probe.as_str(), "[probe]"),
    ];
    insta::assert_snapshot!("clean_again_probes", namespace_lines(&said, root, &ids));
    assert_carries_only(root, &committed.id, &clean.id);
    // Edited again: the dirty copy comes back and is probed likewise.
    std::fs::write(root.join("README.md"), "# relu, edited twice\n").unwrap();
    build(root, &launcher);
    assert_eq!(launcher.take(), ["torch_binding.cpp"], "the probe");

    // Both lengths learned: commits and edits that leave the bindings' files alone compile
    // nothing for them; an edit of the kernel compiles the kernel.
    git(root, &["commit", "-q", "-am", "readme again"]);
    let said = build_verbose(root, &launcher);
    assert_eq!(launcher.take(), Vec::<String>::new(), "{said}");
    let again = build(root, &launcher);
    let ids = [
        (clean.id.as_str(), "[clean]"),
        (committed.id.as_str(), "[committed]"),
        (again.id.as_str(), "[again]"),
    ];
    insta::assert_snapshot!("copy_reapplied", namespace_lines(&said, root, &ids));
    let kernel = root.join("relu_cpu/relu_cpu.cpp");
    let text = std::fs::read_to_string(&kernel).unwrap();
    std::fs::write(&kernel, format!("// edited\n{text}")).unwrap();
    let edited = build(root, &launcher);
    assert_eq!(launcher.take(), ["relu_cpu.cpp"]);
    assert_eq!(edited.id, format!("{}_dirty", again.id));
    assert_eq!(edited.compiled, [KERNEL]);
    assert_eq!(edited.reapplied, [BINDING]);
    assert_carries_only(root, &edited.id, &committed.id);
    assert_loads_under(root, &edited.id);
    git(root, &["commit", "-q", "-am", "kernel"]);
    let last = build(root, &launcher);
    assert_eq!(launcher.take(), Vec::<String>::new());
    assert_eq!(last.reapplied, [BINDING]);
    assert_carries_only(root, &last.id, &again.id);
    assert_loads_under(root, &last.id);
    assert_binding_as_compiled(root);

    // One copy per length, the one in use not among them; `kbuild clean` removes it.
    let dirty_len = edited.id.len().to_string();
    assert_eq!(kept_copies(root), [format!("ns{dirty_len}")]);
    assert!(run(kbuild(root).arg("clean")).status.success());
    assert_eq!(kept_copies(root), Vec::<String>::new());
}

/// relu-v5 whose bindings also register `id_digits() -> int`: how many characters of the op
/// namespace are digits, folded at compile time (no byte of the id in its code, only the
/// count).
fn relu_counting_id_digits() -> tempfile::TempDir {
    let project = fixture("relu-v5");
    let binding = project.path().join("torch-ext/torch_binding.cpp");
    let text = std::fs::read_to_string(&binding).unwrap();
    let counted = "#define KBUILD_STR_(x) #x\n\
                   #define KBUILD_STR(x) KBUILD_STR_(x)\n\
                   constexpr int64_t digits_in(const char *s) {\n  \
                   return *s == 0 ? 0 : (*s >= '0' && *s <= '9') + digits_in(s + 1);\n}\n\
                   int64_t id_digits() {\n  \
                   constexpr int64_t n = digits_in(KBUILD_STR(TORCH_EXTENSION_NAME));\n  \
                   return n;\n}\n\n";
    let registered = text.replace(
        "  ops.def(\"relu(Tensor! out, Tensor input) -> ()\");\n",
        "  ops.def(\"relu(Tensor! out, Tensor input) -> ()\");\n  \
         ops.def(\"id_digits() -> int\", &id_digits);\n",
    );
    assert_ne!(text, registered, "the fixture's bindings changed");
    let at = registered.find("TORCH_LIBRARY_EXPAND").unwrap();
    let source = format!("{}{counted}{}", &registered[..at], &registered[at..]);
    std::fs::write(&binding, source).unwrap();
    project
}

/// `kbuild -v build --backend cpu --unique-id <id>`: what it said.
fn build_unique_verbose(root: &Path, id: &str) -> String {
    let out = run(kbuild(root).args(["-v", "build", "--backend", "cpu", "--unique-id", id]));
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{said}");
    said
}

/// What `torch.ops.<id>.id_digits()` returns once the built kernel is loaded.
fn id_digits_loaded(root: &Path, id: &str) -> i64 {
    let code = format!(
        "import pathlib, torch, kernels\n\
         kernels.get_local_kernel(pathlib.Path({:?}), backend='cpu')\n\
         print(getattr(torch.ops, {id:?}).id_digits())",
        root.display().to_string()
    );
    python_ok(&code, &[]).trim().parse().unwrap()
}

/// An id of digits, then one of letters of the same length: the count of its digits (a value
/// computed from the id, folded by the compiler) is no character of the id, and the probe
/// (which changes each character's class) finds it, so the bindings compile under the new id.
#[test]
fn a_value_folded_from_the_ids_characters_is_never_carried_over_to_a_new_id() {
    let project = relu_counting_id_digits();
    let root = project.path();
    build_unique_verbose(root, "1234567");
    assert_eq!(id_digits_loaded(root, "_relu_cpu_1234567"), 7);

    let said = build_unique_verbose(root, "abcdefg");
    assert_eq!(
        id_digits_loaded(root, "_relu_cpu_abcdefg"),
        0,
        "the bindings kept the old id's count\n{said}"
    );
    // Probed, and compiled: nothing re-applied.
    insta::assert_snapshot!("probed_not_patchable", namespace_lines(&said, root, &[]));

    // Recorded as not patchable: the next id of that length compiles without a probe.
    let said = build_unique_verbose(root, "7654321");
    insta::assert_snapshot!("known_not_patchable", namespace_lines(&said, root, &[]));
    assert_eq!(id_digits_loaded(root, "_relu_cpu_7654321"), 7);
}

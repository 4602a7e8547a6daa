//! Helpers shared by the compile tests: a fake compiler that records its argv, and job builders.
// Each test crate uses a different subset.

use std::path::{Path, PathBuf};

use kbuild::config::Capability;
use kbuild::plan::{CompileJob, Gencode, Lang};

/// A shell script standing in for nvcc/g++. It appends its argv to `log` (one line per run),
/// writes `-o` (a copy of the source) and `-MF` (the source plus its direct `#include "…"`s,
/// except those between `#if __CUDA_ARCH__` and `#endif`, like a host-only pass), fails with a
/// diagnostic when the source holds `#error`, and obeys `SLEEP n` in the source before that.
/// As a preprocessor (`-E SRC -o OUT`) it writes the source and those headers with
/// `TORCH_EXTENSION_NAME` replaced by its `-D` value.
pub struct FakeCompiler {
    pub path: PathBuf,
    pub log: PathBuf,
}

impl FakeCompiler {
    pub fn new(dir: &Path) -> Self {
        let path = dir.join("fakecc");
        let log = dir.join("fakecc.log");
        let script = format!(
            r#"#!/bin/sh
echo "$@" >> '{log}'
src= obj= dep= incs= pre= ns=
while [ $# -gt 0 ]; do
  case "$1" in
    -c) src=$2; shift ;;
    -E) src=$2; pre=1; shift ;;
    -DTORCH_EXTENSION_NAME=*) ns=${{1#-DTORCH_EXTENSION_NAME=}} ;;
    -o) obj=$2; shift ;;
    -MF) dep=$2; shift ;;
    -I*) incs="$incs ${{1#-I}}" ;;
  esac
  shift
done
deps_of() {{
  dir=$(dirname "$src")
  deps="$src"
  for h in $(sed '/#if __CUDA_ARCH__/,/#endif/d' "$src" | sed -n 's/^#include "\(.*\)"/\1/p'); do
    for d in "$dir" $incs; do
      if [ -f "$d/$h" ]; then deps="$deps $d/$h"; break; fi
    done
  done
}}
if [ -n "$pre" ]; then deps_of; cat $deps | sed "s/TORCH_EXTENSION_NAME/$ns/g" > "$obj"; exit 0; fi
echo $$ > "$src.pid"
s=$(sed -n 's/.*SLEEP \([0-9]*\).*/\1/p' "$src")
if [ -n "$s" ]; then sleep "$s" & echo $! > "$src.sleeppid"; wait; fi
if grep -q '#error' "$src"; then echo "$src:1: error: #error boom" >&2; exit 1; fi
deps_of
echo "$obj: $deps" > "$dep"
cat "$src" > "$obj"
"#,
            log = log.display()
        );
        std::fs::write(&path, script).unwrap();
        make_executable(&path);
        std::fs::write(&log, "").unwrap();
        FakeCompiler { path, log }
    }

    /// File names of the sources compiled since the last call, sorted; clears the log.
    pub fn take_compiled(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap();
        std::fs::write(&self.log, "").unwrap();
        let mut names: Vec<String> = text
            .lines()
            .filter_map(|line| {
                let mut words = line.split(' ');
                words.find(|w| *w == "-c")?;
                let src = words.next()?;
                Some(Path::new(src).file_name()?.to_string_lossy().into_owned())
            })
            .collect();
        names.sort();
        names
    }
}

pub fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A `Lang::Cxx` job for `<root>/<name>` writing into `<root>/obj`, with `<root>/include` on
/// the include path.
pub fn job(root: &Path, compiler: &Path, name: &str) -> CompileJob {
    let stem = Path::new(name)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    CompileJob {
        label: name.to_string(),
        lang: Lang::Cxx,
        compiler: compiler.to_path_buf(),
        host_compiler: None,
        source: root.join(name),
        object: root.join("obj").join(format!("{stem}.o")),
        depfile: root.join("obj").join(format!("{stem}.d")),
        std: "c++20".to_string(),
        include_dirs: vec![root.join("include")],
        system_include_dirs: vec![],
        defines: vec![],
        flags: vec![],
        host_flags: vec!["-fPIC".to_string()],
        gencodes: vec![],
        compiler_id: "fake 1.0".to_string(),
    }
}

pub fn gencode(major: u32, minor: u32, ptx: bool) -> Gencode {
    Gencode {
        capability: Capability {
            major,
            minor,
            suffix: None,
        },
        ptx,
    }
}

/// Write `text` to `<root>/<rel>`, creating directories.
pub fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

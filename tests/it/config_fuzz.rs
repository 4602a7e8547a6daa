//! A bounded fuzz target for the build.toml reader (issue #9): deterministic mutations of the
//! fixtures' build.toml files, spliced with TOML fragments of the shapes HF projects use, fed
//! to `config::parse_str` in-process. Every input must come back as a project or an error that
//! renders (message, location, hint) without a panic, each within a time bound.
//!
//! `KBUILD_FUZZ_ITERS` (default 20,000) sets the number of executions, `KBUILD_FUZZ_SEED` the
//! RNG seed, and `KBUILD_FUZZ_SEEDS` a directory whose `*/build.toml` files join the seeds
//! (e.g. `/work/corpus/kernels-community`). A long run:
//! `KBUILD_FUZZ_ITERS=1000000 cargo test --release --test config_fuzz -- --nocapture`.
//! A panicking input is written to `target/config-fuzz-crash-<n>.toml`, a slow one to
//! `target/config-fuzz-slow-<n>.toml`.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kbuild::config::{ErrorKind, parse_str};
use kbuild::hint::Hint;

/// Fragments that steer mutations into the reader's paths: tables, keys, every value type,
/// TOML's tricky syntax (dotted keys, inline tables, multi-line strings) and non-ASCII text.
const FRAGMENTS: &[&str] = &[
    "[general]\n",
    "[general.cuda]\n",
    "[general.hub]\n",
    "[torch]\n",
    "[torch-noarch]\n",
    "[tvm-ffi]\n",
    "[kbuild.cuda-capabilities]\n",
    "[kernel.k]\n",
    "[kernel.\"a b\"]\n",
    "[[kernel]]\n",
    "[torch.stable-abi]\n",
    "edition = 5\n",
    "edition = 4\n",
    "name = \"x\"\n",
    "version = 1\n",
    "version = -1\n",
    "version = 99999999999999999999\n",
    "version = 0x10\n",
    "license = \"apache-2.0\"\n",
    "backends = [\"cpu\", \"cuda\", \"rocm\", \"metal\", \"xpu\", \"neuron\", \"tpu\"]\n",
    "backend = \"cuda\"\n",
    "backend = \"cpu\"\n",
    "depends = [\"torch\", \"cutlass_3_9\", \"metal-cpp\"]\n",
    "src = [\"a.cu\", \"../x.cu\", \"/etc/passwd\", \".\", \"\"]\n",
    "include = [\".\", \"..\", \"x\"]\n",
    "cuda-capabilities = [\"7.5\", \"9.0a\", \"10.0f\", \"12.x\", \"\"]\n",
    "cuda_capabilities = [\"8.0\"]\n",
    "\"8.0\" = [\"float32\", \"bfloat16\", \"float16\", \"int8\"]\n",
    "minver = \"2.5\"\nmaxver = \"2.1\"\n",
    "cuda-minver = \"12.8\"\n",
    "python-depends = [\"einops\", \"nvidia-cutlass-dsl\"]\n",
    "pyext = [\"py\", \"json\", \"\"]\n",
    "repo-id = \"org/name\"\n",
    "hub.repo-id = \"a/b\"\n",
    "stable-abi = \"2.10\"\n",
    "stable-abi = { cuda = \"2.10\", cpu = \"x\" }\n",
    "cxx-flags = [\"-O3\"]\ncuda-flags = [\"--use_fast_math\"]\n",
    "x = { a = 1, b = [1, \"2\", {c = 3}] }\n",
    "x = \"\"\"\nmulti\nline\"\"\"\n",
    "x = '''lit'''\n",
    "x = 1979-05-27T07:32:00Z\n",
    "x = inf\ny = nan\nz = 1e400\n",
    "x = true\n",
    "a.b.c = 1\n",
    "\"é\" = \"ü\\u00e9\"\n",
    "# comment\n",
    "\u{feff}",
    "\r\n",
    "\t",
    "=",
    "[",
    "]",
    "\"",
    "'",
    "{",
    "}",
    ",",
    ".",
    "\\",
    "\0",
];

/// Right-hand sides that replace a value: each TOML type, and strings the validators look at.
const VALUES: &[&str] = &[
    "1",
    "0",
    "-7",
    "5",
    "4",
    "1.5",
    "true",
    "\"\"",
    "\"cuda\"",
    "\"cpu\"",
    "\"rocm\"",
    "\"9.0\"",
    "\"9.0a\"",
    "\"bfloat16\"",
    "\"torch\"",
    "\"a-b_c\"",
    "\"x/y\"",
    "\"../up\"",
    "\"é\"",
    "[]",
    "[\"cuda\"]",
    "[\"cpu\", \"cpu\"]",
    "[1, 2]",
    "[\"7.5\", \"8.0\", \"9.0\"]",
    "[\"float32\", \"float16\"]",
    "{}",
    "{ a = 1 }",
    "\"2.5\"",
    "\"2.10.1\"",
    "\"apache-2.0\"",
];

/// xorshift64*: small, fast and reproducible from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

/// `(build.toml text, its project directory)` of every seed.
fn seeds() -> Vec<(Vec<u8>, PathBuf)> {
    let mut dirs: Vec<PathBuf> = [
        "relu-v4",
        "relu-v5",
        "silu-noarch",
        "config/edition5",
        "config/v4",
    ]
    .iter()
    .map(|d| crate::common::kbuild::repo().join("tests/fixtures").join(d))
    .collect();
    if let Some(extra) = std::env::var_os("KBUILD_FUZZ_SEEDS") {
        let mut found: Vec<PathBuf> = std::fs::read_dir(extra)
            .expect("KBUILD_FUZZ_SEEDS is a directory")
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|d| d.join("build.toml").is_file())
            .collect();
        found.sort();
        dirs.extend(found);
    }
    dirs.into_iter()
        .map(|d| (std::fs::read(d.join("build.toml")).unwrap(), d))
        .collect()
}

/// The start of each line of `text` (and its end).
fn line_starts(text: &[u8]) -> Vec<usize> {
    std::iter::once(0)
        .chain(
            text.iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect()
}

/// One to three mutations of `input`, most of them line-aware so that many mutants stay TOML
/// and reach the schema and the validators: replace a value, insert a fragment or another
/// seed's lines at a line start, or (less often) flip, insert, delete or duplicate bytes.
fn mutate(rng: &mut Rng, input: &[u8], seeds: &[(Vec<u8>, PathBuf)]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(3) {
        let lines = line_starts(&out);
        let line = lines[rng.below(lines.len())];
        match rng.below(20) {
            0..=7 => {
                // Replace the value of the first `key = value` line at or after `line`.
                let Some(eq) = out[line..].windows(3).position(|w| w == b" = ") else {
                    continue;
                };
                let start = line + eq + 3;
                let end = out[start..]
                    .iter()
                    .position(|b| *b == b'\n')
                    .map_or(out.len(), |i| start + i);
                let value = VALUES[rng.below(VALUES.len())].as_bytes();
                out.splice(start..end, value.iter().copied());
            }
            8..=11 => {
                let fragment = FRAGMENTS[rng.below(FRAGMENTS.len())].as_bytes();
                out.splice(line..line, fragment.iter().copied());
            }
            12..=13 => {
                // Delete whole lines.
                let end = lines
                    .iter()
                    .copied()
                    .find(|&l| l > line + rng.below(80))
                    .unwrap_or(out.len());
                out.drain(line..end.max(line));
            }
            14..=15 => {
                let other = &seeds[rng.below(seeds.len())].0;
                let theirs = line_starts(other);
                let from = rng.below(theirs.len());
                let to = (from + 1 + rng.below(4)).min(theirs.len() - 1);
                let piece = other[theirs[from]..theirs[to].max(theirs[from])].to_vec();
                out.splice(line..line, piece);
            }
            16 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            17 => {
                let at = rng.below(out.len() + 1);
                out.insert(at, rng.next() as u8);
            }
            18 if !out.is_empty() => {
                let at = rng.below(out.len());
                let end = (at + 1 + rng.below(32)).min(out.len());
                out.drain(at..end);
            }
            _ if !out.is_empty() => {
                let at = rng.below(out.len() + 1);
                let start = rng.below(out.len());
                let end = (start + 1 + rng.below(64)).min(out.len());
                let piece = out[start..end].to_vec();
                out.splice(at..at, piece);
            }
            _ => {}
        }
    }
    out
}

/// Parse and render everything a user would see; a panic here is the bug being hunted.
/// `Ok` for a valid project, else the kind of error.
fn exercise(text: &str, root: &Path) -> Result<(), Option<ErrorKind>> {
    match parse_str(text, &root.join("build.toml"), root) {
        Ok(project) => {
            for warning in &project.warnings {
                let _ = warning.to_string();
            }
            let _ = format!("{project:?}");
            Ok(())
        }
        Err(err) => {
            let _ = err.to_string();
            let _ = err.hint();
            let _ = err.location().map(ToString::to_string);
            Err(err.kind())
        }
    }
}

#[test]
fn mutated_build_toml_never_panics_or_hangs() {
    let iterations = env_number("KBUILD_FUZZ_ITERS", 20_000);
    let mut rng = Rng(env_number("KBUILD_FUZZ_SEED", 0x9E37_79B9_7F4A_7C15).max(1));
    let seeds = seeds();
    // Generous for a loaded CI machine: a slow input is a bug (quadratic suggestion search,
    // runaway spans), not one off by a few milliseconds.
    let limit = Duration::from_secs(2);
    let started = Instant::now();
    let (mut ok, mut slowest) = (0u64, Duration::ZERO);
    let mut kinds = std::collections::BTreeMap::new();
    // The inputs are kept as corpus entries only while they stay small, so the run stays
    // bounded in memory; each mutation starts from a seed or a kept entry.
    let mut corpus: Vec<(Vec<u8>, usize)> = seeds
        .iter()
        .enumerate()
        .map(|(i, (b, _))| (b.clone(), i))
        .collect();
    for n in 0..iterations {
        let (base, seed) = &corpus[rng.below(corpus.len())];
        let seed = *seed;
        let bytes = mutate(&mut rng, base, &seeds);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let root = &seeds[seed].1;
        let one = Instant::now();
        let Ok(outcome) = catch_unwind(AssertUnwindSafe(|| exercise(&text, root))) else {
            let path =
                crate::common::kbuild::repo().join(format!("target/config-fuzz-crash-{n}.toml"));
            std::fs::write(&path, &text).unwrap();
            panic!(
                "input {n} panicked the reader; written to {}",
                path.display()
            );
        };
        let took = one.elapsed();
        if took >= limit {
            let path =
                crate::common::kbuild::repo().join(format!("target/config-fuzz-slow-{n}.toml"));
            std::fs::write(&path, &text).unwrap();
            panic!("input {n} took {took:?}; written to {}", path.display());
        }
        slowest = slowest.max(took);
        // Mutants that got past the TOML syntax are kept more often: mutating them reaches
        // the schema and the validators.
        let keep = match outcome {
            Ok(()) => {
                ok += 1;
                2
            }
            Err(Some(ErrorKind::Syntax)) => 64,
            Err(_) => 8,
        };
        let kind = match outcome {
            Ok(()) => "valid".to_string(),
            Err(kind) => kind.map_or("other".into(), |k| format!("{k:?}")),
        };
        *kinds.entry(kind).or_insert(0u64) += 1;
        if bytes.len() < 8 << 10 && corpus.len() < 4096 && rng.below(keep) == 0 {
            corpus.push((bytes, seed));
        }
    }
    eprintln!(
        "config fuzz: {iterations} executions ({ok} parsed as valid projects) in {:.1?}, \
         slowest input {slowest:?}, {} seeds; outcomes by error kind: {kinds:?}",
        started.elapsed(),
        seeds.len()
    );
}

//! A bounded fuzz suite over what kbuild reads from others (issue #43): artifacts (`.tar.gz`),
//! wheels, Redis replies and remote cache URLs (`build.toml` has its own, `config_fuzz.rs`).
//! Deterministic mutations of real seeds (the artifact and the wheel `kbuild pack` and
//! `kbuild wheel` write for the noarch fixture, the replies a Redis server sends, the URLs the
//! docs show), structure-aware where it reaches further (tar headers, zip records, reply
//! lengths), fed to kbuild's readers in-process: every input must come back as a value or an
//! error that renders, without a panic, each within a time bound.
//!
//! Each target runs for `KBUILD_FUZZ_SECONDS` (default 2: what `scripts/test` spends) or
//! `KBUILD_FUZZ_ITERS` executions, whichever ends first; `KBUILD_FUZZ_SEED` sets the RNG seed;
//! `KBUILD_FUZZ_REPORT=FILE` appends one JSON line per target. A long run:
//! `KBUILD_FUZZ_SECONDS=300 KBUILD_FUZZ_REPORT=fuzz.jsonl cargo test --release --test it
//! input_fuzz -- --test-threads 1`. An input that panics or takes longer than the bound is
//! written to `target/input-fuzz-<target>-<crash|slow>-<n>.bin`, and the test fails.

use std::io::{Read as _, Write as _};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kbuild::compile::{check_remote_url, parse_redis_reply};
use kbuild::package::{UnpackLimits, unpack_artifact, unpack_wheel};

use crate::common::kbuild::{fixture, kbuild, repo, run};

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

/// Byte strings that steer a mutation to the edges readers get wrong.
const TOKENS: &[&[u8]] = &[
    b"-1",
    b"0",
    b"4294967296",
    b"1099511627776",
    b"99999999999999999999",
    b"\r\n",
    b"\r",
    b"\n",
    b"\0",
    b"../",
    b"/etc/",
    b"..",
    b"@",
    b":",
    b"%",
    b"%zz",
    b"\xff\xfe",
    b"\xc3\xa9",
    b"//",
    b"[::1]",
];

/// One to four generic mutations of `input`: flip, set, insert, delete, duplicate, a token, or
/// a piece of another seed.
fn mutate_bytes(rng: &mut Rng, input: &[u8], seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(out.len() + 1);
        match rng.below(8) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] = [0u8, 0xff, 0x7f, 0x80, b'0', b'9'][rng.below(6)];
            }
            2 => out.insert(at, rng.next() as u8),
            3 if !out.is_empty() => {
                let end = (at + 1 + rng.below(64)).min(out.len());
                out.drain(at.min(end)..end);
            }
            4 if !out.is_empty() => {
                let start = rng.below(out.len());
                let end = (start + 1 + rng.below(256)).min(out.len());
                let piece = out[start..end].to_vec();
                out.splice(at..at, piece);
            }
            5 | 6 => {
                let token = TOKENS[rng.below(TOKENS.len())];
                out.splice(at..at, token.iter().copied());
            }
            _ => {
                let other = &seeds[rng.below(seeds.len())];
                if !other.is_empty() {
                    let start = rng.below(other.len());
                    let end = (start + 1 + rng.below(128)).min(other.len());
                    out.splice(at..at, other[start..end].iter().copied());
                }
            }
        }
    }
    out
}

/// What one execution came to: accepted, or refused (the error was rendered).
enum Outcome {
    Accepted,
    Refused,
}

/// Run `target` on mutants of `seeds` for the budget; panics (the test fails) on an input that
/// panics or takes longer than `limit`, after writing it under `target/`.
fn fuzz(
    name: &str,
    seeds: Vec<Vec<u8>>,
    mutate: impl Fn(&mut Rng, &[u8], &[Vec<u8>]) -> Vec<u8>,
    target: impl Fn(&[u8], u64) -> Outcome,
) {
    let seconds = env_number("KBUILD_FUZZ_SECONDS", 2);
    let iterations = env_number("KBUILD_FUZZ_ITERS", u64::MAX);
    let seed = env_number("KBUILD_FUZZ_SEED", 0x9E37_79B9_7F4A_7C15).max(1);
    let mut rng = Rng(seed);
    let limit = Duration::from_secs(2);
    let budget = Duration::from_secs(seconds);
    let started = Instant::now();
    let mut corpus = seeds.clone();
    let (mut n, mut accepted, mut slowest) = (0u64, 0u64, Duration::ZERO);
    while n < iterations && started.elapsed() < budget {
        let base = &corpus[rng.below(corpus.len())];
        let input = mutate(&mut rng, base, &seeds);
        let one = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| target(&input, n)));
        let took = one.elapsed();
        let kept = |kind: &str| {
            let path = repo().join(format!("target/input-fuzz-{name}-{kind}-{n}.bin"));
            std::fs::write(&path, &input).unwrap();
            path
        };
        let Ok(outcome) = outcome else {
            panic!(
                "{name}: input {n} panicked; written to {}",
                kept("crash").display()
            );
        };
        if took >= limit {
            let path = kept("slow");
            panic!(
                "{name}: input {n} took {took:?}; written to {}",
                path.display()
            );
        }
        slowest = slowest.max(took);
        let keep = match outcome {
            Outcome::Accepted => {
                accepted += 1;
                4
            }
            Outcome::Refused => 32,
        };
        if input.len() < 1 << 20 && corpus.len() < 1024 && rng.below(keep) == 0 {
            corpus.push(input);
        }
        n += 1;
    }
    let line = serde_json::json!({
        "target": name,
        "executions": n,
        "accepted": accepted,
        "panics": 0,
        "hangs": 0,
        "slowest_ms": slowest.as_secs_f64() * 1000.0,
        "seconds": started.elapsed().as_secs_f64(),
        "seed": seed,
    });
    eprintln!("{line}");
    if let Ok(path) = std::env::var("KBUILD_FUZZ_REPORT") {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        writeln!(file, "{line}").unwrap();
    }
    assert!(n > 0, "{name}: no execution ran");
}

/// The replies a Redis server sends kbuild (GET's value, nil, OK, errors, integers), and a few
/// it never should (arrays, RESP3).
fn reply_seeds() -> Vec<Vec<u8>> {
    let entry = br#"{"label":"a.cpp","object_sha256":"00","deps":[["<project>/a.h","11"]],"any_namespace":true}"#;
    let mut bulk = format!("${}\r\n", entry.len()).into_bytes();
    bulk.extend_from_slice(entry);
    bulk.extend_from_slice(b"\r\n");
    [
        &b"+OK\r\n"[..],
        b"$-1\r\n",
        b"$5\r\nhello\r\n",
        b"$0\r\n\r\n",
        b"-ERR unknown command\r\n",
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
        b":42\r\n",
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"_\r\n",
        &bulk,
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect()
}

/// A reply's length field replaced by an edge value, else generic mutations.
fn mutate_reply(rng: &mut Rng, input: &[u8], seeds: &[Vec<u8>]) -> Vec<u8> {
    if rng.below(4) == 0 && input.first() == Some(&b'$') {
        let end = input
            .iter()
            .position(|b| *b == b'\r')
            .unwrap_or(input.len());
        let lengths: [&[u8]; 6] = [
            b"-1",
            b"-2",
            b"4294967296",
            b"18446744073709551615",
            b"",
            b"1e3",
        ];
        let mut out = b"$".to_vec();
        out.extend_from_slice(lengths[rng.below(lengths.len())]);
        out.extend_from_slice(&input[end..]);
        return out;
    }
    mutate_bytes(rng, input, seeds)
}

#[test]
fn mutated_redis_replies_never_panic_or_hang() {
    fuzz(
        "redis-reply",
        reply_seeds(),
        mutate_reply,
        |input, _| match parse_redis_reply(input) {
            Ok(_) => Outcome::Accepted,
            Err(why) => {
                assert!(!why.is_empty());
                Outcome::Refused
            }
        },
    );
}

#[test]
fn mutated_remote_cache_urls_never_panic_and_never_show_a_login() {
    let seeds = [
        "redis://127.0.0.1:6379",
        "redis://:hunter2PW@cache.local:6380/2",
        "redis://aliceUSR:hunter2PW@[::1]:7000/0",
        "redis://alice:p%40ss%2Fw@h",
        "https://robot:hunter2PW@hub.example/api/x@y",
    ];
    let seeds = seeds.iter().map(|s| s.as_bytes().to_vec()).collect();
    fuzz("remote-url", seeds, mutate_bytes, |input, _| {
        let url = String::from_utf8_lossy(input);
        let shown = kbuild::redact::url(&url);
        // One `@` at most (the last), after `***` or a scheme's `://`: no login is left.
        let before = shown.rfind('@').map_or("", |at| &shown[..at]);
        let hidden = before.is_empty() || before.ends_with("***");
        assert!(
            hidden && !before.contains('@'),
            "{url:?} shows its login: {shown}"
        );
        // Free text: a login is known only in a well-formed URL; this must not panic.
        let _ = kbuild::redact::urls_in(&format!("failed: `{url}` (see {url})"));
        match check_remote_url(&url) {
            Ok(()) => Outcome::Accepted,
            Err(why) => {
                assert!(!why.contains("hunter2PW"), "{url:?}: {why}");
                Outcome::Refused
            }
        }
    });
}

/// The noarch fixture built, packed and made a wheel: the artifact's and the wheel's bytes.
fn built_seeds() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let project = fixture("silu-noarch");
    let root = project.path();
    assert!(run(kbuild(root).arg("wheel")).status.success());
    assert!(run(kbuild(root).arg("pack")).status.success());
    let find = |ext: &str| {
        let found = std::fs::read_dir(root.join("dist")).unwrap().find_map(|e| {
            let path = e.unwrap().path();
            path.to_string_lossy().ends_with(ext).then_some(path)
        });
        found.unwrap_or_else(|| panic!("no {ext} in dist"))
    };
    let (artifact, wheel) = (find(".tar.gz"), find(".whl"));
    (project, artifact, wheel)
}

/// Where each execution writes its input and unpacks it, emptied after.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Self {
        Scratch {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// `input` written as `name`, and a fresh directory to unpack into.
    fn place(&self, name: &str, input: &[u8]) -> (PathBuf, PathBuf) {
        let path = self.dir.path().join(name);
        std::fs::write(&path, input).unwrap();
        let into = self.dir.path().join("out");
        let _ = std::fs::remove_dir_all(&into);
        (path, into)
    }
}

/// A limit small enough that a bomb is refused at once.
fn limits() -> UnpackLimits {
    UnpackLimits {
        max_total: 16 << 20,
    }
}

/// The uncompressed tar inside `gz`.
fn gunzip(gz: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_end(&mut out)
        .unwrap();
    out
}

fn gzip(tar: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(tar).unwrap();
    gz.finish().unwrap()
}

/// A tar (uncompressed) with one header field of one entry set to an edge value, else
/// generic mutations; gzipped (sometimes the gzip stream itself is mutated instead).
fn mutate_tar(rng: &mut Rng, tar: &[u8], seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut out = tar.to_vec();
    let headers: Vec<usize> = (0..out.len() / 512)
        .map(|b| b * 512)
        .filter(|&at| out.get(at + 257..at + 262) == Some(b"ustar"))
        .collect();
    match rng.below(4) {
        0 if !headers.is_empty() => {
            let at = headers[rng.below(headers.len())];
            // name (0, 100), mode (100, 8), size (124, 12), typeflag (156, 1), linkname (157).
            let (offset, values): (usize, &[&[u8]]) = match rng.below(4) {
                0 => (
                    0,
                    &[
                        b"../../escape\0",
                        b"/etc/passwd\0",
                        b"a/./b\0",
                        b"\0",
                        b"x/\0",
                    ],
                ),
                1 => (
                    124,
                    &[
                        b"77777777777\0",
                        b"00000000000\0",
                        b"-1\0",
                        b"\x80\0\0\0\0\0\0\0\0\0\0\x10",
                    ],
                ),
                2 => (156, &[b"1", b"2", b"5", b"L", b"x", b"g", b"3", b"7"]),
                _ => (157, &[b"../../etc/passwd\0", b"/\0", b"\0"]),
            };
            let value = values[rng.below(values.len())];
            let end = (at + offset + value.len()).min(out.len());
            out[at + offset..end].copy_from_slice(&value[..end - at - offset]);
            seal(&mut out, at);
        }
        1 => return mutate_bytes(rng, &gzip(&out), seeds),
        _ => {
            out = mutate_bytes(rng, &out, seeds);
            // Mostly past the header checksums, to reach kbuild's own checks.
            if rng.below(4) != 0 {
                for at in headers {
                    seal(&mut out, at);
                }
            }
        }
    }
    gzip(&out)
}

/// Write the checksum of the tar header at `at` as a valid one would hold.
fn seal(tar: &mut [u8], at: usize) {
    let Some(header) = tar.get_mut(at..at + 512) else {
        return;
    };
    header[148..156].fill(b' ');
    let sum: u32 = header.iter().map(|b| u32::from(*b)).sum();
    header[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
}

#[test]
fn mutated_artifacts_never_panic_hang_or_write_outside_their_directory() {
    let (_project, artifact, _) = built_seeds();
    let seeds = vec![gunzip(&std::fs::read(&artifact).unwrap())];
    let name = artifact.file_name().unwrap().to_string_lossy().into_owned();
    let scratch = Scratch::new();
    fuzz("artifact", seeds, mutate_tar, |input, _| {
        let (path, into) = scratch.place(&name, input);
        let outcome = match unpack_artifact(&path, &into, limits()) {
            Ok(_) => Outcome::Accepted,
            Err(e) => {
                let _ = e.to_string();
                Outcome::Refused
            }
        };
        assert_nothing_outside(scratch.dir.path(), &[&path, &into]);
        outcome
    });
}

/// A zip with bytes near one of its records' signatures (`PK…`) mutated, else anywhere.
fn mutate_zip(rng: &mut Rng, zip: &[u8], seeds: &[Vec<u8>]) -> Vec<u8> {
    let records: Vec<usize> = (zip.windows(2).enumerate())
        .filter(|(_, w)| *w == b"PK")
        .map(|(i, _)| i)
        .collect();
    if records.is_empty() || rng.below(2) == 0 {
        return mutate_bytes(rng, zip, seeds);
    }
    let at = records[rng.below(records.len())];
    let end = (at + 64).min(zip.len());
    let mut out = zip.to_vec();
    let field = mutate_bytes(rng, &zip[at..end], seeds);
    out.splice(at..end, field);
    out
}

#[test]
fn mutated_wheels_never_panic_hang_or_write_outside_their_directory() {
    let (_project, _, wheel) = built_seeds();
    let seeds = vec![std::fs::read(&wheel).unwrap()];
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    let scratch = Scratch::new();
    fuzz("wheel", seeds, mutate_zip, |input, _| {
        let (path, into) = scratch.place(&name, input);
        std::fs::create_dir_all(&into).unwrap();
        let outcome = match unpack_wheel(&path, &into, limits()) {
            Ok(()) => Outcome::Accepted,
            Err(e) => {
                let _ = e.to_string();
                Outcome::Refused
            }
        };
        assert_nothing_outside(scratch.dir.path(), &[&path, &into]);
        outcome
    });
}

/// `dir` holds nothing but `allowed`: an entry that escaped its directory would show here.
fn assert_nothing_outside(dir: &Path, allowed: &[&Path]) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        assert!(
            allowed.iter().any(|a| *a == path),
            "`{}` was written outside the unpack directory",
            path.display()
        );
    }
}

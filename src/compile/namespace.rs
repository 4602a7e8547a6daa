//! Re-applying the op namespace to a cached object instead of compiling it again.
//!
//! A new commit changes `TORCH_EXTENSION_NAME`'s value (`_relu_cpu_0b016b8` → `_relu_cpu_4c1f9e2`)
//! and nothing else. In a host C++ object the value lives as whole byte strings: symbol names
//! (`PyInit_<id>`, `TORCH_LIBRARY_init_<id>`, mangled names, in `.strtab`), string literals in
//! `.rodata`, section and debug strings. When a compiled object is checked to hold it only so
//! ([`patchability`]), a new id of the same byte length is written over every occurrence
//! ([`reapply`]): the offsets into the string tables and the length prefixes of mangled names
//! stay valid, so the object is the one the compiler would have made.
//!
//! What the check cannot see: code that computes with the id's characters at compile time (a
//! `constexpr` hash of the name, a comparison of it with another literal folded away). No
//! binding does that; a project that does should fix the id (`--unique-id`).

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::plan::Lang;

/// Bytes of a window of the id looked for outside its whole occurrences: a fragment of the
/// string the compiler split into instruction immediates or otherwise took apart.
const WINDOW: usize = 4;

/// Sections whose contents index names by a hash of them, or hold code where the id may be
/// encoded: writing over the names there would leave those stale.
const HASHED_SECTIONS: [&str; 6] = [
    ".debug_names",
    ".gdb_index",
    ".hash",
    ".gnu.hash",
    ".llvmbc",
    ".llvm.lto",
];

/// Whether the op namespace can be re-applied to an object by writing over its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Patchability {
    /// The id occurs `sites` times, each whole, and no other bytes hold part of its
    /// [`varying`] word.
    Patchable { sites: usize },
    /// It cannot, for this reason (shown with `-v`).
    NotPatchable { why: String },
}

/// Re-applying the namespace failed: the unit compiles instead (the reason shown with `-v`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReapplyError {
    #[error("cannot read `{}`: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`{}` changed since its cache entry was written", path.display())]
    Changed { path: PathBuf },
    #[error("its cache entry does not record the object as patchable")]
    NotPatchable,
    #[error("the object holds `{id}` {found} times where its cache entry recorded {recorded}")]
    Sites {
        id: String,
        found: usize,
        recorded: usize,
    },
    #[error("cannot write `{}`: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The object as re-applied: its new SHA-256 and whether the next id can be re-applied too.
#[derive(Debug)]
pub(crate) struct Reapplied {
    pub(crate) object_hash: String,
    pub(crate) patchability: Patchability,
}

/// Can a later id be written over `id` in `object`, a unit of `lang` just compiled? Host C++
/// only, in a relocatable ELF object without LTO code, compressed sections or name hashes;
/// `id` must occur only whole: no [`WINDOW`]-byte piece of it that holds part of its
/// [`varying`] word may occur anywhere else.
pub(crate) fn patchability(lang: Lang, object: &[u8], id: &str) -> Patchability {
    let not = |why: String| Patchability::NotPatchable { why };
    if lang == Lang::Cuda {
        return not(
            "a CUDA object: its device code may hold the id inside a compressed fatbinary".into(),
        );
    }
    if id.len() < WINDOW {
        return not(format!(
            "`{id}` is too short to tell apart from other bytes"
        ));
    }
    if let Err(why) = sections_allow(object) {
        return not(why);
    }
    let sites = occurrences(object, id.as_bytes());
    let pieces = varying_windows(id);
    let mut outside = 0;
    for site in sites.iter().copied().chain([object.len()]) {
        let between = &object[outside..site];
        if let Some(piece) = between.windows(WINDOW).find(|w| pieces.contains(w)) {
            return not(format!(
                "`{}` occurs outside the id: the compiler may have split the string",
                String::from_utf8_lossy(piece)
            ));
        }
        outside = site + id.len();
    }
    Patchability::Patchable { sites: sites.len() }
}

/// Why `to` cannot be written over `from` in an object whose [`Patchability`] is `recorded`;
/// `Ok` when it can.
pub(crate) fn can_reapply(recorded: &Patchability, from: &str, to: &str) -> Result<(), String> {
    if let Patchability::NotPatchable { why } = recorded {
        return Err(format!("it cannot be re-applied to the object: {why}"));
    }
    if from.len() != to.len() {
        return Err(format!(
            "`{to}` is {} bytes long and `{from}` {}, so the names that hold it change length",
            to.len(),
            from.len()
        ));
    }
    let checked = varying(from);
    let differ = |i: &usize| from.as_bytes()[*i] != to.as_bytes()[*i];
    if checked != varying(to)
        || (0..from.len())
            .filter(differ)
            .any(|i| !checked.contains(&i))
    {
        return Err(format!(
            "`{to}` differs from `{from}` outside its last word `{}`, the part the object was \
             checked for",
            &from[checked]
        ));
    }
    Ok(())
}

/// Write `to` over every occurrence of `from` in the object at `path`, whose content must
/// still hash to `object_hash` and hold `from` as `recorded` says; the object is replaced
/// atomically.
pub(crate) fn reapply(
    path: &Path,
    object_hash: &str,
    recorded: &Patchability,
    lang: Lang,
    (from, to): (&str, &str),
) -> Result<Reapplied, ReapplyError> {
    let Patchability::Patchable { sites } = *recorded else {
        return Err(ReapplyError::NotPatchable);
    };
    let object = std::fs::read(path).map_err(|source| ReapplyError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if hex::encode(Sha256::digest(&object)) != object_hash {
        return Err(ReapplyError::Changed {
            path: path.to_path_buf(),
        });
    }
    let (patched, found) = replace(&object, from.as_bytes(), to.as_bytes());
    if found != sites {
        return Err(ReapplyError::Sites {
            id: from.to_string(),
            found,
            recorded: sites,
        });
    }
    crate::files::write_atomic(path, &patched).map_err(|source| ReapplyError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Reapplied {
        object_hash: hex::encode(Sha256::digest(&patched)),
        patchability: patchability(lang, &patched, to),
    })
}

/// `object` with every (non-overlapping) occurrence of `from` replaced by `to`, of the same
/// length, and how many there were.
fn replace(object: &[u8], from: &[u8], to: &[u8]) -> (Vec<u8>, usize) {
    debug_assert_eq!(from.len(), to.len());
    let mut out = object.to_vec();
    let sites = occurrences(object, from);
    for &site in &sites {
        out[site..site + to.len()].copy_from_slice(to);
    }
    (out, sites.len())
}

/// Where `needle` starts in `haystack`, left to right, not overlapping.
fn occurrences(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(i) = find(&haystack[at..], needle) {
        found.push(at + i);
        at += i + needle.len();
    }
    found
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    let first = needle[0];
    let mut start = 0;
    while start + needle.len() <= haystack.len() {
        let i = start + haystack[start..].iter().position(|b| *b == first)?;
        if haystack.get(i..i + needle.len()) == Some(needle) {
            return Some(i);
        }
        start = i + 1;
    }
    None
}

/// The bytes of `id` that change from build to build: its last `_`-separated word (the commit,
/// or a `--unique-id`'s last word), the one before a `_dirty` suffix; all of it when it ends in
/// `_`.
fn varying(id: &str) -> Range<usize> {
    let base = id.strip_suffix("_dirty").unwrap_or(id);
    match base.rfind('_').map(|i| i + 1) {
        Some(start) if start < base.len() => start..base.len(),
        None if !base.is_empty() => 0..base.len(),
        _ => 0..id.len(),
    }
}

/// The [`WINDOW`]-byte pieces of `id` that hold at least one byte of its [`varying`] word.
fn varying_windows(id: &str) -> Vec<&[u8]> {
    let word = varying(id);
    (id.as_bytes().windows(WINDOW).enumerate())
        .filter(|(start, _)| *start < word.end && start + WINDOW > word.start)
        .map(|(_, w)| w)
        .collect()
}

/// `Err(why)` unless `object` is a relocatable ELF object whose sections hold names only as
/// plain bytes: no LTO code (`.gnu.lto_*`), no compressed section, no hash of a name.
fn sections_allow(object: &[u8]) -> Result<(), String> {
    use object::{BinaryFormat, Object as _, ObjectKind, ObjectSection as _, SectionFlags};
    let file = object::File::parse(object)
        .map_err(|e| format!("not an object file kbuild can read ({e})"))?;
    if file.format() != BinaryFormat::Elf || file.kind() != ObjectKind::Relocatable {
        return Err("not a relocatable ELF object".into());
    }
    for section in file.sections() {
        let name = section.name().unwrap_or_default();
        let compressed = match section.flags() {
            SectionFlags::Elf { sh_flags } => {
                sh_flags & u64::from(object::elf::SHF_COMPRESSED) != 0
            }
            _ => false,
        };
        if name.starts_with(".gnu.lto_") {
            return Err(format!("it holds link-time-optimization code (`{name}`)"));
        }
        if compressed || name.starts_with(".zdebug") {
            return Err(format!("its section `{name}` is compressed"));
        }
        if HASHED_SECTIONS.contains(&name) || name.starts_with(".apple_") {
            return Err(format!("its section `{name}` indexes names by their hash"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "_relu_cpu_0b016b8";
    const NEW: &str = "_relu_cpu_4c1f9e2";

    /// A relocatable x86-64 ELF object with one section per `(name, flags, contents)`, and
    /// `.shstrtab` naming them.
    fn elf_object(sections: &[(&str, u64, &[u8])]) -> Vec<u8> {
        let mut shstrtab = vec![0u8];
        let mut names = Vec::new();
        for (name, _, _) in sections.iter().chain([&(".shstrtab", 0, &[][..])]) {
            names.push(shstrtab.len() as u32);
            shstrtab.extend_from_slice(name.as_bytes());
            shstrtab.push(0);
        }
        let mut contents: Vec<(u32, u64, Vec<u8>)> = sections
            .iter()
            .map(|(_, flags, bytes)| (1, *flags, bytes.to_vec()))
            .collect();
        contents.push((3, 0, shstrtab));
        let mut out = vec![0u8; 64];
        let mut offsets = Vec::new();
        for (_, _, bytes) in &contents {
            offsets.push(out.len() as u64);
            out.extend_from_slice(bytes);
        }
        while out.len() % 8 != 0 {
            out.push(0);
        }
        let shoff = out.len() as u64;
        out.extend_from_slice(&[0u8; 64]);
        for (i, (kind, flags, bytes)) in contents.iter().enumerate() {
            let mut header = Vec::with_capacity(64);
            header.extend_from_slice(&names[i].to_le_bytes());
            header.extend_from_slice(&kind.to_le_bytes());
            header.extend_from_slice(&flags.to_le_bytes());
            header.extend_from_slice(&0u64.to_le_bytes());
            header.extend_from_slice(&offsets[i].to_le_bytes());
            header.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            header.extend_from_slice(&[0u8; 8]);
            header.extend_from_slice(&1u64.to_le_bytes());
            header.extend_from_slice(&0u64.to_le_bytes());
            out.extend_from_slice(&header);
        }
        let count = contents.len() as u16 + 1;
        out[..16].copy_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
        out[16..18].copy_from_slice(&1u16.to_le_bytes()); // ET_REL
        out[18..20].copy_from_slice(&62u16.to_le_bytes()); // EM_X86_64
        out[20..24].copy_from_slice(&1u32.to_le_bytes());
        out[40..48].copy_from_slice(&shoff.to_le_bytes());
        out[52..54].copy_from_slice(&64u16.to_le_bytes());
        out[58..60].copy_from_slice(&64u16.to_le_bytes());
        out[60..62].copy_from_slice(&count.to_le_bytes());
        out[62..64].copy_from_slice(&(count - 1).to_le_bytes());
        out
    }

    fn strings(parts: &[&str]) -> Vec<u8> {
        parts
            .iter()
            .flat_map(|p| [p.as_bytes(), b"\0"].concat())
            .collect()
    }

    #[test]
    fn an_object_holding_the_id_only_whole_is_patchable_and_counts_its_sites() {
        let symbol = format!("_ZL28TORCH_LIBRARY_init_{OLD}RN5torch7LibraryE");
        let rodata = strings(&[OLD, "relu(Tensor! out, Tensor input) -> ()"]);
        let strtab = strings(&[&symbol, &format!("PyInit_{OLD}"), "relu_cpu"]);
        let object = elf_object(&[(".rodata.str1.1", 0x32, &rodata), (".strtab", 0, &strtab)]);
        assert_eq!(
            patchability(Lang::Cxx, &object, OLD),
            Patchability::Patchable { sites: 3 }
        );
    }

    #[test]
    fn a_fragment_of_the_ids_hash_outside_it_makes_the_object_unpatchable() {
        // `mov` immediates that build the string 8 bytes at a time: `_relu_cp`, `u_0b016b`, `8`.
        let mut text = vec![0x48, 0xb8];
        text.extend_from_slice(b"_relu_cp");
        text.extend_from_slice(&[0x48, 0xba]);
        text.extend_from_slice(b"u_0b016b");
        text.extend_from_slice(&[0xc6, 0x40, 0x10, b'8']);
        let strtab = strings(&[&format!("PyInit_{OLD}")]);
        let object = elf_object(&[(".text", 0x6, &text), (".strtab", 0, &strtab)]);
        let Patchability::NotPatchable { why } = patchability(Lang::Cxx, &object, OLD) else {
            panic!("patchable")
        };
        assert!(why.contains("`u_0b` occurs outside the id"), "{why}");
    }

    #[test]
    fn words_the_id_shares_with_other_names_do_not_count_as_fragments() {
        // `relu`, `_cpu`: the package and backend occur in every other name of the bindings.
        let strtab = strings(&[OLD, "relu_cpu", "_cpu_relu", "torch_relu"]);
        let object = elf_object(&[(".strtab", 0, &strtab)]);
        assert_eq!(
            patchability(Lang::Cxx, &object, OLD),
            Patchability::Patchable { sites: 1 }
        );
    }

    #[test]
    fn cuda_lto_compressed_and_non_elf_objects_are_unpatchable() {
        let strtab = strings(&[OLD]);
        let plain = elf_object(&[(".strtab", 0, &strtab)]);
        let lto = elf_object(&[(".gnu.lto_.symtab.0", 0, b"x"), (".strtab", 0, &strtab)]);
        let compressed = elf_object(&[(".debug_str", 0x800, b"x"), (".strtab", 0, &strtab)]);
        let hashed = elf_object(&[(".debug_names", 0, b"x"), (".strtab", 0, &strtab)]);
        let why = |lang, object: &[u8]| match patchability(lang, object, OLD) {
            Patchability::NotPatchable { why } => why,
            Patchability::Patchable { .. } => "patchable".into(),
        };
        assert!(why(Lang::Cuda, &plain).contains("CUDA object"));
        assert!(why(Lang::Cxx, &lto).contains("link-time-optimization"));
        assert!(why(Lang::Cxx, &compressed).contains("`.debug_str` is compressed"));
        assert!(why(Lang::Cxx, &hashed).contains("by their hash"));
        assert!(why(Lang::Cxx, OLD.as_bytes()).contains("not an object file"));
    }

    #[test]
    fn a_new_id_is_re_applicable_only_at_the_same_length_and_only_in_its_last_word() {
        let ok = Patchability::Patchable { sites: 2 };
        assert_eq!(can_reapply(&ok, OLD, NEW), Ok(()));
        let dirty = format!("{OLD}_dirty");
        assert_eq!(can_reapply(&ok, &dirty, &format!("{NEW}_dirty")), Ok(()));
        let longer = can_reapply(&ok, OLD, &dirty).unwrap_err();
        assert!(
            longer.contains("23 bytes long and `_relu_cpu_0b016b8` 17"),
            "{longer}"
        );
        let elsewhere = can_reapply(&ok, OLD, "_relu_gpu_0b016b8").unwrap_err();
        assert!(
            elsewhere.contains("outside its last word `0b016b8`"),
            "{elsewhere}"
        );
        let why = "a CUDA object".to_string();
        let not = can_reapply(&Patchability::NotPatchable { why }, OLD, NEW).unwrap_err();
        assert!(not.ends_with("a CUDA object"), "{not}");
    }

    #[test]
    fn reapplying_writes_the_new_id_over_every_site_and_checks_the_recorded_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.o");
        let symbol = format!("_ZL28TORCH_LIBRARY_init_{OLD}RN5torch7LibraryE");
        let strtab = strings(&[&symbol, OLD, OLD]);
        let object = elf_object(&[(".strtab", 0, &strtab)]);
        std::fs::write(&path, &object).unwrap();
        let hash = hex::encode(Sha256::digest(&object));
        let ids = (OLD, NEW);

        let miscounted = Patchability::Patchable { sites: 2 };
        let err = reapply(&path, &hash, &miscounted, Lang::Cxx, ids).unwrap_err();
        assert!(matches!(err, ReapplyError::Sites { found: 3, .. }), "{err}");
        let err = reapply(
            &path,
            "0",
            &Patchability::Patchable { sites: 3 },
            Lang::Cxx,
            ids,
        );
        assert!(matches!(err, Err(ReapplyError::Changed { .. })));
        assert_eq!(
            std::fs::read(&path).unwrap(),
            object,
            "untouched on failure"
        );

        let done = reapply(
            &path,
            &hash,
            &Patchability::Patchable { sites: 3 },
            Lang::Cxx,
            ids,
        );
        let done = done.unwrap();
        let patched = std::fs::read(&path).unwrap();
        assert_eq!(patched.len(), object.len());
        assert!(occurrences(&patched, OLD.as_bytes()).is_empty());
        assert_eq!(occurrences(&patched, NEW.as_bytes()).len(), 3);
        let (expected, _) = replace(&object, OLD.as_bytes(), NEW.as_bytes());
        assert_eq!(patched, expected, "nothing but the sites changed");
        assert_eq!(done.object_hash, hex::encode(Sha256::digest(&patched)));
        assert_eq!(done.patchability, Patchability::Patchable { sites: 3 });
    }

    #[test]
    fn the_varying_word_is_the_commit_before_any_dirty_suffix() {
        assert_eq!(&OLD[varying(OLD)], "0b016b8");
        let dirty = format!("{OLD}_dirty");
        assert_eq!(&dirty[varying(&dirty)], "0b016b8");
        assert_eq!(varying("plain"), 0..5);
        assert_eq!(varying("ends_"), 0..5);
    }
}

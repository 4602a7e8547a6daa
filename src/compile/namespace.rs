//! Re-applying the op namespace to a cached object instead of compiling it again.
//!
//! A new commit changes `TORCH_EXTENSION_NAME`'s value (`_relu_cpu_0b016b8` → `_relu_cpu_4c1f9e2`)
//! and nothing else. In a host C++ object the value's bytes sit at fixed places: symbol names
//! (`PyInit_<id>`, `TORCH_LIBRARY_init_<id>`, mangled names, in `.strtab`), string literals, and
//! the constants the compiler builds a string from: g++ -O3 makes the bindings' 17-byte
//! `std::string` of the name from a 16-byte `.rodata.cst16` vector and a `movb` immediate for
//! the last character, so the id is not there to be found whole. Where each byte is, is found
//! the first time a build wants another id of the same length for an object whose places are not
//! known yet ([`Patchability::Unprobed`]): instead of compiling under the new id, the unit
//! compiles under a probe id of the old one's length whose every varying character is another,
//! distinct one ([`probe_id`] of the old id), and every byte that differs between the old object
//! and the probe's must be the same character of both ids ([`learn`]), else (a size or a value
//! computed from the id) the object is not patchable. The new id, and every later one of the
//! same byte length, is then written over those [`Site`]s ([`reapply`]): the offsets into the
//! string tables, the length prefixes of mangled names and the code stay as they are, and the
//! object is byte for byte the compiler's. A cold build thus compiles each unit once, as if
//! nothing were re-applied; the probe costs the one compile the new id would have cost.
//!
//! The probe id changes each varying character to one of as few of its classes as there is
//! (a digit to a letter outside the hex digits, `1234567` → `ghijklm`; a letter to a digit): a
//! value the code folds from the characters' classes (how many are digits or letters, a branch
//! on `isdigit`) then differs between the two objects too, and the unit is found not patchable
//! and compiles under each new id (`-v`: `probed: byte … changes with the id but is none of its
//! characters`).
//!
//! What the probe cannot see: a value computed from the id that still comes out the same under
//! the probe id. A comparison of the name with an unrelated literal (`name == "_relu_cpu_x"`:
//! false under both), a class the one probe cannot change together with the others (a hex
//! letter becomes a digit: both hex), or a hash of the id that happens to collide; the
//! re-applied object then keeps the old id's value without a warning. No binding kernel-builder
//! generates does that; a project whose code computes with its op namespace should fix the id
//! (`--unique-id`, the same for every build) or not fold it at compile time (compute it from
//! the name at run time, where the re-applied bytes are read).

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::plan::Lang;

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
    /// The id's [`varying`] characters sit at these places and nowhere else.
    Patchable { sites: Vec<Site> },
    /// Not known yet: a compile under a probe id ([`probe_id`], [`learn`]) finds them when a
    /// build first wants another id of the same length.
    Unprobed,
    /// It cannot, for this reason (shown with `-v`).
    NotPatchable { why: String },
}

/// Bytes `at..at + len` of the object are characters `from..from + len` of the id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Site {
    pub(crate) at: usize,
    pub(crate) from: usize,
    pub(crate) len: usize,
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
    #[error("the object does not hold `{id}` where its cache entry recorded it (byte {at})")]
    Site { id: String, at: usize },
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

/// Can a later id be written over the id in `object`, a unit of `lang` just compiled, once a
/// probe compile finds where it is ([`Patchability::Unprobed`], probed only when a later build
/// wants another id)? Host C++ only, in a relocatable
/// ELF object without LTO code, compressed sections or name hashes.
pub(crate) fn survey(lang: Lang, object: &[u8]) -> Patchability {
    let not = |why: String| Patchability::NotPatchable { why };
    if lang == Lang::Cuda {
        return not(
            "a CUDA object: its device code may hold the id inside a compressed fatbinary".into(),
        );
    }
    match sections_allow(object) {
        Ok(()) => Patchability::Unprobed,
        Err(why) => not(why),
    }
}

/// The characters a probe id is made of, in the order they are tried.
const PROBE_CHARACTERS: &[u8; 62] =
    b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// The classes code may test a character of the id for (`isdigit`, `isxdigit`, `isalpha`,
/// `islower`, `isupper`).
fn classes(c: u8) -> [bool; 5] {
    [
        c.is_ascii_digit(),
        c.is_ascii_hexdigit(),
        c.is_ascii_alphabetic(),
        c.is_ascii_lowercase(),
        c.is_ascii_uppercase(),
    ]
}

/// How many of [`classes`] `a` and `b` agree on.
fn shared_classes(a: u8, b: u8) -> usize {
    (classes(a).iter().zip(classes(b)))
        .filter(|(x, y)| **x == *y)
        .count()
}

/// `id` with each character of its [`varying`] word replaced by one no other varying character
/// gets, of as few of its [`classes`] as there is (a digit by a letter outside the hex digits,
/// a letter by a digit, then the others): every byte of an object that comes from one of those
/// characters differs between the two compiles and says which character it is, and so does a
/// value the code computes from their classes (how many are digits, whether it is hex).
/// `None` when the word is too long to give each a character of its own.
pub(crate) fn probe_id(id: &str) -> Option<String> {
    let mut probe = id.as_bytes().to_vec();
    let mut used = Vec::new();
    for k in varying(id) {
        let c = id.as_bytes()[k];
        let other = (PROBE_CHARACTERS.iter().copied())
            .filter(|d| *d != c && !used.contains(d))
            .min_by_key(|d| shared_classes(c, *d))?;
        used.push(other);
        probe[k] = other;
    }
    String::from_utf8(probe).ok()
}

/// Where `object` (compiled under `id`) holds the [`varying`] characters of `id`, from the
/// same unit compiled under `probe` ([`probe_id`]): every byte that differs must be the same
/// character of both ids; anything else (another size, a byte computed from the id) makes it
/// not patchable.
pub(crate) fn learn(object: &[u8], id: &str, probed: &[u8], probe: &str) -> Patchability {
    let not = |why: String| Patchability::NotPatchable { why };
    if object.len() != probed.len() {
        return not(format!(
            "its size depends on the id ({} bytes under `{id}`, {} under `{probe}`)",
            object.len(),
            probed.len()
        ));
    }
    let word = varying(id);
    let mut sites: Vec<Site> = Vec::new();
    for at in (0..object.len()).filter(|&at| object[at] != probed[at]) {
        let k = word
            .clone()
            .find(|&k| probe.as_bytes()[k] == probed[at] && id.as_bytes()[k] == object[at]);
        let Some(from) = k else {
            return not(format!(
                "byte {at} changes with the id but is none of its characters: the code \
                 computes a value from the id (from its characters or their classes, e.g. how \
                 many are digits), which only a compile under the new id gets right"
            ));
        };
        match sites.last_mut() {
            Some(s) if s.at + s.len == at && s.from + s.len == from => s.len += 1,
            _ => sites.push(Site { at, from, len: 1 }),
        }
    }
    Patchability::Patchable { sites }
}

/// What it takes to give an object whose [`Patchability`] is `recorded`, compiled under
/// `from`, the op namespace `to` without compiling it under `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Write `to` over the recorded sites ([`reapply`]).
    Write,
    /// Find the sites first: compile under [`probe_id`]`(from)` and [`learn`] them, then write.
    Probe,
}

/// How `to` can be written over `from` in an object whose [`Patchability`] is `recorded`, or
/// why it cannot.
pub(crate) fn can_reapply(recorded: &Patchability, from: &str, to: &str) -> Result<Next, String> {
    let next = match recorded {
        Patchability::NotPatchable { why } => {
            return Err(format!("it cannot be re-applied to the object: {why}"));
        }
        Patchability::Unprobed => Next::Probe,
        Patchability::Patchable { .. } => Next::Write,
    };
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
    Ok(next)
}

/// Write `to` over the sites of `from` in the object at `path`, whose content must still hash
/// to `object_hash` and hold `from` where `recorded` says; the object is replaced atomically.
/// The new [`Patchability`] has the same sites.
pub(crate) fn reapply(
    path: &Path,
    object_hash: &str,
    recorded: &Patchability,
    (from, to): (&str, &str),
) -> Result<Reapplied, ReapplyError> {
    let Patchability::Patchable { sites } = recorded else {
        return Err(ReapplyError::NotPatchable);
    };
    let mut object = std::fs::read(path).map_err(|source| ReapplyError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if hex::encode(Sha256::digest(&object)) != object_hash {
        return Err(ReapplyError::Changed {
            path: path.to_path_buf(),
        });
    }
    write_sites(&mut object, sites, from, to)?;
    crate::files::write_atomic(path, &object).map_err(|source| ReapplyError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Reapplied {
        object_hash: hex::encode(Sha256::digest(&object)),
        patchability: recorded.clone(),
    })
}

/// `object` with `to` written over `from` at each of `sites`, each checked to hold `from`.
fn write_sites(
    object: &mut [u8],
    sites: &[Site],
    from: &str,
    to: &str,
) -> Result<(), ReapplyError> {
    let wrong = |at| ReapplyError::Site {
        id: from.to_string(),
        at,
    };
    for site in sites {
        let chars = site.from..site.from + site.len;
        let (Some(old), Some(new)) = (from.get(chars.clone()), to.get(chars)) else {
            return Err(wrong(site.at));
        };
        match object.get_mut(site.at..site.at + site.len) {
            Some(bytes) if *bytes == *old.as_bytes() => bytes.copy_from_slice(new.as_bytes()),
            _ => return Err(wrong(site.at)),
        }
    }
    Ok(())
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
        while !out.len().is_multiple_of(8) {
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

    /// What g++ -O3 makes of `std::string(STRINGIFY(TORCH_EXTENSION_NAME))` for a 17-byte id:
    /// the first 16 bytes as a vector constant, the last as a `movb` immediate.
    fn split_object(id: &str) -> Vec<u8> {
        let mut text = vec![0x66, 0x0f, 0x6f, 0x05, 0, 0, 0, 0, 0xc6, 0x40, 0x10];
        text.push(id.as_bytes()[16]);
        let strtab = strings(&[&format!("PyInit_{id}")]);
        let cst16 = &id.as_bytes()[..16];
        elf_object(&[
            (".text", 0x6, &text),
            (".rodata.cst16", 0x12, cst16),
            (".strtab", 0, &strtab),
        ])
    }

    fn sites_of(p: Patchability) -> Vec<Site> {
        match p {
            Patchability::Patchable { sites } => sites,
            other => panic!("not patchable: {other:?}"),
        }
    }

    /// The places of `id`'s hash digits (`from` 10, 7 long) in `object`.
    fn whole_hash_sites(object: &[u8], id: &str) -> Vec<Site> {
        let hash = &id.as_bytes()[10..];
        (object.windows(hash.len()).enumerate())
            .filter(|(_, w)| *w == hash)
            .map(|(at, _)| Site {
                at,
                from: 10,
                len: 7,
            })
            .collect()
    }

    #[test]
    fn a_host_object_waits_for_a_probe_and_cuda_lto_compressed_and_non_elf_ones_never_do() {
        let strtab = strings(&[OLD]);
        let plain = elf_object(&[(".strtab", 0, &strtab)]);
        let lto = elf_object(&[(".gnu.lto_.symtab.0", 0, b"x"), (".strtab", 0, &strtab)]);
        let compressed = elf_object(&[(".debug_str", 0x800, b"x"), (".strtab", 0, &strtab)]);
        let hashed = elf_object(&[(".debug_names", 0, b"x"), (".strtab", 0, &strtab)]);
        assert_eq!(survey(Lang::Cxx, &plain), Patchability::Unprobed);
        let why = |lang, object: &[u8]| match survey(lang, object) {
            Patchability::NotPatchable { why } => why,
            other => format!("{other:?}"),
        };
        assert!(why(Lang::Cuda, &plain).contains("CUDA object"));
        assert!(why(Lang::Cxx, &lto).contains("link-time-optimization"));
        assert!(why(Lang::Cxx, &compressed).contains("`.debug_str` is compressed"));
        assert!(why(Lang::Cxx, &hashed).contains("by their hash"));
        assert!(why(Lang::Cxx, OLD.as_bytes()).contains("not an object file"));
    }

    #[test]
    fn an_id_the_object_holds_only_whole_is_learned_as_the_hash_of_each_occurrence() {
        let object = |id: &str| {
            let symbol = format!("_ZL28TORCH_LIBRARY_init_{id}RN5torch7LibraryE");
            // `relu`, `_cpu`: the package and backend occur in other names too.
            let rodata = strings(&[id, "relu(Tensor! out, Tensor input) -> ()", "_cpu_relu"]);
            let strtab = strings(&[&symbol, &format!("PyInit_{id}"), "relu_cpu"]);
            elf_object(&[(".rodata.str1.1", 0x32, &rodata), (".strtab", 0, &strtab)])
        };
        let probe = probe_id(OLD).unwrap();
        let sites = sites_of(learn(&object(OLD), OLD, &object(&probe), &probe));
        assert_eq!(sites, whole_hash_sites(&object(OLD), OLD));
        assert_eq!(sites.len(), 3);
    }

    #[test]
    fn the_probe_id_changes_every_varying_character_to_one_of_its_own_of_another_class() {
        let dirty = format!("{OLD}_dirty");
        let ids = [
            OLD,
            &dirty,
            "_relu_cpu_aaaaaaa",
            "_relu_cpu_1234567",
            "_r_cpu_ci42Xz",
        ];
        for id in ids {
            let probe = probe_id(id).unwrap();
            assert_eq!(probe.len(), id.len());
            let word = varying(id);
            for (k, (a, b)) in id.bytes().zip(probe.bytes()).enumerate() {
                assert_eq!(a != b, word.contains(&k), "{id} {probe}");
                if word.contains(&k) {
                    assert_ne!(a.is_ascii_digit(), b.is_ascii_digit(), "{id} {probe}");
                    assert_ne!(a.is_ascii_alphabetic(), b.is_ascii_alphabetic());
                }
                if a.is_ascii_digit() {
                    assert!(
                        !b.is_ascii_hexdigit(),
                        "a digit leaves the hex digits: {probe}"
                    );
                }
            }
            let mut distinct = probe.as_bytes()[word.clone()].to_vec();
            distinct.sort();
            distinct.dedup();
            assert_eq!(distinct.len(), word.len(), "{probe}");
        }
        assert_eq!(probe_id(OLD).unwrap(), "_relu_cpu_g0hij1k");
        assert_eq!(probe_id("_relu_cpu_1234567").unwrap(), "_relu_cpu_ghijklm");
        // More digits than there are lowercase letters outside the hex digits: uppercase ones.
        let long = probe_id("_p_cpu_012345678901234567890123").unwrap();
        assert_eq!(&long[7..], "ghijklmnopqrstuvwxyzGHIJ");
        let word = "0".repeat(PROBE_CHARACTERS.len());
        assert_eq!(
            probe_id(&format!("_p_cpu_{word}")),
            None,
            "62 characters of its own, none of them `0`"
        );
    }

    #[test]
    fn a_probe_compile_finds_the_split_pieces_and_the_immediate() {
        let probe = probe_id(OLD).unwrap();
        let (object, probed) = (split_object(OLD), split_object(&probe));
        let sites = sites_of(learn(&object, OLD, &probed, &probe));
        // The immediate, the vector constant's hash digits, the symbol's.
        assert_eq!(sites.len(), 3, "{sites:?}");
        assert!(sites.iter().any(|s| (s.from, s.len) == (16, 1)));
        assert!(sites.iter().any(|s| (s.from, s.len) == (10, 6)));
        assert!(sites.iter().any(|s| (s.from, s.len) == (10, 7)));

        let mut patched = object.clone();
        write_sites(&mut patched, &sites, OLD, NEW).unwrap();
        assert_eq!(
            patched,
            split_object(NEW),
            "the object the compiler makes under NEW"
        );
    }

    #[test]
    fn a_value_computed_from_the_id_makes_the_object_unpatchable() {
        // A `constexpr` FNV-1a of the name beside the name itself: no byte of the hash is a
        // character of the id, so writing another id over the name would leave it stale.
        let object = |id: &str| {
            let fnv = (id.bytes()).fold(0x811c9dc5u32, |h, b| {
                (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
            });
            let strtab = strings(&[&format!("PyInit_{id}")]);
            elf_object(&[
                (".rodata", 0x2, &fnv.to_le_bytes()),
                (".strtab", 0, &strtab),
            ])
        };
        let probe = probe_id(OLD).unwrap();
        let Patchability::NotPatchable { why } = learn(&object(OLD), OLD, &object(&probe), &probe)
        else {
            panic!("patchable")
        };
        assert!(
            why.contains("changes with the id but is none of its characters"),
            "{why}"
        );

        // How many of its characters are digits, folded to a constant: the probe changes each
        // character's class, so the count differs too.
        let digits = |id: &str| {
            let count = id.bytes().filter(u8::is_ascii_digit).count() as u32;
            let strtab = strings(&[&format!("PyInit_{id}")]);
            elf_object(&[
                (".rodata", 0x2, &count.to_le_bytes()),
                (".strtab", 0, &strtab),
            ])
        };
        let (all_digits, letters) = ("_relu_cpu_1234567", "_relu_cpu_abcdefg");
        for id in [OLD, all_digits, letters] {
            let probe = probe_id(id).unwrap();
            let learned = learn(&digits(id), id, &digits(&probe), &probe);
            assert!(
                matches!(learned, Patchability::NotPatchable { .. }),
                "{id} {probe}"
            );
        }

        let mut longer = object(&probe);
        longer.push(0);
        let Patchability::NotPatchable { why } = learn(&object(OLD), OLD, &longer, &probe) else {
            panic!("patchable")
        };
        assert!(why.contains("its size depends on the id"), "{why}");
    }

    #[test]
    fn a_new_id_is_re_applicable_only_at_the_same_length_and_only_in_its_last_word() {
        let ok = Patchability::Patchable { sites: Vec::new() };
        assert_eq!(can_reapply(&ok, OLD, NEW), Ok(Next::Write));
        let dirty = format!("{OLD}_dirty");
        let new_dirty = format!("{NEW}_dirty");
        assert_eq!(can_reapply(&ok, &dirty, &new_dirty), Ok(Next::Write));
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
        let unprobed = &Patchability::Unprobed;
        assert_eq!(can_reapply(unprobed, OLD, NEW), Ok(Next::Probe));
        assert!(
            can_reapply(unprobed, OLD, &dirty).is_err(),
            "a probe needs the same length"
        );
    }

    #[test]
    fn reapplying_writes_the_new_id_over_the_sites_and_checks_the_recorded_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.o");
        let object = split_object(OLD);
        std::fs::write(&path, &object).unwrap();
        let hash = hex::encode(Sha256::digest(&object));
        let probe = probe_id(OLD).unwrap();
        let learned = learn(&object, OLD, &split_object(&probe), &probe);
        let ids = (OLD, NEW);

        let mut wrong = sites_of(learned.clone());
        wrong[0].at += 1;
        let wrong = Patchability::Patchable { sites: wrong };
        let err = reapply(&path, &hash, &wrong, ids).unwrap_err();
        assert!(matches!(err, ReapplyError::Site { .. }), "{err}");
        let err = reapply(&path, "0", &learned, ids);
        assert!(matches!(err, Err(ReapplyError::Changed { .. })));
        assert_eq!(
            std::fs::read(&path).unwrap(),
            object,
            "untouched on failure"
        );

        let done = reapply(&path, &hash, &learned, ids).unwrap();
        let patched = std::fs::read(&path).unwrap();
        assert_eq!(patched, split_object(NEW));
        assert!(whole_hash_sites(&patched, OLD).is_empty());
        assert_eq!(done.object_hash, hex::encode(Sha256::digest(&patched)));
        assert_eq!(done.patchability, learned, "the sites stay where they were");
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

//! The versioned dynamic symbols of an ELF shared object: what an extension imports, and what
//! a host library (libc.so.6) defines at which version and address.

use std::path::Path;

use object::Endianness;
use object::elf;
use object::read::elf::{ElfFile64, FileHeader as _, Sym as _};

/// One dynamic symbol with its version (`GLIBC_2.34`), if it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedSymbol {
    pub name: String,
    pub version: Option<String>,
    /// The library the version is needed from (`libc.so.6`), for an imported symbol.
    pub file: Option<String>,
    /// Defined here (not imported).
    pub defined: bool,
    /// The default version of a defined name (`name@@V`); `false` for `name@V` compat symbols.
    pub default: bool,
    pub address: u64,
}

/// The dynamic symbols of the 64-bit ELF file at `path`.
pub fn dynamic_symbols(path: &Path) -> Result<Vec<VersionedSymbol>, String> {
    let data = std::fs::read(path).map_err(|e| format!("cannot read it: {e}"))?;
    parse(&data).map_err(|e| format!("not an ELF shared object kbuild can read: {e}"))
}

fn parse(data: &[u8]) -> object::read::Result<Vec<VersionedSymbol>> {
    let file = ElfFile64::<Endianness>::parse(data)?;
    let endian = file.endian();
    let sections = file.elf_header().sections(endian, data)?;
    let symbols = sections.symbols(endian, data, elf::SHT_DYNSYM)?;
    let versions = sections.versions(endian, data)?;
    let mut out = Vec::new();
    for (index, sym) in symbols.enumerate() {
        let name = String::from_utf8_lossy(sym.name(endian, symbols.strings())?).into_owned();
        if name.is_empty() {
            continue;
        }
        let (mut version, mut file, mut hidden) = (None, None, false);
        if let Some(table) = &versions {
            let vi = table.version_index(endian, index);
            hidden = vi.is_hidden();
            if let Some(v) = table.version(vi)? {
                version = Some(String::from_utf8_lossy(v.name()).into_owned());
                file = v.file().map(|f| String::from_utf8_lossy(f).into_owned());
            }
        }
        let defined = sym.st_shndx(endian) != elf::SHN_UNDEF;
        out.push(VersionedSymbol {
            name,
            version,
            file,
            defined,
            default: defined && !hidden,
            address: sym.st_value(endian),
        });
    }
    Ok(out)
}

/// The names an object file (`.o`) leaves undefined: which inputs of a link refer to a symbol.
pub fn undefined_in_object(path: &Path) -> Vec<String> {
    use object::{Object as _, ObjectSymbol as _};
    let Ok(data) = std::fs::read(path) else {
        return Vec::new();
    };
    let Ok(file) = object::File::parse(&*data) else {
        return Vec::new();
    };
    file.symbols()
        .filter(|s| s.is_undefined())
        .filter_map(|s| s.name().ok().map(str::to_string))
        .collect()
}

/// `GLIBC_2.34` → `(2, 34, 0)`; `GLIBCXX_3.4.29` → `(3, 4, 29)`; `None` for another prefix.
pub fn version_number(version: &str, prefix: &str) -> Option<(u32, u32, u32)> {
    let rest = version.strip_prefix(prefix)?.strip_prefix('_')?;
    let mut parts = rest.split('.').map(|p| p.parse::<u32>().ok());
    let major = parts.next()??;
    let minor = parts.next().flatten().unwrap_or(0);
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_numbers_read_every_prefix_and_reject_others() {
        assert_eq!(version_number("GLIBC_2.34", "GLIBC"), Some((2, 34, 0)));
        assert_eq!(version_number("GLIBC_2.2.5", "GLIBC"), Some((2, 2, 5)));
        assert_eq!(
            version_number("GLIBCXX_3.4.29", "GLIBCXX"),
            Some((3, 4, 29))
        );
        assert_eq!(version_number("GLIBCXX_3.4.29", "GLIBC"), None);
        assert_eq!(version_number("GLIBC_PRIVATE", "GLIBC"), None);
    }
}

//! What makes an extension's too-new symbol references portable, and the compat unit that does
//! it. Two kinds of fix, both bound at link time inside the extension (hidden, never exported):
//!
//! - **pin**: the host library defines an older version of the same function at the same
//!   address (glibc 2.34 moved `dlopen`, `pthread_create`… into libc and kept `@GLIBC_2.2.5`
//!   as aliases of the very same code). The reference is wrapped (`-Wl,--wrap=NAME`) and the
//!   wrapper jumps to `NAME@OLD`: the same machine code runs on every glibc.
//! - **shim**: a small definition that does what code built against glibc 2.28 / libstdc++ 8
//!   headers does in that place (the table below, each with its reason).
//!
//! A reference with neither stays, and the build names it (see `super::Unportable`).

use std::fmt::Write as _;

use super::elf::{VersionedSymbol, version_number};

/// A compat definition kbuild knows, for a symbol newer than manylinux_2_28 allows.
pub struct Shim {
    /// The symbol the extension's objects reference.
    pub name: &'static str,
    /// Defined under its own name (data) instead of through `--wrap` (functions).
    pub direct: bool,
    /// C++ source of the definition (inside `extern "C"`); `{w}` is the wrapper's name.
    pub code: &'static str,
    /// Headers it needs, included before the `extern "C"` block.
    pub includes: &'static [&'static str],
}

/// The shims, with why each behaves as the code it replaces does on an old glibc.
pub const SHIMS: &[Shim] = &[
    // libstdc++ (GCC ≥ 11 on glibc ≥ 2.32) reads this to skip atomic reference counts while a
    // process has one thread. 0 means "threads may run": the atomic path, always correct, and
    // what libstdc++ does on a glibc without the variable once libpthread is loaded (every
    // torch process). glibc's own copy is never written through this one.
    Shim {
        name: "__libc_single_threaded",
        direct: true,
        code: "__attribute__((visibility(\"hidden\"))) char __libc_single_threaded = 0;\n",
        includes: &[],
    },
    // glibc 2.33 made stat & co. real functions; before, the headers called __xstat & co. with
    // version 1 (_STAT_VER on x86_64), which is what these do.
    Shim {
        name: "stat",
        direct: false,
        code: "KBUILD_OLD(int, kbuild_xstat, \"__xstat@GLIBC_2.2.5\", (int, const char *, void *));\n\
               HIDDEN int {w}(const char *p, void *b) { return kbuild_xstat(1, p, b); }\n",
        includes: &[],
    },
    Shim {
        name: "stat64",
        direct: false,
        code: "KBUILD_OLD(int, kbuild_xstat64, \"__xstat64@GLIBC_2.2.5\", (int, const char *, void *));\n\
               HIDDEN int {w}(const char *p, void *b) { return kbuild_xstat64(1, p, b); }\n",
        includes: &[],
    },
    Shim {
        name: "lstat",
        direct: false,
        code: "KBUILD_OLD(int, kbuild_lxstat, \"__lxstat@GLIBC_2.2.5\", (int, const char *, void *));\n\
               HIDDEN int {w}(const char *p, void *b) { return kbuild_lxstat(1, p, b); }\n",
        includes: &[],
    },
    Shim {
        name: "lstat64",
        direct: false,
        code: "KBUILD_OLD(int, kbuild_lxstat64, \"__lxstat64@GLIBC_2.2.5\", (int, const char *, void *));\n\
               HIDDEN int {w}(const char *p, void *b) { return kbuild_lxstat64(1, p, b); }\n",
        includes: &[],
    },
    Shim {
        name: "fstat",
        direct: false,
        code: "KBUILD_OLD(int, kbuild_fxstat, \"__fxstat@GLIBC_2.2.5\", (int, int, void *));\n\
               HIDDEN int {w}(int fd, void *b) { return kbuild_fxstat(1, fd, b); }\n",
        includes: &[],
    },
    Shim {
        name: "fstat64",
        direct: false,
        code: "KBUILD_OLD(int, kbuild_fxstat64, \"__fxstat64@GLIBC_2.2.5\", (int, int, void *));\n\
               HIDDEN int {w}(int fd, void *b) { return kbuild_fxstat64(1, fd, b); }\n",
        includes: &[],
    },
    Shim {
        name: "fstatat",
        direct: false,
        code: "KBUILD_OLD(int, kbuild_fxstatat, \"__fxstatat@GLIBC_2.4\", (int, int, const char *, void *, int));\n\
               HIDDEN int {w}(int fd, const char *p, void *b, int f) { return kbuild_fxstatat(1, fd, p, b, f); }\n",
        includes: &[],
    },
    Shim {
        name: "fstatat64",
        direct: false,
        code: "KBUILD_OLD(int, kbuild_fxstatat64, \"__fxstatat64@GLIBC_2.4\", (int, int, const char *, void *, int));\n\
               HIDDEN int {w}(int fd, const char *p, void *b, int f) { return kbuild_fxstatat64(1, fd, p, b, f); }\n",
        includes: &[],
    },
    // GCC 12 calls glibc 2.35's __memcmpeq for `memcmp(...) == 0`; it only promises zero
    // exactly when the bytes are equal, which memcmp does.
    Shim {
        name: "__memcmpeq",
        direct: false,
        code: "KBUILD_OLD(int, kbuild_memcmp, \"memcmp@GLIBC_2.2.5\", (const void *, const void *, unsigned long));\n\
               HIDDEN int {w}(const void *a, const void *b, unsigned long n) { return kbuild_memcmp(a, b, n); }\n",
        includes: &[],
    },
    // glibc 2.38 headers send strtol & co. to C23 variants under _GNU_SOURCE (every g++
    // build). They differ from glibc 2.28's only in reading a `0b` prefix when the base is 0
    // or 2; the shims do exactly that on top of the old functions (same errno, end pointer
    // and overflow rules), so the extension parses as it did on the build machine.
    Shim {
        name: "__isoc23_strtol",
        code: "ISOC23_COMMON\nHIDDEN long {w}(const char *s, char **e, int b) { return kbuild_c23_strtol(s, e, b); }\n",
        direct: false,
        includes: &["<ctype.h>", "<errno.h>", "<limits.h>"],
    },
    Shim {
        name: "__isoc23_strtoll",
        code: "ISOC23_COMMON\nHIDDEN long long {w}(const char *s, char **e, int b) { return kbuild_c23_strtol(s, e, b); }\n",
        direct: false,
        includes: &["<ctype.h>", "<errno.h>", "<limits.h>"],
    },
    Shim {
        name: "__isoc23_strtoimax",
        code: "ISOC23_COMMON\nHIDDEN long {w}(const char *s, char **e, int b) { return kbuild_c23_strtol(s, e, b); }\n",
        direct: false,
        includes: &["<ctype.h>", "<errno.h>", "<limits.h>"],
    },
    Shim {
        name: "__isoc23_strtoul",
        code: "ISOC23_COMMON\nHIDDEN unsigned long {w}(const char *s, char **e, int b) { return kbuild_c23_strtoul(s, e, b); }\n",
        direct: false,
        includes: &["<ctype.h>", "<errno.h>", "<limits.h>"],
    },
    Shim {
        name: "__isoc23_strtoull",
        code: "ISOC23_COMMON\nHIDDEN unsigned long long {w}(const char *s, char **e, int b) { return kbuild_c23_strtoul(s, e, b); }\n",
        direct: false,
        includes: &["<ctype.h>", "<errno.h>", "<limits.h>"],
    },
    Shim {
        name: "__isoc23_strtoumax",
        code: "ISOC23_COMMON\nHIDDEN unsigned long {w}(const char *s, char **e, int b) { return kbuild_c23_strtoul(s, e, b); }\n",
        direct: false,
        includes: &["<ctype.h>", "<errno.h>", "<limits.h>"],
    },
    // GCC 14 calls this from the handlers of noexcept regions (CXXABI_1.3.15); before, the
    // personality routine did the same: mark the exception caught, then terminate. The one
    // difference: the terminate handler installed now runs, not the one at throw time.
    Shim {
        name: "__cxa_call_terminate",
        code: "void *kbuild_begin_catch(void *) throw() __asm__(\"__cxa_begin_catch\");\n\
               HIDDEN __attribute__((noreturn)) void {w}(void *ue) throw() {\n\
               \x20 if (ue) kbuild_begin_catch(ue);\n\
               \x20 std::terminate();\n\
               }\n",
        direct: false,
        includes: &["<exception>"],
    },
    // libstdc++ 13's <iostream> references this instead of a static ios_base::Init in every
    // unit (what GCC ≤ 12 headers put there): the shim constructs one at load and destroys it
    // at unload, exactly the old headers' object.
    Shim {
        name: "_ZSt21ios_base_library_initv",
        direct: false,
        code: "static char kbuild_ios_init;\n\
               void kbuild_ios_init_ctor(void *) __asm__(\"_ZNSt8ios_base4InitC1Ev\");\n\
               void kbuild_ios_init_dtor(void *) __asm__(\"_ZNSt8ios_base4InitD1Ev\");\n\
               int __cxa_atexit(void (*)(void *), void *, void *);\n\
               extern void *__dso_handle;\n\
               __attribute__((constructor)) static void kbuild_ios_init_run(void) {\n\
               \x20 kbuild_ios_init_ctor(&kbuild_ios_init);\n\
               \x20 __cxa_atexit(kbuild_ios_init_dtor, &kbuild_ios_init, &__dso_handle);\n\
               }\n\
               HIDDEN void {w}(void) {}\n",
        includes: &[],
    },
    // libstdc++ 11 moved this throw out of line; it throws what `new T[n]` always threw.
    Shim {
        name: "_ZSt28__throw_bad_array_new_lengthv",
        direct: false,
        code: "HIDDEN __attribute__((noreturn)) void {w}(void) { throw std::bad_array_new_length(); }\n",
        includes: &["<new>"],
    },
];

/// The fixes of one link.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Fixes {
    /// `(name, target@version)`: the reference jumps to an older alias of the same code.
    pub pins: Vec<(String, String)>,
    /// Names from [`SHIMS`].
    pub shims: Vec<&'static str>,
}

impl Fixes {
    pub fn is_empty(&self) -> bool {
        self.pins.is_empty() && self.shims.is_empty()
    }

    /// `-Wl,--wrap=NAME` for every fix that goes through a wrapper. With a pin, also the
    /// libraries the pinned functions lived in before glibc 2.34 merged them into libc (empty
    /// stubs on a newer glibc): on an old one they are then loaded beside the extension
    /// whatever the process loaded before.
    pub fn link_flags(&self) -> Vec<String> {
        let wrapped = self.pins.iter().map(|(name, _)| name.as_str()).chain(
            self.shims
                .iter()
                .copied()
                .filter(|name| SHIMS.iter().any(|s| s.name == *name && !s.direct)),
        );
        let mut flags: Vec<String> = wrapped.map(|name| format!("-Wl,--wrap={name}")).collect();
        if !self.pins.is_empty() {
            flags.extend(
                [
                    "-Wl,--push-state,--no-as-needed",
                    "-l:libdl.so.2",
                    "-l:libpthread.so.0",
                    "-l:librt.so.1",
                    "-Wl,--pop-state",
                ]
                .map(String::from),
            );
        }
        flags
    }
}

/// The fix for `name` (referenced at a version the policy refuses), if any: a shim, else a
/// pin to the newest allowed version that `library` (the host library the reference binds
/// to) defines at the same address as the default one.
pub fn fix_for(
    name: &str,
    library: &[VersionedSymbol],
    allowed: impl Fn(&str) -> bool,
) -> Option<Fix> {
    if let Some(shim) = SHIMS.iter().find(|s| s.name == name) {
        return Some(Fix::Shim(shim.name));
    }
    let current = library
        .iter()
        .find(|s| s.name == name && s.defined && s.default)?;
    let old = library
        .iter()
        .filter(|s| s.name == name && s.defined && !s.default && s.address == current.address)
        .filter_map(|s| s.version.as_deref().filter(|v| allowed(v)))
        .max_by_key(|v| version_number(v, "GLIBC"))?;
    Some(Fix::Pin(format!("{name}@{old}")))
}

/// One fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fix {
    Pin(String),
    Shim(&'static str),
}

/// The C23 number parsing the `__isoc23_*` shims share, emitted once.
const ISOC23_COMMON: &str = "#ifndef KBUILD_ISOC23
#define KBUILD_ISOC23
KBUILD_OLD(long, kbuild_strtol, \"strtol@GLIBC_2.2.5\", (const char *, char **, int));
KBUILD_OLD(unsigned long, kbuild_strtoul, \"strtoul@GLIBC_2.2.5\", (const char *, char **, int));
// Where the binary digits start when C23's `0b` form applies (base 0 or 2, after blanks and a
// sign, `0b`/`0B` and a binary digit), else null.
static const char *kbuild_c23_binary(const char *s, int base, int *neg) {
  if (base != 0 && base != 2) return 0;
  while (isspace((unsigned char)*s)) ++s;
  *neg = 0;
  if (*s == '+' || *s == '-') *neg = (*s++ == '-');
  if (s[0] == '0' && (s[1] == 'b' || s[1] == 'B') && (s[2] == '0' || s[2] == '1')) return s + 2;
  return 0;
}
static unsigned long kbuild_c23_magnitude(const char *d, char **end, int *overflow) {
  int saved = errno;
  errno = 0;
  unsigned long m = kbuild_strtoul(d, end, 2);
  *overflow = errno == ERANGE;
  errno = saved;
  return m;
}
static long kbuild_c23_strtol(const char *s, char **end, int base) {
  int neg, overflow;
  const char *d = kbuild_c23_binary(s, base, &neg);
  if (!d) return kbuild_strtol(s, end, base);
  unsigned long m = kbuild_c23_magnitude(d, end, &overflow);
  if (neg) {
    if (overflow || m > (unsigned long)LONG_MAX + 1) { errno = ERANGE; return LONG_MIN; }
    return (long)(0UL - m);
  }
  if (overflow || m > (unsigned long)LONG_MAX) { errno = ERANGE; return LONG_MAX; }
  return (long)m;
}
static unsigned long kbuild_c23_strtoul(const char *s, char **end, int base) {
  int neg, overflow;
  const char *d = kbuild_c23_binary(s, base, &neg);
  if (!d) return kbuild_strtoul(s, end, base);
  unsigned long m = kbuild_c23_magnitude(d, end, &overflow);
  if (overflow) { errno = ERANGE; return ULONG_MAX; }
  return neg ? 0UL - m : m;
}
#endif";

/// The compat unit's C++ source for `fixes` (compiled with `-x c++`, linked into the
/// extension; every definition hidden).
pub fn source(fixes: &Fixes) -> String {
    let shims: Vec<&Shim> = SHIMS
        .iter()
        .filter(|s| fixes.shims.contains(&s.name))
        .collect();
    let mut s = String::from(
        "// Generated by kbuild: binds this extension's references to symbols manylinux_2_28\n\
         // allows (see README, \"Portable builds\"). Every definition is hidden.\n",
    );
    let mut includes: Vec<&str> = shims
        .iter()
        .flat_map(|s| s.includes.iter().copied())
        .collect();
    includes.sort_unstable();
    includes.dedup();
    for include in includes {
        let _ = writeln!(s, "#include {include}");
    }
    s.push_str(
        "#define HIDDEN __attribute__((visibility(\"hidden\")))\n\
         // A declaration bound to an old symbol version.\n\
         #define KBUILD_OLD(ret, name, sym, args) \\\n\
         \x20 ret name args; __asm__(\".symver \" #name \", \" sym);\n\
         // A wrapper that jumps to an old symbol version: same arguments, same return.\n\
         #define KBUILD_JUMP(wrapper, sym) __asm__( \\\n\
         \x20 \".symver kbuild_to_\" #wrapper \", \" sym \"\\n\" \\\n\
         \x20 \".globl \" #wrapper \"\\n.hidden \" #wrapper \"\\n.type \" #wrapper \", @function\\n\" \\\n\
         \x20 #wrapper \":\\n\\tendbr64\\n\\tjmp kbuild_to_\" #wrapper \"@PLT\\n.size \" #wrapper \", .-\" #wrapper \"\\n\");\n\
         extern \"C\" {\n",
    );
    for (name, target) in &fixes.pins {
        let _ = writeln!(s, "KBUILD_JUMP(__wrap_{name}, \"{target}\")");
    }
    for shim in shims {
        let code = shim.code.replace("ISOC23_COMMON", ISOC23_COMMON);
        s.push_str(&code.replace("{w}", &format!("__wrap_{}", shim.name)));
    }
    s.push_str("}\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(name: &str, version: &str, default: bool, address: u64) -> VersionedSymbol {
        VersionedSymbol {
            name: name.into(),
            version: Some(version.into()),
            file: None,
            defined: true,
            default,
            address,
        }
    }

    fn glibc_2_28(v: &str) -> bool {
        version_number(v, "GLIBC").is_some_and(|n| n <= (2, 28, 0))
    }

    #[test]
    fn a_function_is_pinned_only_to_an_old_alias_of_the_same_code() {
        let libc = [
            sym("dlopen", "GLIBC_2.34", true, 0x100),
            sym("dlopen", "GLIBC_2.2.5", false, 0x100),
            // pthread_cond_wait@GLIBC_2.2.5 is the old condvar ABI: other code.
            sym("pthread_cond_wait", "GLIBC_2.3.2", true, 0x200),
            sym("pthread_cond_wait", "GLIBC_2.2.5", false, 0x280),
            sym("arc4random", "GLIBC_2.36", true, 0x300),
        ];
        let fix = |n| fix_for(n, &libc, glibc_2_28);
        assert_eq!(fix("dlopen"), Some(Fix::Pin("dlopen@GLIBC_2.2.5".into())));
        assert_eq!(fix("pthread_cond_wait"), None);
        assert_eq!(fix("arc4random"), None);
        assert_eq!(fix("stat"), Some(Fix::Shim("stat")));
    }

    #[test]
    fn wrappers_get_wrap_flags_and_data_shims_do_not() {
        let fixes = Fixes {
            pins: vec![("dlopen".into(), "dlopen@GLIBC_2.2.5".into())],
            shims: vec!["__libc_single_threaded", "stat"],
        };
        assert_eq!(
            fixes.link_flags()[..2],
            ["-Wl,--wrap=dlopen", "-Wl,--wrap=stat"]
        );
        assert!(fixes.link_flags().contains(&"-l:libdl.so.2".to_string()));
        let src = source(&fixes);
        assert!(src.contains("KBUILD_JUMP(__wrap_dlopen, \"dlopen@GLIBC_2.2.5\")"));
        assert!(src.contains("HIDDEN int __wrap_stat(const char *p, void *b)"));
        assert!(src.contains("char __libc_single_threaded = 0;"));
        assert!(!src.contains("#include <new>"));
    }
}

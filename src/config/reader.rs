//! Typed, span-keeping access to a parsed TOML table: every wrong type, missing key or unknown
//! key becomes an error at its `path:line:column` with a hint.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::error::{ConfigError, ErrorKind, Source};
use super::suggest;
use super::version::Version;

/// A value with the byte span it was read from.
#[derive(Debug, Clone)]
pub(crate) struct Sp<T> {
    pub v: T,
    pub span: Range<usize>,
}

/// One key a table accepts, with an example used in hints.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeySpec<'n> {
    pub name: &'n str,
    /// e.g. `src = ["kernels/relu.cu"]`.
    pub example: &'static str,
    /// Only valid with `edition = 5`.
    pub v5_only: bool,
}

/// Shorthand for building key tables.
pub(crate) const fn key(name: &'static str, example: &'static str) -> KeySpec<'static> {
    KeySpec {
        name,
        example,
        v5_only: false,
    }
}

/// A key that edition 5 added.
pub(crate) const fn key_v5(name: &'static str, example: &'static str) -> KeySpec<'static> {
    KeySpec {
        name,
        example,
        v5_only: true,
    }
}

/// A table being read: its display name (`[kernel.relu]`), where it is defined, its entries.
pub(crate) struct Table<'a, 'i> {
    pub src: &'a Source<'a>,
    pub name: String,
    pub span: Range<usize>,
    entries: &'a DeTable<'i>,
}

type Entry<'a, 'i> = (
    &'a Spanned<std::borrow::Cow<'i, str>>,
    &'a Spanned<DeValue<'i>>,
);

impl<'a, 'i> Table<'a, 'i> {
    pub fn new(
        src: &'a Source<'a>,
        name: String,
        span: Range<usize>,
        entries: &'a DeTable<'i>,
    ) -> Self {
        Table {
            src,
            name,
            span,
            entries,
        }
    }

    /// Entries in the order they are written.
    pub fn entries(&self) -> Vec<Entry<'a, 'i>> {
        let mut all: Vec<_> = self.entries.iter().collect();
        all.sort_by_key(|(k, _)| k.span().start);
        all
    }

    /// The raw value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&'a Spanned<DeValue<'i>>> {
        self.entries.get(key)
    }

    /// Reject keys outside `allowed` (and edition-5 keys when `v5` is false), first in file order.
    pub fn check_keys(&self, allowed: &[KeySpec<'_>], v5: bool) -> Result<(), ConfigError> {
        let valid: Vec<&str> = allowed
            .iter()
            .filter(|k| v5 || !k.v5_only)
            .map(|k| k.name)
            .collect();
        for (k, _) in self.entries() {
            let name = k.get_ref().as_ref();
            if valid.contains(&name) {
                continue;
            }
            let hint = if allowed.iter().any(|s| s.name == name && s.v5_only) {
                format!(
                    "`{name}` is an edition 5 key: add `edition = 5` to `[general]` (and check the \
                     other keys against edition 5), or remove it"
                )
            } else {
                suggest::did_you_mean(name, &valid, "keys")
            };
            return Err(self.src.error(
                &k.span(),
                ErrorKind::UnknownKey,
                format!("unknown key `{name}` in `{}`", self.name),
                hint,
            ));
        }
        Ok(())
    }

    /// `missing key `x` in `[t]``, pointing at the table, with the key's example as hint.
    pub fn missing(&self, spec: &KeySpec<'_>, why: &str) -> ConfigError {
        self.src.error(
            &self.span,
            ErrorKind::MissingKey,
            format!("missing key `{}` in `{}`", spec.name, self.name),
            format!("add `{}`{why}", spec.example),
        )
    }

    /// `<key> in [t] must be <expected>, found <type>`.
    pub fn wrong_type(
        &self,
        spec: &KeySpec<'_>,
        value: &Spanned<DeValue<'_>>,
        expected: &str,
    ) -> ConfigError {
        let found = value.get_ref().type_str();
        let key = if self.name.is_empty() {
            format!("`{}`", spec.name)
        } else {
            format!("`{}` in `{}`", spec.name, self.name)
        };
        self.src.error(
            &value.span(),
            ErrorKind::WrongType,
            format!("{key} must be {expected}, found {} {found}", article(found)),
            format!("write it as `{}`", spec.example),
        )
    }

    /// An error about the value of `spec` at `span`.
    pub fn invalid(&self, span: &Range<usize>, message: String, hint: String) -> ConfigError {
        self.src.error(span, ErrorKind::InvalidValue, message, hint)
    }

    pub fn string(&self, spec: &KeySpec<'_>) -> Result<Option<Sp<String>>, ConfigError> {
        let Some(value) = self.get(spec.name) else {
            return Ok(None);
        };
        match value.get_ref() {
            DeValue::String(s) => Ok(Some(Sp {
                v: s.to_string(),
                span: value.span(),
            })),
            _ => Err(self.wrong_type(spec, value, "a string")),
        }
    }

    pub fn required_string(
        &self,
        spec: &KeySpec<'_>,
        why: &str,
    ) -> Result<Sp<String>, ConfigError> {
        self.string(spec)?.ok_or_else(|| self.missing(spec, why))
    }

    /// A non-negative integer that fits `u32`.
    pub fn integer(&self, spec: &KeySpec<'_>) -> Result<Option<Sp<i64>>, ConfigError> {
        let Some(value) = self.get(spec.name) else {
            return Ok(None);
        };
        let DeValue::Integer(i) = value.get_ref() else {
            return Err(self.wrong_type(spec, value, "an integer"));
        };
        let parsed =
            i64::from_str_radix(&i.as_str().replace('_', ""), i.radix()).map_err(|_| {
                self.invalid(
                    &value.span(),
                    format!("`{}` in `{}` is out of range", spec.name, self.name),
                    format!("write it as `{}`", spec.example),
                )
            })?;
        Ok(Some(Sp {
            v: parsed,
            span: value.span(),
        }))
    }

    /// An array of strings; each element keeps its own span.
    pub fn strings(&self, spec: &KeySpec<'_>) -> Result<Option<Sp<Vec<Sp<String>>>>, ConfigError> {
        let Some(value) = self.get(spec.name) else {
            return Ok(None);
        };
        let DeValue::Array(items) = value.get_ref() else {
            return Err(self.wrong_type(spec, value, "an array of strings"));
        };
        let mut out = Vec::with_capacity(items.len());
        for item in items.iter() {
            match item.get_ref() {
                DeValue::String(s) => out.push(Sp {
                    v: s.to_string(),
                    span: item.span(),
                }),
                other => {
                    let found = other.type_str();
                    return Err(self.src.error(
                        &item.span(),
                        ErrorKind::WrongType,
                        format!(
                            "`{}` in `{}` must be an array of strings, found {} {found} in it",
                            spec.name,
                            self.name,
                            article(found)
                        ),
                        format!("write it as `{}`", spec.example),
                    ));
                }
            }
        }
        Ok(Some(Sp {
            v: out,
            span: value.span(),
        }))
    }

    /// `strings` with later duplicates dropped, each with a warning (`what` names an element:
    /// "backend", "dependency"). HF's schema accepts duplicates; they are never meant.
    pub fn deduped_strings(
        &self,
        spec: &KeySpec<'_>,
        what: &str,
    ) -> Result<Option<Sp<Vec<Sp<String>>>>, ConfigError> {
        let Some(mut list) = self.strings(spec)? else {
            return Ok(None);
        };
        let mut kept: Vec<Sp<String>> = Vec::with_capacity(list.v.len());
        let mut seen = std::collections::HashSet::with_capacity(list.v.len());
        for item in list.v {
            if !seen.insert(item.v.clone()) {
                self.warn_duplicate(&item, spec, what);
            } else {
                kept.push(item);
            }
        }
        list.v = kept;
        Ok(Some(list))
    }

    /// Warn that `item` repeats an earlier entry of `spec` and is ignored.
    pub fn warn_duplicate(&self, item: &Sp<String>, spec: &KeySpec<'_>, what: &str) {
        self.src.warn(
            &item.span,
            format!(
                "{what} `{}` is listed twice in `{}` of `{}`: kbuild uses it once",
                item.v, spec.name, self.name
            ),
            "remove the second entry".to_string(),
        );
    }

    /// `strings`, with duplicates rejected (`what` names an element: "dtype").
    pub fn unique_strings(
        &self,
        spec: &KeySpec<'_>,
        what: &str,
    ) -> Result<Option<Sp<Vec<Sp<String>>>>, ConfigError> {
        let list = self.strings(spec)?;
        if let Some(list) = &list {
            let mut seen = std::collections::HashSet::with_capacity(list.v.len());
            for item in &list.v {
                if !seen.insert(item.v.as_str()) {
                    return Err(self.src.error(
                        &item.span,
                        ErrorKind::Duplicate,
                        format!(
                            "{what} `{}` is listed twice in `{}` of `{}`",
                            item.v, spec.name, self.name
                        ),
                        "remove the second entry".to_string(),
                    ));
                }
            }
        }
        Ok(list)
    }

    /// A sub-table (`[general.cuda]`, `hub.repo-id = ...` or an inline table).
    pub fn table(&self, spec: &KeySpec<'_>) -> Result<Option<Table<'a, 'i>>, ConfigError> {
        let Some(value) = self.get(spec.name) else {
            return Ok(None);
        };
        match value.get_ref() {
            DeValue::Table(t) => Ok(Some(Table::new(
                self.src,
                self.child_name(spec.name),
                value.span(),
                t,
            ))),
            _ => Err(self.wrong_type(spec, value, "a table")),
        }
    }

    /// Display name of a child table: `[general]` + `cuda` → `[general.cuda]`.
    pub fn child_name(&self, key: &str) -> String {
        let inner = self.name.trim_start_matches('[').trim_end_matches(']');
        let key = if key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            key.to_string()
        } else {
            format!("\"{key}\"")
        };
        if inner.is_empty() {
            format!("[{key}]")
        } else {
            format!("[{inner}.{key}]")
        }
    }
}

pub(crate) fn article(type_name: &str) -> &'static str {
    match type_name.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u') => "an",
        _ => "a",
    }
}

/// The key `name` of a schema table.
pub(crate) fn spec<'s>(table: &'s [KeySpec<'static>], name: &str) -> &'s KeySpec<'static> {
    // The schema tables are constants; every lookup names a key that is in them.
    table
        .iter()
        .find(|k| k.name == name)
        .expect("key is in the schema table")
}

/// A dotted version such as `12.4` or `2.10`.
pub(crate) fn version(t: &Table<'_, '_>, s: &KeySpec<'_>) -> Result<Option<Version>, ConfigError> {
    let Some(v) = t.string(s)? else {
        return Ok(None);
    };
    parse_version(t, s, &v).map(Some)
}

pub(crate) fn parse_version(
    t: &Table<'_, '_>,
    s: &KeySpec<'_>,
    v: &Sp<String>,
) -> Result<Version, ConfigError> {
    v.v.parse::<Version>()
        .map(|version| version.at(t.src.location(v.span.start)))
        .map_err(|_| {
            t.invalid(
                &v.span,
                format!("invalid version `{}` for `{}` in `{}`", v.v, s.name, t.name),
                format!("write numbers separated by dots: `{}`", s.example),
            )
        })
}

/// A list of strings (flags), no further checks.
pub(crate) fn strings(t: &Table<'_, '_>, s: &KeySpec<'_>) -> Result<Vec<String>, ConfigError> {
    Ok(t.strings(s)?
        .map(|l| l.v.into_iter().map(|x| x.v).collect())
        .unwrap_or_default())
}

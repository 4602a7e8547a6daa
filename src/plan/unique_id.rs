//! `--unique-id`: the op namespace suffix a build is given instead of the hash of its sources.
//! It becomes part of the op namespace `_<name>_<backend>_<ID>`, which `kbuild check` requires
//! to be a Python identifier, the extension's module name (`<namespace>.abi3.so`, under the
//! file name limit) and `torch.ops.<namespace>` in the generated `_ops.py`: so it is checked
//! once, when the arguments are parsed, before anything is written.

/// The longest `--unique-id`: a commit hash (40) with a run number fits; with the kernel's name
/// and backend the extension's file name stays far below the 255 bytes a file name may have.
pub const MAX_UNIQUE_ID: usize = 64;

/// `id` when it is a usable op namespace suffix: 1 to [`MAX_UNIQUE_ID`] ASCII letters, digits
/// and `_` (with the `_<name>_<backend>_` before it, a Python identifier: the rule `kbuild check`
/// applies to the namespace). The error says what is wrong and what to pass instead.
pub fn parse_unique_id(id: &str) -> Result<String, String> {
    let hint = "hint: pass ASCII letters, digits and `_` only, e.g. `--unique-id ci_4c1f9e2`";
    if id.is_empty() {
        return Err(format!("the op namespace suffix is empty\n{hint}"));
    }
    if let Some((at, c)) =
        (id.char_indices()).find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
    {
        let position = id[..at].chars().count() + 1;
        return Err(format!(
            "the op namespace suffix may hold only ASCII letters, digits and `_`: it becomes part \
             of a Python module name, but character {position} is {c:?}\n{hint}"
        ));
    }
    if id.len() > MAX_UNIQUE_ID {
        return Err(format!(
            "the op namespace suffix is {} characters long, more than {MAX_UNIQUE_ID}: it names \
             the extension's file\nhint: pass a shorter id, e.g. a commit's first 12 characters",
            id.len()
        ));
    }
    Ok(id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unique_id_is_letters_digits_and_underscores_of_bounded_length() {
        for good in [
            "ci_4c1f9e2",
            "1234",
            "_",
            "A_b_9",
            &"x".repeat(MAX_UNIQUE_ID),
        ] {
            assert_eq!(parse_unique_id(good).as_deref(), Ok(good), "{good}");
        }
        let bad = |id: &str| parse_unique_id(id).unwrap_err();
        assert!(bad("x;__import__('os')").contains("character 2 is ';'"));
        assert!(bad("../x").contains("character 1 is '.'"));
        assert!(bad("a b").contains("character 2 is ' '"));
        assert!(bad("a.b").contains("character 2 is '.'"));
        assert!(bad("é").contains("character 1 is 'é'"));
        assert!(bad("").contains("is empty"));
        assert!(bad(&"x".repeat(300)).contains("300 characters long, more than 64"));
        assert!(bad("a\nb").contains("hint: "));
    }
}

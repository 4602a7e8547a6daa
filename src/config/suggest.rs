//! "Did you mean" suggestions for misspelt keys and values.

/// Levenshtein distance in characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let subst = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = subst.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The candidate closest to `input`, if it is close enough to be a plausible typo.
pub fn closest<'a>(input: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let lower = input.to_lowercase();
    let limit = (input.chars().count() / 3).max(1);
    candidates
        .iter()
        .map(|c| (edit_distance(&lower, &c.to_lowercase()), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// `` `a`, `b`, `c` ``.
pub fn list(candidates: &[&str]) -> String {
    candidates
        .iter()
        .map(|c| format!("`{c}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `did you mean `x`? valid <what>: ...` or just the valid list when nothing is close.
pub fn did_you_mean(input: &str, candidates: &[&str], what: &str) -> String {
    match closest(input, candidates) {
        Some(c) => format!("did you mean `{c}`? valid {what}: {}", list(candidates)),
        None => format!("valid {what}: {}", list(candidates)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_insertions_deletions_and_substitutions() {
        assert_eq!(edit_distance("cuda-flag", "cuda-flags"), 1);
        assert_eq!(edit_distance("cuda2", "cuda"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn closest_suggests_near_misses_only() {
        let keys = ["backend", "cuda-capabilities", "cuda-flags", "src"];
        assert_eq!(closest("cuda-flag", &keys), Some("cuda-flags"));
        assert_eq!(closest("srcs", &keys), Some("src"));
        assert_eq!(closest("Backend", &keys), Some("backend"));
        assert_eq!(closest("cuda_capability", &keys), Some("cuda-capabilities"));
        assert_eq!(closest("license", &keys), None);
    }

    #[test]
    fn did_you_mean_lists_the_valid_values() {
        let backends = ["cpu", "cuda", "metal"];
        assert_eq!(
            did_you_mean("cuda2", &backends, "backends"),
            "did you mean `cuda`? valid backends: `cpu`, `cuda`, `metal`"
        );
        assert_eq!(
            did_you_mean("tpu-v5", &backends, "backends"),
            "valid backends: `cpu`, `cuda`, `metal`"
        );
    }
}

//! `cicc`'s PTX in one order, however its work was split.
//!
//! `cicc -split-compile=N` optimizes parts of the module on N threads and writes them back in
//! an order that depends on N: the same declarations and functions, permuted (kernels-community
//! `activation`: every N from 2 gave its own order, and no split another), with the comments
//! on demoted `__shared__` variables reordered too. `ptxas` keeps that order in the cubin, so
//! the same unit split another way, on a machine with other cores or at another `-j`, gave
//! another `.so`. kbuild's steps therefore rewrite each PTX file `cicc` writes in a canonical
//! order ([`canonical`]) before `ptxas` and `fatbinary` read it: the header first, then the
//! top-level comments sorted, then every declaration and definition sorted by (kind, name,
//! text), each placed after whatever it names (a stable topological order), so that the PTX
//! stays valid and the bytes depend only on what `cicc` wrote, not on how it was split.
//!
//! nvcc 13.0's split `cicc` also numbers a function's virtual registers otherwise (the
//! flagship's `block.cu` on the H100: `%r<114>` split, `%r<110>` not, the instructions the same
//! but for the numbers; every cubin identical, `ptxas` allocates its own): each function's
//! registers are renumbered in the order they first appear, and its `.reg` declarations count
//! what it uses ([`renumber_registers`]). `ptxas` builds the same cubin from either.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// One top-level PTX item: a declaration or a definition, with the name it declares.
struct Item<'a> {
    text: &'a str,
    name: Option<String>,
    rank: u8,
}

/// `text` (a PTX module as `cicc` writes it) in the canonical order; `None` when it is not a
/// shape this knows (no `.address_size` header, debug sections, block comments, unbalanced
/// braces, or names that refer to each other in a cycle): the caller keeps it as written.
pub(crate) fn canonical(text: &str) -> Option<String> {
    let debug = |line: &str| line.trim_start().starts_with(".section");
    if text.contains("/*") || text.contains("@@DWARF") || text.lines().any(debug) {
        return None;
    }
    let (header, rest) = split_header(text)?;
    let (comments, items) = items(rest)?;
    let order = dependency_order(&items)?;
    let mut out = String::with_capacity(text.len() + 64);
    out.push_str(header);
    out.push('\n');
    for comment in comments {
        out.push_str(comment);
        out.push('\n');
    }
    for i in order {
        out.push('\n');
        match items[i].rank {
            2 => out.push_str(&renumber_registers(items[i].text)),
            _ => out.push_str(items[i].text),
        }
        out.push('\n');
    }
    Some(out)
}

/// The lines up to and including `.address_size`, and what follows.
fn split_header(text: &str) -> Option<(&str, &str)> {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        at += line.len();
        if line.trim_start().starts_with(".address_size") {
            return Some((text[..at].trim_end_matches('\n'), &text[at..]));
        }
    }
    None
}

/// The code of `line`: up to a `//` comment outside a string.
fn code(line: &str) -> &str {
    let mut quoted = false;
    let bytes = line.as_bytes();
    for i in 0..bytes.len() {
        match bytes[i] {
            b'"' => quoted = !quoted,
            b'/' if !quoted && bytes.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => {}
        }
    }
    line
}

/// Top-level comment lines (sorted) and items, in the order written.
fn items(rest: &str) -> Option<(Vec<&str>, Vec<Item<'_>>)> {
    let mut comments = Vec::new();
    let mut items = Vec::new();
    let mut start: Option<usize> = None;
    let mut depth: i64 = 0;
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        let here = at;
        at += line.len();
        let trimmed = line.trim();
        if start.is_none() {
            if trimmed.is_empty() {
                continue;
            }
            if trimmed.starts_with("//") {
                comments.push(line.trim_end_matches(['\n', '\r']));
                continue;
            }
            start = Some(here);
        }
        let code = code(line).trim_end();
        depth += brace_balance(code);
        if depth < 0 {
            return None;
        }
        if depth == 0 && (code.ends_with(';') || code.ends_with('}')) {
            let text = rest[start.take()?..at].trim_end_matches(['\n', '\r']);
            items.push(item(text));
        }
    }
    if start.is_some() || depth != 0 {
        return None;
    }
    comments.sort_unstable();
    Some((comments, items))
}

fn brace_balance(code: &str) -> i64 {
    let mut quoted = false;
    let mut balance = 0;
    for c in code.chars() {
        match c {
            '"' => quoted = !quoted,
            '{' if !quoted => balance += 1,
            '}' if !quoted => balance -= 1,
            _ => {}
        }
    }
    balance
}

/// The identifiers of `text`'s code (registers, `%r1`, and directives, `.b8`, are not).
fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.lines().flat_map(|line| {
        code(line)
            .split(|c: char| {
                !(c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '.' || c == '%')
            })
            .filter(|w| {
                w.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
            })
    })
}

/// An item with the name it declares: the first identifier outside parentheses (after a
/// function's return parameters), and its rank: function prototypes, then variables, then
/// function bodies.
fn item(text: &str) -> Item<'_> {
    let mut depth = 0i32;
    let mut name = None;
    let mut function = false;
    // The code before the body's `{`: a function's body (most of the module) is not copied.
    let mut head = String::new();
    for line in text.lines().map(code) {
        if let Some(at) = line.find('{') {
            head.push_str(&line[..at]);
            break;
        }
        head.push_str(line);
        head.push('\n');
    }
    let head = head.strip_suffix('\n').unwrap_or(&head);
    for word in head.split_inclusive(['(', ')', ' ', '\t', '\n', '[', ';', '=', ',']) {
        let token = word.trim_end_matches(['(', ')', ' ', '\t', '\n', '[', ';', '=', ',']);
        if token == ".entry" || token == ".func" {
            function = true;
        }
        if depth == 0
            && name.is_none()
            && token
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        {
            name = Some(token.to_owned());
        }
        if word.ends_with('(') {
            depth += 1;
        } else if word.ends_with(')') {
            depth -= 1;
        }
    }
    let body = function && text.contains('{');
    let rank = match (function, body) {
        (true, false) => 0,
        (false, _) => 1,
        (true, true) => 2,
    };
    Item { text, name, rank }
}

/// `function` (a PTX definition) with its virtual registers numbered from 1 in the order they
/// first appear, per class (`%r`, `%rd`, `%p`, …: the names its `.reg … %<class><N>;` lines
/// declare), and those lines counting what it uses. Left as written when a `.reg` line declares
/// a register by its own name (an inline `asm` block's scope), which renaming could miss.
fn renumber_registers(function: &str) -> std::borrow::Cow<'_, str> {
    let declaring = |line: &str| line.trim_start().starts_with(".reg");
    let mut classes: Vec<&str> = Vec::new();
    for line in function.lines().filter(|l| declaring(l)) {
        let declared = register_ranges(line);
        if declared.is_empty() {
            return function.into();
        }
        classes.extend(declared.into_iter().map(|(class, _)| class));
    }
    let mut numbers: HashMap<(&str, &str), usize> = HashMap::new();
    let mut used: HashMap<&str, usize> = HashMap::new();
    let mut out = String::with_capacity(function.len());
    for line in function.split_inclusive('\n') {
        if declaring(line) {
            out.push_str(line);
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find('%') {
            out.push_str(&rest[..at]);
            let word = &rest[at + 1..];
            let letters = word
                .find(|c: char| !c.is_ascii_lowercase())
                .unwrap_or(word.len());
            let digits = word[letters..]
                .find(|c: char| !c.is_ascii_digit())
                .map_or(word.len(), |d| letters + d);
            let ends = word[digits..]
                .chars()
                .next()
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'));
            let class = &word[..letters];
            if digits > letters && ends && classes.contains(&class) {
                let next = used.entry(class).or_insert(0);
                let n = *numbers
                    .entry((class, &word[letters..digits]))
                    .or_insert_with(|| {
                        *next += 1;
                        *next
                    });
                out.push('%');
                out.push_str(class);
                out.push_str(&n.to_string());
                rest = &word[digits..];
            } else {
                out.push('%');
                rest = word;
            }
        }
        out.push_str(rest);
    }
    // The declarations, counting the registers used (`%r<N>` declares `%r0` to `%r(N-1)`).
    let mut counted = String::with_capacity(out.len());
    for line in out.split_inclusive('\n') {
        if !declaring(line) {
            counted.push_str(line);
            continue;
        }
        let declared = line;
        let mut line = declared.to_owned();
        for (class, range) in register_ranges(declared) {
            let count = used.get(class).copied().unwrap_or(0) + 1;
            line = line.replacen(range, &format!("%{class}<{count}>"), 1);
        }
        counted.push_str(&line);
    }
    counted.into()
}

/// The `%<class><N>` ranges a `.reg` line declares: (class, the text `%<class><N>`).
fn register_ranges(line: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find('%') {
        let word = &rest[at..];
        let letters = word[1..]
            .find(|c: char| !c.is_ascii_lowercase())
            .map_or(word.len(), |l| l + 1);
        let range = word[letters..]
            .strip_prefix('<')
            .and_then(|r| r.find('>').map(|close| letters + 1 + close + 1))
            .filter(|&end| {
                word[letters + 1..end - 1]
                    .bytes()
                    .all(|b| b.is_ascii_digit())
            });
        match range {
            Some(end) if letters > 1 && end > letters + 2 => {
                out.push((&word[1..letters], &word[..end]));
                rest = &word[end..];
            }
            _ => return Vec::new(),
        }
    }
    out
}

/// The items in (rank, name, text) order, each after the items declaring what it names (a
/// prototype when there is one, else the definition); `None` on a cycle.
fn dependency_order(items: &[Item]) -> Option<Vec<usize>> {
    let mut declarer: HashMap<&str, usize> = HashMap::new();
    for (i, it) in items.iter().enumerate() {
        if let Some(name) = &it.name {
            let entry = declarer.entry(name.as_str()).or_insert(i);
            if it.rank < items[*entry].rank {
                *entry = i;
            }
        }
    }
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
    let mut waiting = vec![0usize; items.len()];
    for (i, it) in items.iter().enumerate() {
        let mut named: Vec<usize> = identifiers(it.text)
            .filter(|w| Some(*w) != it.name.as_deref())
            .filter_map(|w| declarer.get(w).copied())
            .filter(|&d| d != i)
            .collect();
        named.sort_unstable();
        named.dedup();
        waiting[i] = named.len();
        for d in named {
            users[d].push(i);
        }
    }
    let key = |i: usize| {
        let it = &items[i];
        Reverse((it.rank, it.name.as_deref().unwrap_or(""), it.text, i))
    };
    let mut ready: BinaryHeap<_> = (0..items.len())
        .filter(|&i| waiting[i] == 0)
        .map(key)
        .collect();
    let mut order = Vec::with_capacity(items.len());
    while let Some(Reverse((_, _, _, i))) = ready.pop() {
        order.push(i);
        for &u in &users[i] {
            waiting[u] -= 1;
            if waiting[u] == 0 {
                ready.push(key(u));
            }
        }
    }
    (order.len() == items.len()).then_some(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "//\n// Generated by NVIDIA NVVM Compiler\n//\n\n.version 9.2\n.target sm_90\n.address_size 64\n";

    fn module(parts: &[&str]) -> String {
        format!("{HEADER}\n{}\n", parts.join("\n\n"))
    }

    const PROTO: &str =
        ".func  (.param .b32 func_retval0) helper\n(\n\t.param .b32 helper_param_0\n)\n;";
    const VAR: &str = ".global .align 4 .b8 table[8] = {1, 0, 0, 0, 2, 0, 0, 0};";
    const HELPER: &str =
        ".func  (.param .b32 func_retval0) helper(\n\t.param .b32 helper_param_0\n)\n{\n\tret;\n}";
    const ENTRY: &str = ".visible .entry kern(\n\t.param .u64 kern_param_0\n)\n{\n\tmov.u64 %rd1, table;\n\tcall.uni (retval0), helper, (param0);\n\tret;\n}";

    #[test]
    fn a_permuted_module_comes_out_in_the_same_order_as_the_original() {
        let a = module(&[
            "// b has been demoted",
            "// a has been demoted",
            PROTO,
            VAR,
            HELPER,
            ENTRY,
        ]);
        let b = module(&[
            "// a has been demoted",
            ENTRY,
            VAR,
            "// b has been demoted",
            HELPER,
            PROTO,
        ]);
        assert_eq!(canonical(&a).unwrap(), canonical(&b).unwrap());
    }

    #[test]
    fn every_item_follows_what_it_names_and_the_header_stays_first() {
        // Without a prototype the entry must follow the helper's definition it calls, though
        // "helper" > "kern" would not put it there by name.
        let out = canonical(&module(&[ENTRY, HELPER, VAR])).unwrap();
        assert!(out.starts_with(HEADER.trim_end()));
        let pos = |s: &str| out.find(s).unwrap();
        assert!(pos(VAR) < pos(ENTRY));
        assert!(pos(HELPER) < pos(ENTRY));
        // The same lines, none lost or added.
        let mut before: Vec<_> = module(&[ENTRY, HELPER, VAR])
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        let mut after: Vec<_> = out
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        before.sort();
        after.sort();
        assert_eq!(before, after);
    }

    #[test]
    fn registers_are_numbered_in_the_order_they_first_appear_per_function() {
        let split = ".visible .entry k(\n)\n{\n\t.reg .pred %p<3>;\n\t.reg .b32 %r<114>;\n\t.reg .b64 %rd<9>;\n\tmov.u32 %r27, %ctaid.x;\n\tmov.u32 %r28, %ntid.x;\n\tmul.wide.u32 %rd4, %r28, %r27;\n\tsetp.eq.s32 %p2, %r27, 0;\n\tst.u32 [%rd4+8], %r27;\n\tret;\n}";
        let plain = split
            .replace("%r<114>", "%r<110>")
            .replace("%r27", "%r23")
            .replace("%r28", "%r24")
            .replace("%rd4", "%rd7");
        let a = renumber_registers(split);
        assert_eq!(a, renumber_registers(&plain));
        assert!(a.contains("\t.reg .b32 %r<3>;\n"), "{a}");
        assert!(
            a.contains("mov.u32 %r1, %ctaid.x;\n\tmov.u32 %r2, %ntid.x;"),
            "{a}"
        );
        assert!(a.contains("mul.wide.u32 %rd1, %r2, %r1;"), "{a}");
        assert!(
            a.contains("setp.eq.s32 %p1, %r1, 0;") && a.contains("[%rd1+8]"),
            "{a}"
        );
        // An inline asm scope declaring a register of its own name: left alone.
        let scoped = split.replace("\tret;", "\t{\n\t.reg .b32 %r5;\n\t}\n\tret;");
        assert_eq!(renumber_registers(&scoped), scoped);
    }

    #[test]
    fn modules_it_does_not_know_are_left_as_written() {
        assert!(canonical("no header here\n").is_none());
        assert!(canonical(&module(&[ENTRY, "\t.section .debug_info\n\t{\n\t}"])).is_none());
        assert!(canonical(&module(&["/* block */", ENTRY])).is_none());
        assert!(canonical(&module(&[".visible .entry open(\n)\n{\n\tret;"])).is_none());
    }
}

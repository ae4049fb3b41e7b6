//! `cargo xtask imports`: a module-level import-cycle check over every workspace crate.
//!
//! For each crate root (`src/lib.rs`, `src/main.rs` of every workspace member) the module
//! tree is rebuilt by following `mod NAME;` declarations, leaving out test-only modules
//! (`#[cfg(test)]`-gated declarations and inline `mod tests { … }` blocks). Every file is
//! then scanned, after stripping comments and string literals, for paths that start with
//! `crate::` or `super::`, `use` trees with braces being expanded. Each path resolves to the
//! deepest module of the tree that its leading segments name, looking through one level of
//! re-export (`pub use child::Name;` in a module `M` makes `M::Name` mean `M::child`).
//!
//! A reference between a module and one of its ancestors or descendants is always allowed.
//! Any other reference, from a module `F` to a module `T`, becomes an edge between the two
//! children of their lowest common ancestor that contain `F` and `T`; a strongly connected
//! component of more than one node in such a sibling graph is an import cycle.
//!
//! This is a lexical approximation, not name resolution: `std` only, no parser crate.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};

/// Scans the workspace, prints every import cycle and a summary, and fails when any cycle
/// exists.
pub fn run() -> Result<(), String> {
    let root = crate::root();
    let report = scan_workspace(&root)?;
    for w in &report.warnings {
        eprintln!("warning: imports: {w}");
    }
    for c in &report.cycles {
        print!("{c}");
    }
    println!(
        "imports: {} crate(s), {} module(s) scanned, {} cycle(s)",
        report.crates,
        report.modules,
        report.cycles.len()
    );
    if report.cycles.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} module import cycle(s), listed above (`cargo xtask imports`)",
            report.cycles.len()
        ))
    }
}

/// What a scan of the workspace found.
struct Report {
    /// Crate roots scanned.
    crates: usize,
    /// File modules in all the module trees.
    modules: usize,
    /// Every cycle, crate by crate.
    cycles: Vec<Cycle>,
    /// Declarations whose file could not be found, unreadable members.
    warnings: Vec<String>,
}

/// Builds the module tree of every crate root of the workspace at `root` and finds the
/// cycles of each.
fn scan_workspace(root: &Path) -> Result<Report, String> {
    let manifest = root.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
    let read = |p: &Path| std::fs::read_to_string(root.join(p)).ok();
    let mut report = Report { crates: 0, modules: 0, cycles: Vec::new(), warnings: Vec::new() };
    for member in expand_members(root, &workspace_members(&text)) {
        let Some(toml) = read(&Path::new(&member).join("Cargo.toml")) else {
            report.warnings.push(format!("member `{member}` has no readable Cargo.toml"));
            continue;
        };
        let name = package_name(&toml).unwrap_or_else(|| member.clone());
        let src = Path::new(&member).join("src");
        let lib = src.join("lib.rs");
        let has_lib = read(&lib).is_some();
        let mut roots = Vec::new();
        if has_lib {
            roots.push((name.clone(), lib));
        }
        let main = src.join("main.rs");
        if read(&main).is_some() {
            roots.push((if has_lib { format!("{name}[bin]") } else { name.clone() }, main));
        }
        for (label, file) in roots {
            let Some(tree) = build_tree(&label, &file, &read, &mut report.warnings) else {
                continue;
            };
            report.crates += 1;
            report.modules += tree.modules.len();
            report.cycles.extend(find_cycles(&tree));
        }
    }
    Ok(report)
}

/// The `members` of the `[workspace]` table of a root Cargo.toml, as written.
fn workspace_members(toml: &str) -> Vec<String> {
    let mut in_workspace = false;
    let mut collecting = false;
    let mut list = String::new();
    for line in toml.lines() {
        let t = line.trim();
        if collecting {
            list.push_str(t);
            if t.contains(']') {
                break;
            }
            continue;
        }
        if t.starts_with('[') {
            in_workspace = t == "[workspace]";
            continue;
        }
        if in_workspace
            && let Some(rest) = t.strip_prefix("members")
            && let Some(value) = rest.trim_start().strip_prefix('=')
        {
            list.push_str(value);
            if value.contains(']') {
                break;
            }
            collecting = true;
        }
    }
    let list = list.split(']').next().unwrap_or("");
    list.split('"').skip(1).step_by(2).map(str::to_owned).collect()
}

/// Expands the `dir/*` members into the subdirectories of `dir` that hold a Cargo.toml.
fn expand_members(root: &Path, members: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for m in members {
        let Some(dir) = m.strip_suffix("/*") else {
            out.push(m.clone());
            continue;
        };
        let mut found: Vec<String> = std::fs::read_dir(root.join(dir))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().join("Cargo.toml").is_file())
            .map(|e| format!("{dir}/{}", e.file_name().to_string_lossy()))
            .collect();
        found.sort();
        out.extend(found);
    }
    out
}

/// The `name` of the `[package]` table of a member's Cargo.toml.
fn package_name(toml: &str) -> Option<String> {
    let mut in_package = false;
    for line in toml.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            in_package = t == "[package]";
        } else if in_package
            && let Some(rest) = t.strip_prefix("name")
            && let Some(value) = rest.trim_start().strip_prefix('=')
        {
            return value.split('"').nth(1).map(str::to_owned);
        }
    }
    None
}

// ---------------------------------------------------------------------------------------
// Lexing

/// A token of Rust source, as much of one as the scan needs.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// An identifier or keyword (a raw identifier without its `r#`).
    Ident(String),
    /// The contents of a string literal of any kind, escapes left as written.
    Str(String),
    /// `::`.
    PathSep,
    /// Any other single character of punctuation.
    Punct(char),
    /// A numeric literal.
    Number,
}

/// A token and the line (from 1) it starts on.
#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    line: usize,
}

/// Splits Rust source into tokens, dropping comments (doc comments included), character
/// literals and lifetimes; string literals become [`Tok::Str`], so that nothing inside them
/// is mistaken for code.
fn lex(src: &str) -> Vec<Token> {
    let chars: Vec<char> = src.chars().collect();
    let at = |k: usize| chars.get(k).copied();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start_line = line;
        let mut push = |tok: Tok| out.push(Token { tok, line: start_line });
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == Some('*') {
            // Block comments nest.
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == Some('*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == Some('/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if c == '"' {
            let (s, end) = quoted(&chars, i + 1, &mut line);
            push(Tok::Str(s));
            i = end;
        } else if c == '\'' {
            if at(i + 1) == Some('\\') {
                // An escaped character literal: '\n', '\'', '\u{1F600}'.
                i += 3;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == Some('\'') {
                i += 3;
            } else {
                // A lifetime or a label: its name follows as an identifier.
                i += 1;
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let hashes = chars[i..].iter().take_while(|&&h| h == '#').count();
            if matches!(word.as_str(), "r" | "br" | "cr") && at(i + hashes) == Some('"') {
                let (s, end) = raw_quoted(&chars, i + hashes + 1, hashes, &mut line);
                push(Tok::Str(s));
                i = end;
            } else if matches!(word.as_str(), "b" | "c") && at(i) == Some('"') {
                let (s, end) = quoted(&chars, i + 1, &mut line);
                push(Tok::Str(s));
                i = end;
            } else if word == "r"
                && hashes == 1
                && at(i + 1).is_some_and(|n| n.is_alphabetic() || n == '_')
            {
                // A raw identifier, `r#type`.
                let start = i + 1;
                i = start;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                push(Tok::Ident(chars[start..i].iter().collect()));
            } else if word == "b" && at(i) == Some('\'') {
                // A byte literal: the quote is handled on the next turn.
            } else {
                push(Tok::Ident(word));
            }
        } else if c.is_ascii_digit() {
            while i < chars.len() {
                let d = chars[i];
                let fraction = d == '.' && at(i + 1).is_some_and(|n| n.is_ascii_digit());
                if d.is_alphanumeric() || d == '_' || fraction {
                    i += 1;
                } else {
                    break;
                }
            }
            push(Tok::Number);
        } else if c == ':' && at(i + 1) == Some(':') {
            push(Tok::PathSep);
            i += 2;
        } else {
            push(Tok::Punct(c));
            i += 1;
        }
    }
    out
}

/// Reads a string literal whose opening quote is just before `start`, honouring
/// backslash escapes; returns its contents and the index after the closing quote.
fn quoted(chars: &[char], start: usize, line: &mut usize) -> (String, usize) {
    let mut s = String::new();
    let mut i = start;
    while i < chars.len() && chars[i] != '"' {
        if chars[i] == '\\' && i + 1 < chars.len() {
            s.push(chars[i]);
            i += 1;
        }
        if chars[i] == '\n' {
            *line += 1;
        }
        s.push(chars[i]);
        i += 1;
    }
    (s, i + 1)
}

/// Reads a raw string literal opened by `hashes` hashes and a quote just before `start`;
/// returns its contents and the index after the closing quote and hashes.
fn raw_quoted(chars: &[char], start: usize, hashes: usize, line: &mut usize) -> (String, usize) {
    let mut i = start;
    while i < chars.len() {
        if chars[i] == '"'
            && chars[i + 1..].iter().take(hashes).filter(|&&h| h == '#').count() == hashes
        {
            return (chars[start..i].iter().collect(), i + 1 + hashes);
        }
        if chars[i] == '\n' {
            *line += 1;
        }
        i += 1;
    }
    (chars[start..].iter().collect(), chars.len())
}

// ---------------------------------------------------------------------------------------
// Scanning one file

/// What one source file declares and references.
#[derive(Debug, Default)]
struct FileScan {
    /// The file is test-only (an inner `#![cfg(test)]`).
    test_only: bool,
    /// Its out-of-line `mod NAME;` declarations, test-only ones left out.
    mods: Vec<ModDecl>,
    /// Every path starting with `crate::` or `super::`.
    refs: Vec<RawRef>,
    /// Every `pub use` / `pub(…) use` leaf at the top level of the file.
    reexports: Vec<ReExport>,
}

/// A `mod NAME;` declaration.
#[derive(Debug, Clone)]
struct ModDecl {
    name: String,
    /// The value of a `#[path = "…"]` attribute.
    path: Option<String>,
    line: usize,
}

/// A path as written, where it was written.
#[derive(Debug, Clone)]
struct RawRef {
    line: usize,
    /// The segments, `crate`/`super` first; a glob import ends with `*`.
    segs: Vec<String>,
    /// The inline (non-test) modules of the file the path is written in, outermost first:
    /// `super::` counts from the innermost.
    scope: Vec<String>,
}

/// One leaf of a `pub use` item: `name` is visible in the module as `segs`.
#[derive(Debug, Clone, PartialEq)]
struct ReExport {
    name: String,
    segs: Vec<String>,
}

/// One leaf of an expanded `use` tree.
#[derive(Debug, Clone, PartialEq)]
struct Leaf {
    /// The full path; a trailing `self` is dropped and a glob keeps its `*`.
    segs: Vec<String>,
    /// The name given with `as`.
    alias: Option<String>,
    /// Line of the leaf's last segment.
    line: usize,
}

/// The attributes seen before an item.
#[derive(Debug, Default)]
struct Attrs {
    /// A `cfg` that is false whenever `test` is.
    test_only: bool,
    /// A `#[path = "…"]`.
    path: Option<String>,
}

/// Keywords that start an item or statement an attribute can remove as a whole.
const ITEM_KEYWORDS: &[&str] = &[
    "mod",
    "use",
    "fn",
    "impl",
    "struct",
    "enum",
    "union",
    "const",
    "static",
    "type",
    "trait",
    "unsafe",
    "async",
    "extern",
    "macro_rules",
    "let",
];

/// Scans the source of one file.
fn scan(src: &str) -> FileScan {
    let toks = lex(src);
    let mut s =
        Scanner { toks: &toks, i: 0, depth: 0, inline: Vec::new(), out: FileScan::default() };
    s.run();
    s.out
}

/// The state of the walk over the tokens of one file.
struct Scanner<'a> {
    toks: &'a [Token],
    /// The next token.
    i: usize,
    /// Braces open.
    depth: usize,
    /// Inline modules open: name, and the brace depth outside their body.
    inline: Vec<(String, usize)>,
    out: FileScan,
}

impl<'a> Scanner<'a> {
    /// The token at `k`, if any.
    fn tok(&self, k: usize) -> Option<&'a Tok> {
        self.toks.get(k).map(|t| &t.tok)
    }

    /// Whether the token at `k` is the punctuation `c`.
    fn punct(&self, k: usize, c: char) -> bool {
        self.tok(k) == Some(&Tok::Punct(c))
    }

    /// The identifier at `k`, if that token is one.
    fn ident(&self, k: usize) -> Option<&'a str> {
        match self.tok(k) {
            Some(Tok::Ident(s)) => Some(s),
            _ => None,
        }
    }

    /// The line of the token at `k` (of the last token past the end).
    fn line(&self, k: usize) -> usize {
        self.toks.get(k).or(self.toks.last()).map_or(0, |t| t.line)
    }

    /// Whether the scan is at the top level of the file module (outside any block).
    fn at_file_level(&self) -> bool {
        self.depth == 0 && self.inline.is_empty()
    }

    /// Walks every token of the file.
    fn run(&mut self) {
        let mut attrs = Attrs::default();
        while self.i < self.toks.len() {
            let i = self.i;
            if self.punct(i, '#') {
                let inner = self.punct(i + 1, '!');
                let open = if inner { i + 2 } else { i + 1 };
                if self.punct(open, '[') {
                    let (a, end) = self.attribute(open);
                    if inner {
                        self.out.test_only |= a.test_only && self.at_file_level();
                    } else {
                        attrs.test_only |= a.test_only;
                        attrs.path = a.path.or(attrs.path.take());
                    }
                    self.i = end;
                    continue;
                }
            }
            let item_attrs = std::mem::take(&mut attrs);
            if item_attrs.test_only && self.starts_item(i) {
                self.i = self.skip_item(i);
                continue;
            }
            let (public, j) = self.visibility(i);
            if self.ident(j) == Some("mod")
                && let Some(name) = self.ident(j + 1).map(str::to_owned)
            {
                if self.punct(j + 2, ';') {
                    if self.at_file_level() {
                        let line = self.line(j);
                        self.out.mods.push(ModDecl { name, path: item_attrs.path, line });
                    }
                    self.i = j + 3;
                    continue;
                }
                if self.punct(j + 2, '{') {
                    if name == "tests" {
                        self.i = self.skip_block(j + 2);
                    } else {
                        self.inline.push((name, self.depth));
                        self.depth += 1;
                        self.i = j + 3;
                    }
                    continue;
                }
            }
            if self.ident(j) == Some("use")
                && let Some((leaves, end)) = self.use_item(j + 1)
            {
                let top = self.at_file_level();
                for leaf in leaves {
                    if public && top {
                        let name = leaf.alias.clone().or_else(|| leaf.segs.last().cloned());
                        if let Some(name) = name.filter(|n| n != "_" && n != "*") {
                            self.out.reexports.push(ReExport { name, segs: leaf.segs.clone() });
                        }
                    }
                    if matches!(leaf.segs.first().map(String::as_str), Some("crate" | "super")) {
                        let scope = self.scope();
                        self.out.refs.push(RawRef { line: leaf.line, segs: leaf.segs, scope });
                    }
                }
                self.i = end;
                continue;
            }
            self.step();
        }
    }

    /// Names of the inline modules open, outermost first.
    fn scope(&self) -> Vec<String> {
        self.inline.iter().map(|(n, _)| n.clone()).collect()
    }

    /// Handles one ordinary token: braces, and paths starting with `crate::` / `super::`.
    fn step(&mut self) {
        let i = self.i;
        match self.tok(i) {
            Some(Tok::Punct('{')) => self.depth += 1,
            Some(Tok::Punct('}')) => {
                self.depth = self.depth.saturating_sub(1);
                if self.inline.last().is_some_and(|(_, d)| *d == self.depth) {
                    self.inline.pop();
                }
            }
            Some(Tok::Ident(w)) if w == "crate" || w == "super" => {
                let path_start = i == 0 || self.tok(i - 1) != Some(&Tok::PathSep);
                // `pub(in crate::a)` restricts visibility, it depends on nothing.
                let restriction = i > 0 && self.ident(i - 1) == Some("in");
                if path_start && !restriction && self.tok(i + 1) == Some(&Tok::PathSep) {
                    let mut segs = vec![w.clone()];
                    let mut k = i + 1;
                    while self.tok(k) == Some(&Tok::PathSep)
                        && let Some(next) = self.ident(k + 1)
                    {
                        segs.push(next.to_owned());
                        k += 2;
                    }
                    let line = self.line(k - 1);
                    let scope = self.scope();
                    self.out.refs.push(RawRef { line, segs, scope });
                    self.i = k;
                    return;
                }
            }
            _ => {}
        }
        self.i += 1;
    }

    /// Reads the attribute whose `[` is at `open`; returns what matters of it and the index
    /// after its `]`.
    fn attribute(&self, open: usize) -> (Attrs, usize) {
        let mut end = open;
        let mut depth = 0;
        while end < self.toks.len() {
            match self.tok(end) {
                Some(Tok::Punct('[')) => depth += 1,
                Some(Tok::Punct(']')) => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            end += 1;
        }
        let mut attrs = Attrs::default();
        match self.ident(open + 1) {
            Some("cfg") if self.punct(open + 2, '(') => {
                let mut k = open + 3;
                attrs.test_only = self.cfg_predicate(&mut k) == Tri::False;
            }
            Some("path") if self.punct(open + 2, '=') => {
                if let Some(Tok::Str(p)) = self.tok(open + 3) {
                    attrs.path = Some(p.clone());
                }
            }
            _ => {}
        }
        (attrs, end + 1)
    }

    /// Evaluates the `cfg` predicate at `*k` with `test` false and every other option
    /// unknown; leaves `*k` after it.
    fn cfg_predicate(&self, k: &mut usize) -> Tri {
        let Some(name) = self.ident(*k).map(str::to_owned) else {
            *k += 1;
            return Tri::Unknown;
        };
        *k += 1;
        if matches!(name.as_str(), "all" | "any" | "not") && self.punct(*k, '(') {
            *k += 1;
            let mut values = Vec::new();
            while *k < self.toks.len() && !self.punct(*k, ')') {
                values.push(self.cfg_predicate(k));
                if self.punct(*k, ',') {
                    *k += 1;
                }
            }
            *k += 1;
            return match name.as_str() {
                "all" if values.contains(&Tri::False) => Tri::False,
                "all" if values.iter().all(|v| *v == Tri::True) => Tri::True,
                "any" if values.contains(&Tri::True) => Tri::True,
                "any" if values.iter().all(|v| *v == Tri::False) => Tri::False,
                "not" => values.first().map_or(Tri::Unknown, |v| v.negate()),
                _ => Tri::Unknown,
            };
        }
        if self.punct(*k, '=') {
            *k += 2;
            return Tri::Unknown;
        }
        if name == "test" { Tri::False } else { Tri::Unknown }
    }

    /// Skips a visibility (`pub`, `pub(crate)`, …) at `k`: whether there was one, and the
    /// index after it.
    fn visibility(&self, k: usize) -> (bool, usize) {
        if self.ident(k) != Some("pub") {
            return (false, k);
        }
        if !self.punct(k + 1, '(') {
            return (true, k + 1);
        }
        let mut j = k + 2;
        while j < self.toks.len() && !self.punct(j, ')') {
            j += 1;
        }
        (true, j + 1)
    }

    /// Whether an item, a `let` or a struct field starts at `k`.
    fn starts_item(&self, k: usize) -> bool {
        let (_, j) = self.visibility(k);
        self.ident(j).is_some_and(|w| ITEM_KEYWORDS.contains(&w) || self.punct(j + 1, ':'))
    }

    /// Skips the item starting at `k`: up to its `;`, the end of its first block, or (a
    /// struct field) its `,`; returns the index after it.
    fn skip_item(&self, k: usize) -> usize {
        let (_, j) = self.visibility(k);
        let field =
            self.ident(j).is_some_and(|w| !ITEM_KEYWORDS.contains(&w)) && self.punct(j + 1, ':');
        let mut nest = 0usize;
        let mut k = k;
        while let Some(t) = self.tok(k) {
            match t {
                Tok::Punct('{') if nest == 0 => return self.skip_block(k),
                Tok::Punct('(' | '[' | '{') => nest += 1,
                Tok::Punct(')' | ']' | '}') => {
                    if nest == 0 {
                        return k;
                    }
                    nest -= 1;
                }
                Tok::Punct(';') if nest == 0 => return k + 1,
                Tok::Punct(',') if nest == 0 && field => return k + 1,
                _ => {}
            }
            k += 1;
        }
        k
    }

    /// The index after the block whose `{` is at `k`.
    fn skip_block(&self, k: usize) -> usize {
        let mut depth = 0usize;
        let mut k = k;
        while let Some(t) = self.tok(k) {
            match t {
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => {
                    depth -= 1;
                    if depth == 0 {
                        return k + 1;
                    }
                }
                _ => {}
            }
            k += 1;
        }
        k
    }

    /// Expands the `use` tree starting at `k` (just after `use`); returns its leaves and
    /// the index after the closing `;`, or `None` when this is not a `use` item (`use<'a>`).
    fn use_item(&self, k: usize) -> Option<(Vec<Leaf>, usize)> {
        let mut leaves = Vec::new();
        let end = self.use_tree(k, &[], &mut leaves)?;
        self.punct(end, ';').then_some((leaves, end + 1))
    }

    /// Expands the use tree at `k` under `prefix` into `out`; returns the index after it.
    fn use_tree(&self, k: usize, prefix: &[String], out: &mut Vec<Leaf>) -> Option<usize> {
        let mut segs = prefix.to_vec();
        let mut k = k;
        if self.tok(k) == Some(&Tok::PathSep) {
            k += 1;
        }
        loop {
            match self.tok(k)? {
                Tok::Ident(name) => {
                    segs.push(name.clone());
                    let line = self.line(k);
                    k += 1;
                    if self.tok(k) == Some(&Tok::PathSep) {
                        k += 1;
                        continue;
                    }
                    let mut alias = None;
                    if self.ident(k) == Some("as") {
                        alias = self.ident(k + 1).map(str::to_owned);
                        k += 2;
                    }
                    if segs.last().is_some_and(|s| s == "self") {
                        segs.pop();
                    }
                    out.push(Leaf { segs, alias, line });
                    return Some(k);
                }
                Tok::Punct('*') => {
                    segs.push("*".to_owned());
                    out.push(Leaf { segs, alias: None, line: self.line(k) });
                    return Some(k + 1);
                }
                Tok::Punct('{') => {
                    k += 1;
                    loop {
                        if self.punct(k, '}') {
                            return Some(k + 1);
                        }
                        k = self.use_tree(k, &segs, out)?;
                        if self.punct(k, ',') {
                            k += 1;
                        } else if !self.punct(k, '}') {
                            return None;
                        }
                    }
                }
                _ => return None,
            }
        }
    }
}

/// A truth value of a `cfg` predicate, when some options are not known.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Tri {
    True,
    False,
    Unknown,
}

impl Tri {
    /// Negation.
    fn negate(self) -> Tri {
        match self {
            Tri::True => Tri::False,
            Tri::False => Tri::True,
            Tri::Unknown => Tri::Unknown,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Module trees

/// One file module of a crate.
#[derive(Debug)]
struct Module {
    /// Its name (empty for the crate root).
    name: String,
    /// Its path from the crate root.
    path: Vec<String>,
    /// Its file, relative to the workspace root.
    file: PathBuf,
    parent: Option<usize>,
    /// Its file child modules by name.
    children: BTreeMap<String, usize>,
    /// What its file declares and references.
    scan: FileScan,
    /// Names it re-exports from its descendants, and the module each comes from.
    reexports: BTreeMap<String, usize>,
}

/// The module tree of one crate; `modules[0]` is the root.
#[derive(Debug)]
struct CrateTree {
    label: String,
    modules: Vec<Module>,
}

/// Builds the module tree of the crate whose root file is `root_file`, reading files
/// (relative to the workspace root) with `read`; `None` when the root cannot be read.
fn build_tree(
    label: &str,
    root_file: &Path,
    read: &dyn Fn(&Path) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Option<CrateTree> {
    let src = read(root_file)?;
    let mut modules = vec![Module {
        name: String::new(),
        path: Vec::new(),
        file: root_file.to_path_buf(),
        parent: None,
        children: BTreeMap::new(),
        scan: scan(&src),
        reexports: BTreeMap::new(),
    }];
    // Whether a module's children sit next to its file (crate roots, mod.rs, #[path]) or
    // in the directory named after it.
    let mut owns_dir = vec![true];
    let mut seen = BTreeSet::from([root_file.to_path_buf()]);
    let mut m = 0;
    while m < modules.len() {
        let file = modules[m].file.clone();
        let base = file.parent().map(Path::to_path_buf).unwrap_or_default();
        let dir = if owns_dir[m] {
            base.clone()
        } else {
            base.join(file.file_stem().unwrap_or_default())
        };
        for decl in modules[m].scan.mods.clone() {
            let candidates = match &decl.path {
                Some(p) => vec![base.join(p)],
                None => {
                    vec![dir.join(format!("{}.rs", decl.name)), dir.join(&decl.name).join("mod.rs")]
                }
            };
            let Some((path, src)) = candidates.iter().find_map(|p| read(p).map(|s| (p, s))) else {
                warnings.push(format!(
                    "{}:{}: no file for `mod {};`",
                    file.display(),
                    decl.line,
                    decl.name
                ));
                continue;
            };
            if !seen.insert(path.clone()) || modules[m].children.contains_key(&decl.name) {
                continue;
            }
            let scan = scan(&src);
            if scan.test_only {
                continue;
            }
            let mut mod_path = modules[m].path.clone();
            mod_path.push(decl.name.clone());
            let child = modules.len();
            modules[m].children.insert(decl.name.clone(), child);
            owns_dir.push(decl.path.is_some() || path.ends_with("mod.rs"));
            modules.push(Module {
                name: decl.name,
                path: mod_path,
                file: path.clone(),
                parent: Some(m),
                children: BTreeMap::new(),
                scan,
                reexports: BTreeMap::new(),
            });
        }
        m += 1;
    }
    let mut tree = CrateTree { label: label.to_owned(), modules };
    resolve_reexports(&mut tree);
    Some(tree)
}

/// Records, for every module, the names it re-exports from one of its descendants.
fn resolve_reexports(tree: &mut CrateTree) {
    for m in 0..tree.modules.len() {
        let module = &tree.modules[m];
        let mut found = BTreeMap::new();
        for r in &module.scan.reexports {
            let first = r.segs.first().map(String::as_str).unwrap_or_default();
            let relative = !matches!(first, "crate" | "self" | "super");
            if relative && !module.children.contains_key(first) {
                continue; // another crate
            }
            let Some(abs) = absolute(&module.path, &r.segs) else { continue };
            let target = tree.walk(&abs, false);
            if target != m && tree.is_ancestor(m, target) {
                found.entry(r.name.clone()).or_insert(target);
            }
        }
        tree.modules[m].reexports = found;
    }
}

/// The path from the crate root that `segs`, written in the module at `base`, names:
/// `crate::` starts from the root, `super::` and `self::` from `base`, anything else is
/// relative to `base`. `None` when `super` climbs above the root.
fn absolute(base: &[String], segs: &[String]) -> Option<Vec<String>> {
    match segs.first().map(String::as_str) {
        Some("crate") => Some(segs[1..].to_vec()),
        Some("self" | "super") => {
            let mut abs = base.to_vec();
            let mut k = usize::from(segs[0] == "self");
            while segs.get(k).is_some_and(|s| s == "super") {
                abs.pop()?;
                k += 1;
            }
            abs.extend_from_slice(&segs[k..]);
            Some(abs)
        }
        _ => Some([base, segs].concat()),
    }
}

impl CrateTree {
    /// The deepest module that the leading segments of `abs` name; with `reexports`, one
    /// segment may be a name re-exported from a descendant.
    fn walk(&self, abs: &[String], reexports: bool) -> usize {
        let mut m = 0;
        let mut jumped = !reexports;
        for seg in abs {
            let module = &self.modules[m];
            if let Some(&c) = module.children.get(seg) {
                m = c;
            } else if !jumped && let Some(&t) = module.reexports.get(seg) {
                m = t;
                jumped = true;
            } else {
                break;
            }
        }
        m
    }

    /// Whether `a` is `b` or one of its ancestors.
    fn is_ancestor(&self, a: usize, b: usize) -> bool {
        let mut m = Some(b);
        while let Some(x) = m {
            if x == a {
                return true;
            }
            m = self.modules[x].parent;
        }
        false
    }

    /// The modules from the root down to `m`.
    fn chain(&self, m: usize) -> Vec<usize> {
        let mut chain = vec![m];
        while let Some(p) = self.modules[*chain.last().unwrap_or(&0)].parent {
            chain.push(p);
        }
        chain.reverse();
        chain
    }

    /// How a module is shown: the crate label and its path.
    fn display(&self, m: usize) -> String {
        let mut s = self.label.clone();
        for seg in &self.modules[m].path {
            s.push_str("::");
            s.push_str(seg);
        }
        s
    }
}

// ---------------------------------------------------------------------------------------
// Cycles

/// One import cycle among the children of a module.
#[derive(Debug, Clone, PartialEq)]
pub struct Cycle {
    /// The common parent, as `crate::path`.
    pub scope: String,
    /// A closed walk through every module of the cycle: first and last are the same.
    pub walk: Vec<String>,
    /// For each distinct edge of the walk: from, to, an example reference (`file:line
    /// path`) and how many references the edge has.
    pub edges: Vec<(String, String, String, usize)>,
}

impl fmt::Display for Cycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "cycle in {}: {}", self.scope, self.walk.join(" -> "))?;
        for (from, to, example, count) in &self.edges {
            let more = if *count > 1 { format!(" (+{} more)", count - 1) } else { String::new() };
            writeln!(f, "    {from} -> {to}: {example}{more}")?;
        }
        Ok(())
    }
}

/// The references behind one edge of a sibling graph.
#[derive(Debug)]
struct EdgeRefs {
    /// The first one, as `file:line path`.
    example: String,
    count: usize,
}

/// Finds the import cycles of one crate.
fn find_cycles(tree: &CrateTree) -> Vec<Cycle> {
    // Sibling graphs by common parent: (from child, to child) → references.
    let mut graphs: BTreeMap<usize, BTreeMap<(usize, usize), EdgeRefs>> = BTreeMap::new();
    for (f, module) in tree.modules.iter().enumerate() {
        for r in &module.scan.refs {
            let base = [module.path.as_slice(), r.scope.as_slice()].concat();
            let Some(abs) = absolute(&base, &r.segs) else { continue };
            let t = tree.walk(&abs, true);
            if tree.is_ancestor(f, t) || tree.is_ancestor(t, f) {
                continue;
            }
            let (cf, ct) = (tree.chain(f), tree.chain(t));
            let common = cf.iter().zip(&ct).take_while(|(a, b)| a == b).count();
            let edge = graphs.entry(cf[common - 1]).or_default();
            let refs = edge.entry((cf[common], ct[common])).or_insert_with(|| EdgeRefs {
                example: format!("{}:{} {}", module.file.display(), r.line, r.segs.join("::")),
                count: 0,
            });
            refs.count += 1;
        }
    }
    let mut cycles = Vec::new();
    for (parent, edges) in &graphs {
        let mut nodes: Vec<usize> = edges.keys().flat_map(|&(a, b)| [a, b]).collect();
        nodes.sort_by(|&a, &b| tree.modules[a].name.cmp(&tree.modules[b].name));
        nodes.dedup();
        let index: BTreeMap<usize, usize> =
            nodes.iter().enumerate().map(|(i, &n)| (n, i)).collect();
        let mut adj = vec![Vec::new(); nodes.len()];
        for &(a, b) in edges.keys() {
            adj[index[&a]].push(index[&b]);
        }
        for list in &mut adj {
            list.sort_unstable();
        }
        for component in strongly_connected(&adj) {
            if component.len() < 2 {
                continue;
            }
            let walk = closed_walk(&adj, &component);
            let name = |i: usize| tree.modules[nodes[i]].name.clone();
            let mut shown = BTreeSet::new();
            let mut listed = Vec::new();
            for pair in walk.windows(2) {
                if shown.insert((pair[0], pair[1])) {
                    let refs = &edges[&(nodes[pair[0]], nodes[pair[1]])];
                    listed.push((name(pair[0]), name(pair[1]), refs.example.clone(), refs.count));
                }
            }
            cycles.push(Cycle {
                scope: tree.display(*parent),
                walk: walk.iter().map(|&i| name(i)).collect(),
                edges: listed,
            });
        }
    }
    cycles
}

/// The strongly connected components of a graph given by adjacency lists (Tarjan), each
/// sorted, in the order Tarjan completes them.
fn strongly_connected(adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
    /// Tarjan's bookkeeping.
    struct State<'a> {
        adj: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    /// Visits `v` and everything reachable from it.
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &s.adj[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            component.sort_unstable();
            s.out.push(component);
        }
    }
    let n = adj.len();
    let mut s = State {
        adj,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The largest component whose shortest covering walk is searched for exactly (the search
/// visits every subset of the component).
const EXACT_WALK_MAX: usize = 16;

/// A closed walk through every node of a strongly connected `component` (sorted), from and
/// back to its first node, as short as can be: for a simple cycle, that cycle. Small
/// components get a shortest one (breadth-first over node and set of nodes visited), larger
/// ones [`greedy_walk`].
fn closed_walk(adj: &[Vec<usize>], component: &[usize]) -> Vec<usize> {
    let n = component.len();
    if n > EXACT_WALK_MAX {
        return greedy_walk(adj, component);
    }
    let local: BTreeMap<usize, usize> =
        component.iter().enumerate().map(|(i, &v)| (v, i)).collect();
    let full = (1usize << n) - 1;
    let state = |node: usize, mask: usize| node << n | mask;
    // The state each state was first reached from.
    let mut prev: Vec<Option<usize>> = vec![None; n << n];
    let first = state(0, 1);
    let mut queue = VecDeque::from([first]);
    let mut goal = None;
    'search: while let Some(s) = queue.pop_front() {
        let (node, mask) = (s >> n, s & full);
        for &w in &adj[component[node]] {
            let Some(&w) = local.get(&w) else { continue };
            let next = state(w, mask | 1 << w);
            if next == first || prev[next].is_some() {
                continue;
            }
            prev[next] = Some(s);
            if w == 0 && mask | 1 == full {
                goal = Some(next);
                break 'search;
            }
            queue.push_back(next);
        }
    }
    let Some(mut s) = goal else { return greedy_walk(adj, component) };
    let mut walk = vec![component[0]];
    while let Some(p) = prev[s] {
        walk.push(component[p >> n]);
        s = p;
    }
    walk.reverse();
    walk
}

/// A closed walk through every node of a strongly connected `component` (sorted), from its
/// first node: repeatedly the shortest way to the nearest node not yet visited, then the
/// shortest way back.
fn greedy_walk(adj: &[Vec<usize>], component: &[usize]) -> Vec<usize> {
    let inside: BTreeSet<usize> = component.iter().copied().collect();
    let start = component[0];
    let mut walk = vec![start];
    let mut visited = BTreeSet::from([start]);
    loop {
        let here = *walk.last().unwrap_or(&start);
        let done = visited.len() == inside.len();
        let goal = |v: usize| if done { v == start } else { !visited.contains(&v) };
        // Breadth-first from `here`, inside the component.
        let mut from: BTreeMap<usize, usize> = BTreeMap::new();
        let mut queue = VecDeque::from([here]);
        let mut reached = None;
        while let Some(v) = queue.pop_front() {
            for &w in &adj[v] {
                if !inside.contains(&w) || w == here || from.contains_key(&w) {
                    continue;
                }
                from.insert(w, v);
                if goal(w) {
                    reached = Some(w);
                    break;
                }
                queue.push_back(w);
            }
            if reached.is_some() {
                break;
            }
        }
        // Also the goal when `here` is `start` itself and the walk must close on it.
        let reached = match reached {
            Some(r) => r,
            None if done && adj[here].contains(&start) => start,
            None => return walk, // not strongly connected: cannot happen
        };
        let mut path = vec![reached];
        while let Some(&p) = from.get(path.last().unwrap_or(&here)) {
            if p == here {
                break;
            }
            path.push(p);
        }
        path.reverse();
        visited.extend(path.iter().copied());
        walk.extend(path);
        if done {
            return walk;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The crate tree of an in-memory set of files, `src/lib.rs` its root.
    fn tree(files: &[(&str, &str)]) -> CrateTree {
        let files: BTreeMap<PathBuf, String> =
            files.iter().map(|(p, s)| (PathBuf::from(p), (*s).to_owned())).collect();
        let read = |p: &Path| files.get(p).cloned();
        let mut warnings = Vec::new();
        let tree = build_tree("demo", Path::new("src/lib.rs"), &read, &mut warnings);
        assert!(warnings.is_empty(), "{warnings:?}");
        tree.expect("root")
    }

    /// The paths of the references of one file's source, joined with `::`.
    fn refs(src: &str) -> Vec<String> {
        scan(src).refs.iter().map(|r| r.segs.join("::")).collect()
    }

    /// The cycles of a tree, as `scope: walk` lines.
    fn cycles(files: &[(&str, &str)]) -> Vec<String> {
        find_cycles(&tree(files))
            .iter()
            .map(|c| format!("{}: {}", c.scope, c.walk.join(" -> ")))
            .collect()
    }

    /// Nested braces, `self` leaves, aliases and globs.
    #[test]
    fn use_trees_expand_braces() {
        let src = "use crate::a::{b::X, c::{Y, Z as W}, self};\nuse super::super::d::*;";
        assert_eq!(
            refs(src),
            [
                "crate::a::b::X",
                "crate::a::c::Y",
                "crate::a::c::Z",
                "crate::a",
                "super::super::d::*"
            ]
        );
        let toks = lex("use crate::{x, y::{self as z}};");
        let s =
            Scanner { toks: &toks, i: 0, depth: 0, inline: Vec::new(), out: FileScan::default() };
        let (leaves, _) = s.use_item(1).expect("a use item");
        assert_eq!(leaves[1].segs, ["crate", "y"]);
        assert_eq!(leaves[1].alias.as_deref(), Some("z"));
    }

    /// Comments, doc comments, strings, raw strings and character literals hide nothing
    /// that counts; visibilities are not paths.
    #[test]
    fn paths_in_code_are_found_but_not_in_comments_or_strings() {
        let src = r##"
            //! crate::inner_doc::A
            /// crate::outer_doc::B
            // crate::line::C
            /* crate::block /* nested crate::x */ crate::still::D */
            const S: &str = "crate::string::E";
            const R: &str = r#"crate::raw::"F""#;
            const Q: char = '{';
            fn f<'a>(x: &'a u8) -> crate::real::G { super::other::h(b'}', x) }
            pub(crate) fn g() {}
            pub(super) fn h() {}
        "##;
        assert_eq!(refs(src), ["crate::real::G", "super::other::h"]);
        let lines: Vec<usize> = scan(src).refs.iter().map(|r| r.line).collect();
        assert_eq!(lines, [9, 9]);
    }

    /// `cfg(test)` declarations, items and fields, and `mod tests` blocks, are left out;
    /// other inline modules are scopes for `super::`.
    #[test]
    fn test_only_code_is_skipped() {
        let src = "
            #[cfg(test)]
            mod unit;
            #[cfg(all(test, unix))]
            #[path = \"x.rs\"]
            mod unit2;
            #[cfg(any(test, feature = \"bench\"))]
            mod kept;
            #[cfg(not(test))]
            mod kept2;
            mod tests { use crate::a::X; }
            #[cfg(test)]
            mod model_tests { use crate::b::X; }
            #[cfg(test)]
            use crate::c::X;
            struct S { #[cfg(test)] f: crate::d::X, g: crate::e::X }
            mod inline { use super::f::X; }
        ";
        let s = scan(src);
        let mods: Vec<&str> = s.mods.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(mods, ["kept", "kept2"]);
        assert_eq!(refs(src), ["crate::e::X", "super::f::X"]);
        assert_eq!(s.refs[1].scope, ["inline"]);
        assert!(scan("#![cfg(test)]\nuse crate::a;").test_only);
        assert!(!scan("#![cfg(unix)]\nuse crate::a;").test_only);
    }

    /// `NAME.rs`, `NAME/mod.rs`, the directory of a non-mod.rs file, and `#[path]`.
    #[test]
    fn module_files_are_found() {
        let t = tree(&[
            ("src/lib.rs", "mod a; mod b; #[path = \"elsewhere/c.rs\"] mod c;"),
            ("src/a.rs", "mod inner;"),
            ("src/a/inner.rs", ""),
            ("src/b/mod.rs", "pub mod deep;"),
            ("src/b/deep.rs", ""),
            ("src/elsewhere/c.rs", "mod d;"),
            ("src/elsewhere/d.rs", ""),
        ]);
        let files: Vec<String> = t.modules.iter().map(|m| m.file.display().to_string()).collect();
        assert_eq!(
            files,
            [
                "src/lib.rs",
                "src/a.rs",
                "src/b/mod.rs",
                "src/elsewhere/c.rs",
                "src/a/inner.rs",
                "src/b/deep.rs",
                "src/elsewhere/d.rs"
            ]
        );
        assert_eq!(t.display(6), "demo::c::d");
    }

    /// Each `super` climbs one module; a path resolves to the deepest module it names.
    #[test]
    fn super_counts_and_resolves_to_the_deepest_module() {
        let t = tree(&[
            ("src/lib.rs", "mod a; mod d;"),
            ("src/a/mod.rs", "mod b;"),
            ("src/a/b/mod.rs", "mod c;"),
            ("src/a/b/c.rs", ""),
            ("src/d.rs", ""),
        ]);
        let c = t.modules.iter().position(|m| m.name == "c").expect("c");
        let segs = |s: &str| s.split("::").map(str::to_owned).collect::<Vec<_>>();
        let abs = absolute(&t.modules[c].path, &segs("super::super::Item")).expect("abs");
        assert_eq!(abs, ["a", "Item"]);
        assert_eq!(t.display(t.walk(&abs, true)), "demo::a");
        let abs = absolute(&t.modules[c].path, &segs("super::super::super::d::f::g")).expect("abs");
        assert_eq!(t.display(t.walk(&abs, true)), "demo::d");
        assert_eq!(absolute(&[], &segs("super::x")), None);
    }

    /// `pub use` of a descendant (relative, `self::`, `crate::`, aliased) is looked through,
    /// one level; re-exports from elsewhere are not.
    #[test]
    fn reexports_of_descendants_resolve_to_them() {
        let t = tree(&[
            ("src/lib.rs", "pub mod session; pub use session::open::Open as Opened;"),
            (
                "src/session/mod.rs",
                "mod open; mod remote; mod util;\n\
                 pub use open::Open;\npub(crate) use self::remote::{Remote, self as far};\n\
                 pub use crate::session::util::Helper;\npub use other_crate::Thing;\n\
                 pub use super::elsewhere::X;",
            ),
            ("src/session/open.rs", ""),
            ("src/session/remote.rs", ""),
            ("src/session/util/mod.rs", ""),
        ]);
        let reexports = |m: usize| -> Vec<(String, String)> {
            t.modules[m].reexports.iter().map(|(n, &t2)| (n.clone(), t.display(t2))).collect()
        };
        let session = t.modules[0].children["session"];
        let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        assert_eq!(
            reexports(session),
            [
                pair("Helper", "demo::session::util"),
                pair("Open", "demo::session::open"),
                pair("Remote", "demo::session::remote"),
                pair("far", "demo::session::remote"),
            ]
        );
        assert_eq!(reexports(0), [pair("Opened", "demo::session::open")]);
        let segs = |s: &str| s.split("::").map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(t.display(t.walk(&segs("session::Open::new"), true)), "demo::session::open");
        assert_eq!(t.display(t.walk(&segs("Opened"), true)), "demo::session::open");
        // One level only, and not when resolving a re-export itself.
        assert_eq!(t.display(t.walk(&segs("session::Open"), false)), "demo::session");
    }

    /// Edges between the children of the lowest common ancestor; none between a module and
    /// its ancestors or descendants.
    #[test]
    fn cycle_rule() {
        // Parent and children may use each other; so may a module and its descendants.
        assert!(
            cycles(&[
                ("src/lib.rs", "mod a; use crate::a::b::X;"),
                ("src/a/mod.rs", "mod b; use self::b::X; fn f() { super::g() }"),
                ("src/a/b.rs", "use super::Y; use crate::Z;"),
            ])
            .is_empty()
        );
        // Deep references become edges between the children of the common ancestor.
        let found = find_cycles(&tree(&[
            ("src/lib.rs", "mod a; mod b; mod c;"),
            ("src/a/mod.rs", "mod x;"),
            ("src/a/x.rs", "\nfn f() -> crate::b::y::T { make() }"),
            ("src/b/mod.rs", "pub mod y; pub use y::T;"),
            ("src/b/y.rs", "use crate::c::U;"),
            ("src/c.rs", "use crate::a::Z; use super::a::W;"),
        ]));
        assert_eq!(found.len(), 1);
        let c = &found[0];
        assert_eq!(c.scope, "demo");
        assert_eq!(c.walk, ["a", "b", "c", "a"]);
        assert_eq!(c.edges[0], ("a".into(), "b".into(), "src/a/x.rs:2 crate::b::y::T".into(), 1));
        assert_eq!(c.edges[2], ("c".into(), "a".into(), "src/c.rs:1 crate::a::Z".into(), 2));
        // Through a re-export, and inside a nested scope.
        assert_eq!(
            cycles(&[
                ("src/lib.rs", "mod s;"),
                ("src/s/mod.rs", "mod open; mod remote; mod demo; pub use open::Open;"),
                ("src/s/open.rs", "use super::remote::R;"),
                ("src/s/remote.rs", "use crate::s::Open;"),
                ("src/s/demo.rs", "use super::Open;"),
            ]),
            ["demo::s: open -> remote -> open"]
        );
    }

    /// Tarjan's components, and the walk shown for each.
    #[test]
    fn closed_walk_covers_the_component() {
        // 0 → 1 → 0, 0 → 2 → 0: no simple cycle through all three.
        let adj = vec![vec![1, 2], vec![0], vec![0]];
        let components = strongly_connected(&adj);
        assert_eq!(components, [vec![0, 1, 2]]);
        assert_eq!(closed_walk(&adj, &components[0]), [0, 1, 0, 2, 0]);
        assert_eq!(greedy_walk(&adj, &components[0]), [0, 1, 0, 2, 0]);
        let adj = vec![vec![1], vec![2], vec![0], vec![]];
        let mut components = strongly_connected(&adj);
        components.sort();
        assert_eq!(components, [vec![0, 1, 2], vec![3]]);
        assert_eq!(closed_walk(&adj, &components[0]), [0, 1, 2, 0]);
        // Greedy, the walk goes 0 → 1 → 0 → 2 → 3 → 1 → 0; the shortest is one edge less.
        let adj = vec![vec![1, 2], vec![0], vec![3], vec![1]];
        let component = [0, 1, 2, 3];
        assert_eq!(greedy_walk(&adj, &component), [0, 1, 0, 2, 3, 1, 0]);
        assert_eq!(closed_walk(&adj, &component), [0, 2, 3, 1, 0]);
        // Only the nodes of the component count.
        let adj = vec![vec![], vec![2, 0], vec![1]];
        assert_eq!(closed_walk(&adj, &[1, 2]), [1, 2, 1]);
    }

    /// Workspace members and package names from Cargo.toml text.
    #[test]
    fn manifests() {
        let root = "[workspace]\nresolver = \"3\"\nmembers = [\n  \"a\", # one\n  \"b\",\n]\n\
                    default-members = [\"a\"]\n[workspace.package]\nname = \"no\"";
        assert_eq!(workspace_members(root), ["a", "b"]);
        assert_eq!(workspace_members("[workspace]\nmembers = [\"x\", \"y\"]"), ["x", "y"]);
        let member = "[package]\nname = \"braid-x\"\n[dependencies]\nname = \"no\"";
        assert_eq!(package_name(member).as_deref(), Some("braid-x"));
    }
}

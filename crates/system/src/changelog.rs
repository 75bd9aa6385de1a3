//! `GET /api/changelog`: bundle entries `<bundle>/changelog/<version>.md` (base
//! language) and `<bundle>/changelog/<locale>/<version>.md`, newer than `since`.

use std::path::{Path, PathBuf};

use companiond_core::paths::safe_join;
use serde::Serialize;

/// The server's own version.
pub const APP_VERSION: &str = env!("CARGO_PKG_VERSION");
/// Largest entry read.
const MAX_ENTRY: u64 = 1024 * 1024;
/// Most entries returned.
const MAX_ENTRIES: usize = 200;

/// A version string as a tuple of integers; `None` when it does not parse.
pub fn parse_version(s: &str) -> Option<Vec<u64>> {
    let s = s.trim().trim_start_matches(['v', 'V']);
    if s.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for part in s.split('.') {
        if part.is_empty() || part.len() > 9 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        out.push(part.parse().ok()?);
    }
    while out.len() > 1 && out.last() == Some(&0) {
        out.pop();
    }
    Some(out)
}

/// A validated locale tag (`^[A-Za-z]{2,8}(-[A-Za-z0-9]{2,8})*$`), else "".
pub fn sanitize_lang(lang: &str) -> String {
    let lang = lang.trim().replace('_', "-");
    let mut parts = lang.split('-');
    let ok_first = parts
        .next()
        .is_some_and(|p| (2..=8).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_alphabetic()));
    let ok_rest =
        parts.all(|p| (2..=8).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_alphanumeric()));
    if ok_first && ok_rest && lang.len() <= 35 {
        lang
    } else {
        String::new()
    }
}

/// Locale folders to try, in order: the exact tag, its language, `en` (non-Chinese
/// only); the base folder is always tried last by the caller.
pub fn locale_chain(lang: &str) -> Vec<String> {
    let lang = sanitize_lang(lang);
    let mut out = Vec::new();
    if lang.is_empty() {
        return out;
    }
    out.push(lang.clone());
    if let Some((primary, _)) = lang.split_once('-') {
        out.push(primary.to_string());
    }
    if !lang.to_ascii_lowercase().starts_with("zh") {
        out.push("en".into());
    }
    out.dedup();
    out
}

/// Resolve `<root>/<locale>/<file>` along the chain, then `<root>/<file>`.
pub fn localized_file(root: &Path, lang: &str, file: &str) -> Option<PathBuf> {
    for loc in locale_chain(lang) {
        if let Ok(p) = safe_join(root, &format!("{loc}/{file}")) {
            if p.is_file() {
                return Some(p);
            }
        }
    }
    safe_join(root, file).ok().filter(|p| p.is_file())
}

fn read_small(p: &Path) -> Option<String> {
    let meta = std::fs::metadata(p).ok()?;
    if meta.len() > MAX_ENTRY {
        return None;
    }
    std::fs::read_to_string(p).ok()
}

/// One changelog entry.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = ChangelogEntry)]
pub struct Entry {
    pub version: String,
    /// The Markdown text.
    pub content: String,
}

/// The entries newer than `since`, oldest first, at most [`MAX_ENTRIES`], in the
/// best language of `lang`'s chain (blocking).
pub fn changelog(bundle: &Path, since: &str, lang: &str) -> Vec<Entry> {
    let root = bundle.join("changelog");
    let since = parse_version(since).unwrap_or_else(|| vec![0]);
    let mut versions: Vec<(Vec<u64>, String)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    // Versions come from the base folder and from every locale folder of the chain.
    let mut dirs = vec![root.clone()];
    for loc in locale_chain(lang) {
        if let Ok(p) = safe_join(&root, &loc) {
            dirs.push(p);
        }
    }
    for dir in dirs {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".md") else {
                continue;
            };
            let Some(v) = parse_version(stem) else {
                continue;
            };
            if v > since && seen.insert(stem.to_string()) {
                versions.push((v, stem.to_string()));
            }
        }
    }
    versions.sort();
    versions
        .into_iter()
        .filter_map(|(_, stem)| {
            let p = localized_file(&root, lang, &format!("{stem}.md"))?;
            let content = read_small(&p)?;
            Some(Entry {
                version: stem,
                content,
            })
        })
        .take(MAX_ENTRIES)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_langs() {
        assert_eq!(parse_version("0.8.2"), Some(vec![0, 8, 2]));
        assert_eq!(parse_version("1.0"), Some(vec![1]));
        assert_eq!(parse_version("x"), None);
        assert_eq!(parse_version("1..2"), None);
        assert!(parse_version("0.8.10") > parse_version("0.8.9"));
        assert_eq!(sanitize_lang("en-US"), "en-US");
        assert_eq!(sanitize_lang("zh_CN"), "zh-CN");
        assert_eq!(sanitize_lang("../etc"), "");
        assert_eq!(sanitize_lang("e"), "");
        assert_eq!(locale_chain("ja-JP"), vec!["ja-JP", "ja", "en"]);
        assert_eq!(locale_chain("zh-TW"), vec!["zh-TW", "zh"]);
        assert!(locale_chain("").is_empty());
    }
}

//! Docs that cannot drift: every repository path, file name, Markdown
//! document and route that the README, `docs/` or a code comment names must
//! exist — and no document outside the repository may be cited (a reader of
//! this repository has only this repository).
//! Example shapes it checks: a source path, a document name, a route in backticks.

use std::collections::BTreeSet;
use std::path::PathBuf;

use companiond_core::testkit::TestServer;
use regex::Regex;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file and folder of the repository (relative), build output and git aside.
fn tree() -> (BTreeSet<String>, BTreeSet<String>) {
    let root = root();
    let mut paths = BTreeSet::new();
    let mut names = BTreeSet::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name == ".git" || name == "target" || name == "__pycache__" {
                continue;
            }
            let p = e.path();
            let rel = p
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            paths.insert(rel);
            if p.is_dir() {
                stack.push(p);
            } else {
                names.insert(name);
            }
        }
    }
    (paths, names)
}

/// The texts to check: Markdown documents whole, Rust sources' comments.
fn texts(paths: &BTreeSet<String>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in paths {
        let md = p == "README.md" || (p.starts_with("docs/") && p.ends_with(".md"));
        let rs = p.ends_with(".rs")
            && (p.starts_with("crates/")
                || p.starts_with("src/")
                || p.starts_with("tests/")
                || p.starts_with("benches/"));
        if !(md || rs) {
            continue;
        }
        let Ok(t) = std::fs::read_to_string(root().join(p)) else {
            continue;
        };
        // Code lines blanked: line numbers stay the file's.
        let t = if rs {
            t.lines()
                .map(|l| {
                    if l.trim_start().starts_with("//") {
                        l
                    } else {
                        ""
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
        } else {
            t
        };
        out.push((p.clone(), t));
    }
    out
}

#[test]
fn named_paths_files_and_documents_exist() {
    let (paths, names) = tree();
    let crates: Vec<&String> = paths
        .iter()
        .filter(|p| p.starts_with("crates/") && p.matches('/').count() == 1)
        .collect();
    // A path from the top (`crates/core/src/store.rs`, `tests/browser/run`); a
    // family document may name a path inside its crate (`src/lib.rs`).
    let path_re = Regex::new(
        r"(?:^|[^\w/.])((?:crates|src|tests|benches|docs|assets|\.ci)/[A-Za-z0-9_./-]*[A-Za-z0-9_])",
    )
    .unwrap();
    let md_re = Regex::new(r"(?:^|[^\w/-])([A-Za-z0-9_-]+\.md)\b").unwrap();
    let rs_re = Regex::new(r"(?:^|[^\w/-])([a-z0-9_]+\.rs)\b").unwrap();
    let exists =
        |p: &str| paths.contains(p) || crates.iter().any(|c| paths.contains(&format!("{c}/{p}")));
    let mut bad = Vec::new();
    for (file, text) in texts(&paths) {
        for (n, line) in text.lines().enumerate() {
            for c in path_re.captures_iter(line) {
                let p = &c[1];
                let in_archive = line.contains("the archive's `");
                if !exists(p) && !in_archive {
                    bad.push(format!("{file}:{}: path {p}", n + 1));
                }
            }
            for c in md_re.captures_iter(line) {
                if !names.contains(&c[1]) {
                    bad.push(format!(
                        "{file}:{}: document {} (not in this repository)",
                        n + 1,
                        &c[1]
                    ));
                }
            }
            for c in rs_re.captures_iter(line) {
                if !names.contains(&c[1]) {
                    bad.push(format!("{file}:{}: source file {}", n + 1, &c[1]));
                }
            }
            // The contract's check program is run by CI; its documents are not
            // this repository's and are never cited.
            if line.contains("../shared/spec") || line.contains("../shared/reference") {
                bad.push(format!(
                    "{file}:{}: a document outside the repository",
                    n + 1
                ));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "names that do not exist:\n{}",
        bad.join("\n")
    );
}

/// Does the documented route `doc` (a template, a concrete path or a prefix
/// ending in `*`) match the served template `route`?
fn matches(doc: &str, route: &str) -> bool {
    let d: Vec<&str> = doc.trim_end_matches('/').split('/').collect();
    let r: Vec<&str> = route.trim_end_matches('/').split('/').collect();
    for (i, ds) in d.iter().enumerate() {
        if *ds == "*" {
            return true;
        }
        if let Some(stem) = ds.strip_suffix('*') {
            // `/api/characters/catgirl*`: this segment's prefix.
            return r.get(i).is_some_and(|rs| rs.starts_with(stem));
        }
        let Some(rs) = r.get(i) else { return false };
        if rs.starts_with("{*") {
            return true;
        }
        let placeholder = |s: &str| s.starts_with('{') || s.starts_with('<') || s.starts_with(':');
        if !(placeholder(ds) || placeholder(rs) || ds == rs) {
            return false;
        }
    }
    d.len() == r.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_routes_are_served() {
    let s = TestServer::start(companiond::FAMILIES).await;
    let (_, doc) = s.get("/openapi.json").await;
    let routes: Vec<String> = doc["paths"]
        .as_object()
        .expect("paths")
        .keys()
        .cloned()
        .collect();
    let (paths, _) = tree();
    // A route in backticks, with or without its method (`POST /api/...`).
    let route_re =
        Regex::new(r"`(?:(?:GET|POST|PUT|DELETE|PATCH) )?(/(?:api|ws)/[^`\s?#]*)").unwrap();
    let mut bad = Vec::new();
    for (file, text) in texts(&paths) {
        for (n, line) in text.lines().enumerate() {
            for c in route_re.captures_iter(line) {
                let r = c[1]
                    .split(|ch: char| !(ch.is_ascii_alphanumeric() || "_/{}.*:<>-".contains(ch)))
                    .next()
                    .unwrap_or("")
                    .trim_end_matches(['.', ':']);
                // A family's prefix (`/api/memory`, `/api/game/`) names its routes.
                let prefix = format!("{}/", r.trim_end_matches('/'));
                let named = routes
                    .iter()
                    .any(|t| matches(r, t) || t.starts_with(&prefix));
                if !named {
                    bad.push(format!("{file}:{}: route {r}", n + 1));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "routes no family serves:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_matcher_reads_templates_examples_and_prefixes() {
    assert!(matches(
        "/api/characters/profile/Mika",
        "/api/characters/profile/{name}"
    ));
    assert!(matches("/api/config/*", "/api/config/core_api"));
    assert!(matches(
        "/api/characters/catgirl*",
        "/api/characters/catgirl/{name}"
    ));
    assert!(matches("/ws/{name}", "/ws/{persona_name}"));
    assert!(!matches("/api/jukebox/nothing", "/api/jukebox/songs"));
    assert!(!matches("/api/characters", "/api/characters/current"));
}

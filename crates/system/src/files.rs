//! `file-exists`, `find-first-image` and `platform/proxy-image`: request paths are
//! resolved through `companiond_core::paths` against a fixed set of approved roots.
//!
//! Approved roots (each addressable by an absolute path inside it, or by
//! `<root name>/<relative path>`):
//! `static` = `<bundle>/static`; `user_mmd`, `user_pngtuber`, `user_live2d`, `user_vrm` =
//! the data-dir user folders; `workshop` = the workshop dir (relative paths that name no
//! root are taken relative to it).

use std::io::Read;
use std::path::{Path, PathBuf};

use companiond_core::paths::{clean_segments, safe_existing, safe_join, PathError};

use crate::error::{SysResult, SystemError};

/// Preview candidates, in order.
pub const PREVIEW_NAMES: [&str; 8] = [
    "preview.jpg",
    "preview.png",
    "thumbnail.jpg",
    "thumbnail.png",
    "icon.jpg",
    "icon.png",
    "header.jpg",
    "header.png",
];
/// Previews must be strictly smaller than this.
pub const PREVIEW_MAX: u64 = 1024 * 1024;
/// Largest image served by proxy-image.
pub const PROXY_MAX: u64 = 50 * 1024 * 1024;
/// Image extensions served by proxy-image.
pub const IMAGE_EXTS: [&str; 6] = ["jpg", "jpeg", "png", "gif", "bmp", "webp"];

/// Data-dir user folders that are approved roots.
pub const USER_ROOTS: [&str; 4] = ["user_mmd", "user_pngtuber", "user_live2d", "user_vrm"];

/// One approved root.
#[derive(Clone, Debug)]
pub struct Root {
    pub name: &'static str,
    pub dir: PathBuf,
    /// URL prefix when the root is served as static files.
    pub url: Option<&'static str>,
}

/// The approved roots.
#[derive(Clone, Debug)]
pub struct Roots(pub Vec<Root>);

impl Roots {
    pub fn new(bundle: &Path, data: &Path, workshop: Option<&Path>) -> Roots {
        let mut v = vec![Root {
            name: "static",
            dir: bundle.join("static"),
            url: Some("/static/"),
        }];
        for name in USER_ROOTS {
            v.push(Root {
                name,
                dir: data.join(name),
                url: match name {
                    "user_mmd" => Some("/user_mmd/"),
                    "user_pngtuber" => Some("/user_pngtuber/"),
                    _ => None,
                },
            });
        }
        if let Some(w) = workshop {
            v.push(Root {
                name: "workshop",
                dir: w.to_path_buf(),
                url: None,
            });
        }
        Roots(v)
    }

    fn get(&self, name: &str) -> Option<&Root> {
        self.0.iter().find(|r| r.name == name)
    }
}

/// A path resolved inside an approved root.
#[derive(Clone, Debug)]
pub struct Located {
    pub root: Root,
    /// Path relative to the root, `/`-separated.
    pub rel: String,
    /// Canonical absolute path (exists).
    pub path: PathBuf,
}

impl Located {
    /// `<root name>/<rel>` (workshop: the absolute path).
    pub fn display_path(&self) -> String {
        if self.root.name == "workshop" {
            self.path.to_string_lossy().into_owned()
        } else if self.rel.is_empty() {
            self.root.name.to_string()
        } else {
            format!("{}/{}", self.root.name, self.rel)
        }
    }
    /// A URL the frontend can load.
    pub fn url(&self) -> String {
        match self.root.url {
            Some(prefix) => format!("{prefix}{}", encode_path(&self.rel)),
            None => format!(
                "/api/platform/proxy-image?image_path={}",
                url::form_urlencoded::byte_serialize(self.display_path().as_bytes())
                    .collect::<String>()
            ),
        }
    }
}

fn encode_path(rel: &str) -> String {
    rel.split('/')
        .map(|s| {
            url::form_urlencoded::byte_serialize(s.as_bytes())
                .collect::<String>()
                .replace('+', "%20")
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn path_error(e: PathError) -> SystemError {
    match e {
        PathError::Traversal => SystemError::PathTraversal("path traversal is not allowed".into()),
        PathError::Escapes => SystemError::ForbiddenPath("path leaves the approved folders".into()),
        PathError::Empty => SystemError::MissingPath("the path is required".into()),
        other => SystemError::InvalidPath(other.to_string()),
    }
}

/// Does the raw path carry a traversal component (`..`, also percent-encoded)?
pub fn has_traversal(raw: &str) -> bool {
    let trimmed = raw.trim_start_matches(['/', '\\']);
    matches!(clean_segments(trimmed), Err(PathError::Traversal))
}

/// `GET /api/file-exists`: is `raw` an existing regular file? Absolute paths are allowed
/// anywhere; relative paths are taken relative to the bundle dir.
pub fn file_exists(raw: &str, bundle: &Path) -> SysResult<bool> {
    if raw.trim().is_empty() {
        return Err(SystemError::MissingPath("query path is required".into()));
    }
    let joined = if let Some(rest) = raw.strip_prefix('/') {
        if rest.trim_matches('/').is_empty() {
            return Ok(false);
        }
        safe_join(Path::new("/"), rest)
    } else {
        safe_join(bundle, raw)
    };
    match joined {
        Ok(p) => Ok(std::fs::metadata(p).is_ok_and(|m| m.is_file())),
        Err(PathError::Escapes) => Ok(false),
        Err(PathError::Traversal) => Err(SystemError::TraversalInQuery(
            "path traversal components are not allowed".into(),
        )),
        Err(e) => Err(SystemError::InvalidPath(e.to_string())),
    }
}

/// Resolve a request path to an existing entry inside an approved root.
/// Errors: 403 for traversal or anything outside the roots, 404 for a missing entry inside one.
pub fn locate(roots: &Roots, raw: &str) -> SysResult<Located> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(SystemError::MissingPath("the path is required".into()));
    }
    if has_traversal(raw) && !raw.replace('\\', "/").starts_with("../static/") {
        return Err(path_error(PathError::Traversal));
    }
    let norm = raw.replace('\\', "/");
    if norm.contains("//") {
        return Err(path_error(PathError::Traversal));
    }
    if Path::new(raw).is_absolute() {
        // An absolute path: it must lie inside a root (canonical containment).
        let cleaned = clean_segments(norm.trim_start_matches('/')).map_err(path_error)?;
        let abs = PathBuf::from("/").join(cleaned.join("/"));
        match abs.canonicalize() {
            Ok(canon) => {
                for root in &roots.0 {
                    let Ok(croot) = root.dir.canonicalize() else {
                        continue;
                    };
                    if let Ok(rel) = canon.strip_prefix(&croot) {
                        let rel = rel.to_string_lossy().replace('\\', "/");
                        return finish(root, &rel);
                    }
                }
            }
            Err(_) => {
                if roots.0.iter().any(|r| abs.starts_with(&r.dir)) {
                    return Err(SystemError::NotFound("file not found".into()));
                }
            }
        }
        // A URL-style path (`/static/...`, `/user_mmd/...`).
        if let Some((first, _)) = norm.trim_start_matches('/').split_once('/') {
            if roots.get(first).is_some() {
                return locate(roots, norm.trim_start_matches('/'));
            }
        }
        return Err(SystemError::ForbiddenPath(
            "path is outside the approved folders".into(),
        ));
    }
    let rel = norm.strip_prefix("../").unwrap_or(&norm);
    let (first, rest) = rel.split_once('/').unwrap_or((rel, ""));
    if let Some(root) = roots.get(first) {
        return finish(root, rest);
    }
    match roots.get("workshop") {
        Some(w) => finish(w, rel),
        None => Err(SystemError::ForbiddenPath(
            "path is outside the approved folders".into(),
        )),
    }
}

fn finish(root: &Root, rel: &str) -> SysResult<Located> {
    let segs = clean_segments(rel).map_err(path_error)?;
    let rel = segs.join("/");
    let path = if rel.is_empty() {
        root.dir.canonicalize()
    } else {
        match safe_existing(&root.dir, &rel) {
            Ok(p) => Ok(p),
            Err(PathError::Io(_)) => return Err(SystemError::NotFound("file not found".into())),
            Err(e) => return Err(path_error(e)),
        }
    }
    .map_err(|_| SystemError::NotFound("file not found".into()))?;
    Ok(Located {
        root: root.clone(),
        rel,
        path,
    })
}

/// `GET /api/find-first-image`: the first preview candidate under 1 MiB in `folder`.
/// `Ok(None)` when the folder holds none.
pub fn find_first_image(roots: &Roots, folder: &str) -> SysResult<Option<Located>> {
    let dir = locate(roots, folder)?;
    if !dir.path.is_dir() {
        return Err(SystemError::NotAFolder("folder is not a directory".into()));
    }
    for name in PREVIEW_NAMES {
        let rel = if dir.rel.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", dir.rel)
        };
        let Ok(p) = safe_existing(&dir.root.dir, &rel) else {
            continue;
        };
        if std::fs::metadata(&p).is_ok_and(|m| m.is_file() && m.len() < PREVIEW_MAX) {
            return Ok(Some(Located {
                root: dir.root.clone(),
                rel,
                path: p,
            }));
        }
    }
    Ok(None)
}

/// Sniff the image type from the first bytes.
pub fn sniff(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.starts_with(b"BM") {
        Some("image/bmp")
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// A local image ready to serve.
#[derive(Debug)]
pub struct LocalImage {
    pub path: PathBuf,
    pub content_type: &'static str,
    pub len: u64,
}

/// `GET /api/platform/proxy-image`: an approved local or workshop image (blocking).
pub fn proxy_image(roots: &Roots, raw: &str) -> SysResult<LocalImage> {
    // `%XX` escapes decoded once; a `+` stays a plus.
    let decoded = companiond_core::paths::percent_decode_once(raw);
    let lower = decoded.trim().to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Err(SystemError::RemoteUrlUnsupported(
            "remote image URLs are not supported".into(),
        ));
    }
    let loc = locate(roots, &decoded)?;
    let ext = loc
        .path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    if !IMAGE_EXTS.contains(&ext.as_str()) {
        return Err(SystemError::NotAnImage("not a valid image file".into()));
    }
    let meta =
        std::fs::metadata(&loc.path).map_err(|_| SystemError::NotFound("file not found".into()))?;
    if !meta.is_file() {
        return Err(SystemError::NotFound("file not found".into()));
    }
    if meta.len() > PROXY_MAX {
        return Err(SystemError::TooLarge("image is larger than 50 MiB".into()));
    }
    let mut head = [0u8; 16];
    let n = std::fs::File::open(&loc.path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|_| SystemError::NotFound("file not readable".into()))?;
    let Some(content_type) = sniff(&head[..n]) else {
        return Err(SystemError::NotAnImage(
            "file content is not a supported image".into(),
        ));
    };
    Ok(LocalImage {
        path: loc.path,
        content_type,
        len: meta.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traversal_detection() {
        assert!(has_traversal("../x"));
        assert!(has_traversal("/a/../b"));
        assert!(has_traversal("a/%2e%2e/b"));
        assert!(!has_traversal("/a/b..c"));
        assert!(!has_traversal("static/x"));
    }

    #[test]
    fn sniffing() {
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\nxxxx"), Some("image/png"));
        assert_eq!(sniff(&[0xFF, 0xD8, 0xFF, 0xE0]), Some("image/jpeg"));
        assert_eq!(sniff(b"<svg"), None);
    }
}

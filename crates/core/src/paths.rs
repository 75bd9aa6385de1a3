//! The one safe join for request-supplied paths.
//!
//! [`safe_join`] takes a root and a relative path that came from a request and
//! returns an absolute path that is guaranteed to stay under the root, or an
//! error. It refuses `..` (also percent-encoded), absolute paths, drive and UNC
//! prefixes, NUL and other control characters, and symlinks that leave the root:
//! the deepest existing ancestor of the result is canonicalised and compared with
//! the canonical root component by component. Every family uses it.

use std::path::{Component, Path, PathBuf};

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathError {
    Empty,
    Absolute,
    Traversal,
    InvalidChar,
    /// The path resolves (through a symlink) outside the root.
    Escapes,
    Io(String),
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PathError::Empty => "empty path",
            PathError::Absolute => "absolute paths are not allowed",
            PathError::Traversal => "path traversal is not allowed",
            PathError::InvalidChar => "path contains an invalid character",
            PathError::Escapes => "path leaves its root",
            PathError::Io(e) => e,
        })
    }
}

impl std::error::Error for PathError {}

/// Split a request path into its plain segments (`/` and `\` both separate),
/// refusing anything that is not a plain name. Empty segments and `.` are dropped.
pub fn clean_segments(rel: &str) -> Result<Vec<String>, PathError> {
    if rel.chars().any(|c| c == '\0' || c.is_control()) {
        return Err(PathError::InvalidChar);
    }
    if rel.starts_with('/') || rel.starts_with('\\') {
        return Err(PathError::Absolute);
    }
    // Drive prefixes (C:, C:\) and any colon-qualified name (alternate streams).
    let b = rel.as_bytes();
    if b.len() >= 2 && b[1] == b':' && b[0].is_ascii_alphabetic() {
        return Err(PathError::Absolute);
    }
    let mut out = Vec::new();
    for seg in rel.split(['/', '\\']) {
        if seg.is_empty() || seg == "." {
            continue;
        }
        let decoded = percent_decode(seg);
        let trimmed = decoded.trim_end_matches(['.', ' ']);
        // "..", "...", ". ." and the like (Windows strips trailing dots and spaces).
        if trimmed.is_empty() {
            return Err(PathError::Traversal);
        }
        if decoded.contains('/') || decoded.contains('\\') || decoded.contains('\0') {
            return Err(PathError::Traversal);
        }
        if seg.contains(':') {
            return Err(PathError::InvalidChar);
        }
        out.push(seg.to_string());
    }
    Ok(out)
}

fn percent_decode(s: &str) -> String {
    // Decode repeatedly so that double encodings (%252e) are seen too.
    let mut cur = s.to_string();
    for _ in 0..3 {
        let next = percent_decode_once(&cur);
        if next == cur {
            break;
        }
        cur = next;
    }
    cur
}

/// Decode the `%XX` escapes of `s` once (invalid escapes stay as they are;
/// bytes that are not UTF-8 become U+FFFD).
pub fn percent_decode_once(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// Escape every byte of `s` but ASCII letters and digits as `%XX`: a name
/// carried in one segment of a URI, read back by [`percent_decode_once`].
pub fn percent_encode_segment(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Join `rel` (from a request) under `root`. The result may not exist yet; when
/// it (or an ancestor) exists, its canonical form must still be inside the
/// canonical root. An empty `rel` is refused.
pub fn safe_join(root: &Path, rel: &str) -> Result<PathBuf, PathError> {
    let segs = clean_segments(rel)?;
    if segs.is_empty() {
        return Err(PathError::Empty);
    }
    let mut p = root.to_path_buf();
    for s in &segs {
        p.push(s);
    }
    ensure_within(root, &p)?;
    Ok(p)
}

/// Check that `path` (which should be under `root` lexically) does not leave
/// `root` through symlinks: the deepest existing ancestor is canonicalised and
/// compared with the canonical root by components.
pub fn ensure_within(root: &Path, path: &Path) -> Result<(), PathError> {
    let Ok(rel) = path.strip_prefix(root) else {
        return Err(PathError::Escapes);
    };
    if rel.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(PathError::Traversal);
    }
    let canon_root = match root.canonicalize() {
        Ok(r) => r,
        // A root that does not exist yet cannot hold a symlink.
        Err(_) => return Ok(()),
    };
    let mut probe = path.to_path_buf();
    loop {
        match probe.canonicalize() {
            Ok(c) => {
                return if c.starts_with(&canon_root) {
                    Ok(())
                } else {
                    Err(PathError::Escapes)
                };
            }
            Err(_) => {
                // A dangling symlink is refused outright.
                if probe.symlink_metadata().is_ok() {
                    return Err(PathError::Escapes);
                }
                if !probe.pop() || !probe.starts_with(root) {
                    return Ok(());
                }
            }
        }
    }
}

/// Like [`safe_join`], but the target must exist; returns its canonical path.
pub fn safe_existing(root: &Path, rel: &str) -> Result<PathBuf, PathError> {
    let p = safe_join(root, rel)?;
    let c = p.canonicalize().map_err(|e| PathError::Io(e.to_string()))?;
    let r = root
        .canonicalize()
        .map_err(|e| PathError::Io(e.to_string()))?;
    if c.starts_with(&r) {
        Ok(c)
    } else {
        Err(PathError::Escapes)
    }
}

/// A single file or folder name from a request (no separators at all).
pub fn safe_name(name: &str) -> Result<&str, PathError> {
    let segs = clean_segments(name)?;
    if segs.len() != 1 || segs[0] != name {
        return Err(PathError::Traversal);
    }
    Ok(name)
}

/// Longest file or folder name (one path component) most file systems store:
/// 255 bytes of UTF-8 (ext4, btrfs, APFS, XFS; NTFS counts 255 UTF-16 units,
/// which a 255-byte UTF-8 name never exceeds).
pub const MAX_NAME_BYTES: usize = 255;

/// Why a single file or folder name from a request cannot be stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameProblem {
    Empty,
    /// Over [`MAX_NAME_BYTES`] bytes of UTF-8 (the byte count).
    TooLong(usize),
    /// Only dots and/or spaces (`.`, `..`, `...`, `" "`, `". ."`).
    OnlyDotsOrSpaces,
    /// A character the file system refuses or that would split the name
    /// (NUL, control characters, `/`, `\`; on Windows also `<>:"|?*`).
    ForbiddenChar(char),
    /// A name Windows reserves (`CON`, `NUL`, `COM1`..., also with an extension)
    /// or one ending in a dot or space, which Windows silently alters.
    #[cfg(windows)]
    Reserved,
}

impl std::fmt::Display for NameProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NameProblem::Empty => f.write_str("the name is empty"),
            NameProblem::TooLong(n) => write!(
                f,
                "the name is too long ({n} bytes of UTF-8; at most {MAX_NAME_BYTES})"
            ),
            NameProblem::OnlyDotsOrSpaces => {
                f.write_str("the name consists only of dots or spaces")
            }
            NameProblem::ForbiddenChar(c) => write!(
                f,
                "the name contains a character the file system refuses (U+{:04X})",
                u32::from(*c)
            ),
            #[cfg(windows)]
            NameProblem::Reserved => f.write_str("the name is reserved by the file system"),
        }
    }
}

impl std::error::Error for NameProblem {}

/// Check one file or folder name (a single path component) from a request
/// before anything is created under it: not empty, at most [`MAX_NAME_BYTES`]
/// bytes of UTF-8 (bytes, not characters), not only dots or spaces, and free of
/// characters the file system refuses. Every upload route checks each
/// client-supplied component with this, so such names get a 400, not an OS error.
pub fn check_file_name(name: &str) -> Result<(), NameProblem> {
    if name.is_empty() {
        return Err(NameProblem::Empty);
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(NameProblem::TooLong(name.len()));
    }
    if name.chars().all(|c| c == '.' || c.is_whitespace()) {
        return Err(NameProblem::OnlyDotsOrSpaces);
    }
    if let Some(c) = name
        .chars()
        .find(|&c| c == '\0' || c.is_control() || c == '/' || c == '\\')
    {
        return Err(NameProblem::ForbiddenChar(c));
    }
    #[cfg(windows)]
    {
        if let Some(c) = name.chars().find(|c| "<>:\"|?*".contains(*c)) {
            return Err(NameProblem::ForbiddenChar(c));
        }
        let base = name
            .split('.')
            .next()
            .unwrap_or("")
            .trim_end()
            .to_ascii_uppercase();
        let device = matches!(
            base.as_str(),
            "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$"
        ) || ((base.starts_with("COM") || base.starts_with("LPT"))
            && base.len() == 4
            && base[3..].chars().all(|c| c.is_ascii_digit()));
        if device || name.ends_with(['.', ' ']) {
            return Err(NameProblem::Reserved);
        }
    }
    Ok(())
}

/// Whether an I/O error means the file system refused a *name* (too long,
/// invalid for this file system) rather than failed: such errors are the
/// client's (400), not the server's.
pub fn is_name_refused(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::InvalidFilename
}

/// For an error `e` met while `context`: when it is an I/O error by which the
/// file system refused a name ([`is_name_refused`]), the client's message for
/// it; `None` for any other error (the server's).
pub fn name_refused_message<E: std::fmt::Display + 'static>(
    context: &str,
    e: &E,
) -> Option<String> {
    (e as &dyn std::any::Any)
        .downcast_ref::<std::io::Error>()
        .is_some_and(is_name_refused)
        .then(|| format!("{context}: the file system refused the name ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_refused_name_gets_the_clients_message() {
        let refused = std::io::Error::from(std::io::ErrorKind::InvalidFilename);
        let m = name_refused_message("cannot store the file", &refused);
        assert_eq!(
            m.as_deref(),
            Some(&*format!(
                "cannot store the file: the file system refused the name ({refused})"
            ))
        );
        let other = std::io::Error::other("disk on fire");
        assert_eq!(name_refused_message("x", &other), None);
        assert_eq!(name_refused_message("x", &"not an io::Error"), None);
    }

    const HOSTILE: &[&str] = &[
        "..",
        "../",
        "../x",
        "a/../../x",
        "a/..",
        "..\\",
        "..\\x",
        "a\\..\\..\\x",
        "%2e%2e",
        "%2e%2e/x",
        "%2E%2E/x",
        "%2e%2e%2fx",
        "..%2fx",
        "..%5cx",
        "%252e%252e/x",
        "a/%2e%2e/%2e%2e/x",
        "/etc/passwd",
        "/",
        "\\windows",
        "\\\\server\\share",
        "C:\\Windows",
        "C:/Windows",
        "c:",
        "z:x",
        "a\0b",
        "\0",
        "a/\0/b",
        "a\nb",
        "a\rb",
        "\t",
        "...",
        "a/.../b",
        ". .",
        ".. ",
        "a/.. /b",
        "file:stream",
        "a/b:c",
        "",
        "/.",
        "./",
        "%00",
        "a%2f..%2f..%2fx",
        "\u{1}",
    ];

    #[test]
    fn hostile_inputs_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(HOSTILE.len() >= 40);
        for h in HOSTILE {
            let r = safe_join(dir.path(), h);
            match r {
                Err(_) => {}
                Ok(p) => {
                    // "%00"-like names are only acceptable when they stay plain names under the root.
                    assert!(
                        p.starts_with(dir.path()) && !h.contains(".."),
                        "accepted {h:?} as {p:?}"
                    );
                    assert!(*h == "%00", "accepted {h:?} as {p:?}");
                }
            }
        }
    }

    #[test]
    fn plain_paths_are_joined() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            safe_join(dir.path(), "a/b.txt").unwrap(),
            dir.path().join("a").join("b.txt")
        );
        assert_eq!(
            safe_join(dir.path(), "a\\b.txt").unwrap(),
            dir.path().join("a").join("b.txt")
        );
        assert_eq!(
            safe_join(dir.path(), "./a//b..c").unwrap(),
            dir.path().join("a").join("b..c")
        );
        assert_eq!(
            safe_join(dir.path(), "名前/モデル.pmx").unwrap(),
            dir.path().join("名前").join("モデル.pmx")
        );
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_out_of_root_are_refused() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"x").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("file")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/zzz", dir.path().join("dangling")).unwrap();
        std::fs::create_dir(dir.path().join("inside")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("inside"), dir.path().join("ok")).unwrap();
        assert_eq!(
            safe_join(dir.path(), "link/secret"),
            Err(PathError::Escapes)
        );
        assert_eq!(
            safe_join(dir.path(), "link/new/file"),
            Err(PathError::Escapes)
        );
        assert_eq!(safe_join(dir.path(), "file"), Err(PathError::Escapes));
        assert_eq!(safe_join(dir.path(), "dangling"), Err(PathError::Escapes));
        assert!(safe_existing(dir.path(), "link/secret").is_err());
        assert!(safe_join(dir.path(), "ok/new.txt").is_ok());
    }

    #[test]
    fn file_name_checks() {
        assert_eq!(check_file_name("model.pmx"), Ok(()));
        assert_eq!(check_file_name(&"猫".repeat(85)), Ok(()));
        assert_eq!(
            check_file_name(&"猫".repeat(86)),
            Err(NameProblem::TooLong(258))
        );
        assert_eq!(check_file_name(&"a".repeat(255)), Ok(()));
        assert_eq!(
            check_file_name(&"a".repeat(256)),
            Err(NameProblem::TooLong(256))
        );
        assert_eq!(check_file_name(""), Err(NameProblem::Empty));
        for n in [".", "..", "...", " ", "  .  ", ". ."] {
            assert_eq!(
                check_file_name(n),
                Err(NameProblem::OnlyDotsOrSpaces),
                "{n:?}"
            );
        }
        assert_eq!(
            check_file_name("a\0b"),
            Err(NameProblem::ForbiddenChar('\0'))
        );
        assert_eq!(
            check_file_name("a\nb"),
            Err(NameProblem::ForbiddenChar('\n'))
        );
        assert_eq!(check_file_name("a/b"), Err(NameProblem::ForbiddenChar('/')));
        assert!(NameProblem::TooLong(300).to_string().contains("300 bytes"));
        let e = std::io::Error::from(std::io::ErrorKind::InvalidFilename);
        assert!(is_name_refused(&e));
        assert!(!is_name_refused(&std::io::Error::from(
            std::io::ErrorKind::NotFound
        )));
    }

    #[test]
    fn names() {
        assert!(safe_name("model.pmx").is_ok());
        assert!(safe_name("a/b").is_err());
        assert!(safe_name("..").is_err());
        assert!(safe_name("").is_err());
    }
}

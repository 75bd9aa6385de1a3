//! Desktop helpers: the active window title and screen capture.
//!
//! Linux: the title comes from `xdotool` when an X display is present; a capture uses
//! `grim` (Wayland), ImageMagick `import` or `scrot`, writing a JPEG. macOS uses
//! `osascript` / `screencapture`. Without a display or a capture tool the capture is
//! "unavailable" (HTTP 501 envelope), never a crash. Interactive region selection exists
//! only on macOS (`screencapture -i`); elsewhere the frontend is told to capture itself.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;

use crate::error::{SysResult, SystemError};

/// Largest capture read back.
const MAX_CAPTURE: u64 = 32 * 1024 * 1024;

fn truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

/// The remote-deployment flag: every local capture is disabled.
pub fn remote_deployment() -> bool {
    [
        "COMPANIOND_ACTIVITY_TRACKER_REMOTE",
        "ACTIVITY_TRACKER_REMOTE",
    ]
    .iter()
    .any(|k| std::env::var(k).is_ok_and(|v| truthy(&v)))
}

fn has_display() -> bool {
    cfg!(target_os = "macos")
        || cfg!(windows)
        || std::env::var_os("DISPLAY").is_some_and(|v| !v.is_empty())
        || std::env::var_os("WAYLAND_DISPLAY").is_some_and(|v| !v.is_empty())
}

fn find_tool(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(name).is_file()))
}

/// Run a command with a deadline; (exit code, stdout).
fn run(cmd: &str, args: &[&str], timeout: Duration) -> Option<(i32, Vec<u8>)> {
    let mut child = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut out = Vec::new();
                if let Some(mut so) = child.stdout.take() {
                    use std::io::Read;
                    let _ = so.by_ref().take(64 * 1024).read_to_end(&mut out);
                }
                return Some((status.code().unwrap_or(-1), out));
            }
            Ok(None) if start.elapsed() < timeout => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// The active window title where the OS allows (blocking).
pub fn window_title() -> Option<String> {
    let (code, out) = if cfg!(target_os = "macos") {
        run(
            "osascript",
            &["-e", "tell application \"System Events\" to get name of first application process whose frontmost is true"],
            Duration::from_secs(2),
        )?
    } else if std::env::var_os("DISPLAY").is_some_and(|v| !v.is_empty()) && find_tool("xdotool") {
        run(
            "xdotool",
            &["getactivewindow", "getwindowname"],
            Duration::from_secs(2),
        )?
    } else {
        return None;
    };
    let t = String::from_utf8_lossy(&out).trim().to_string();
    (code == 0 && !t.is_empty()).then_some(t)
}

fn unavailable(msg: &str) -> SystemError {
    SystemError::CaptureUnavailable(msg.into())
}

/// A captured image.
pub struct Capture {
    pub data_url: String,
    pub size: usize,
}

fn read_capture(path: &Path, mime: &str) -> SysResult<Capture> {
    let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if len == 0 || len > MAX_CAPTURE {
        return Err(SystemError::CaptureFailed(
            "the capture produced no usable image".into(),
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| SystemError::CaptureFailed(e.to_string()))?;
    Ok(Capture {
        size: bytes.len(),
        data_url: format!(
            "data:{mime};base64,{}",
            base64::engine::general_purpose::STANDARD.encode(&bytes)
        ),
    })
}

/// Capture the whole screen as a JPEG (height ≤ 720 where the tool can scale) (blocking).
pub fn screenshot() -> SysResult<Capture> {
    if remote_deployment() {
        return Err(unavailable(
            "screen capture is disabled in a remote deployment",
        ));
    }
    if !has_display() {
        return Err(unavailable("no display is available for screen capture"));
    }
    let dir = tempfile::tempdir().map_err(|e| SystemError::CaptureFailed(e.to_string()))?;
    let out = dir.path().join("capture.jpg");
    let o = out.to_string_lossy().into_owned();
    let wayland = std::env::var_os("WAYLAND_DISPLAY").is_some();
    let attempts: Vec<(&str, Vec<&str>)> = if cfg!(target_os = "macos") {
        vec![("screencapture", vec!["-x", "-t", "jpg", &o])]
    } else {
        let mut v = Vec::new();
        if wayland {
            v.push(("grim", vec!["-t", "jpeg", "-q", "80", &o]));
        }
        v.push((
            "import",
            vec!["-window", "root", "-resize", "x720>", "-quality", "80", &o],
        ));
        v.push(("scrot", vec!["-o", "-q", "80", &o]));
        v
    };
    let mut tried = false;
    for (tool, args) in attempts {
        if !find_tool(tool) {
            continue;
        }
        tried = true;
        if let Some((0, _)) = run(tool, &args, Duration::from_secs(15)) {
            if out.is_file() {
                return read_capture(&out, "image/jpeg");
            }
        }
    }
    if tried {
        Err(SystemError::CaptureFailed(
            "the screen capture tool failed".into(),
        ))
    } else {
        Err(unavailable(
            "no screen capture tool is installed (grim, import or scrot)",
        ))
    }
}

/// Interactive region capture: `Ok(None)` when the user cancelled (blocking).
pub fn interactive() -> SysResult<Option<Capture>> {
    if remote_deployment() {
        return Err(unavailable(
            "screen capture is disabled in a remote deployment",
        ));
    }
    if !cfg!(target_os = "macos") {
        return Err(SystemError::InteractiveUnsupported);
    }
    if !find_tool("screencapture") {
        return Err(unavailable("screencapture is not available"));
    }
    let dir = tempfile::tempdir().map_err(|e| SystemError::CaptureFailed(e.to_string()))?;
    let out = dir.path().join("region.png");
    let o = out.to_string_lossy().into_owned();
    let code = run(
        "screencapture",
        &["-i", "-s", "-x", &o],
        Duration::from_secs(300),
    )
    .map(|(c, _)| c)
    .unwrap_or(-1);
    let len = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
    if len == 0 && (code == 0 || code == 1) {
        return Ok(None);
    }
    if len == 0 {
        return Err(SystemError::RegionCaptureFailed(
            "the region capture failed".into(),
        ));
    }
    read_capture(&out, "image/png").map(Some)
}

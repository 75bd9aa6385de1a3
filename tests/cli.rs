//! The program as the README's Options fix it: CLI, environment, listening line, exits.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_companiond");

fn command(args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, _) in std::env::vars() {
        if k.starts_with("COMPANIOND_") {
            c.env_remove(k);
        }
    }
    c.env("RUST_LOG", "warn");
    c
}

/// Start and wait for the listening line; returns the child and the base URL.
fn start(mut c: Command) -> (Child, String) {
    let mut child = c.spawn().expect("spawn companiond");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("listening line");
    let base = line
        .strip_prefix("listening on ")
        .expect("listening line format")
        .to_string();
    // Exactly one line on stdout.
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    (child, base)
}

fn get(base: &str, path: &str) -> (u16, String) {
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    use std::io::{Read, Write};
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, out)
}

fn terminate(child: &mut Child) -> i32 {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code().unwrap_or(-1);
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn dirs(t: &Path) -> (String, String) {
    let d = t.join("data");
    let b = t.join("bundle");
    std::fs::create_dir_all(&b).unwrap();
    (d.to_string_lossy().into(), b.to_string_lossy().into())
}

#[test]
fn serve_prints_the_real_port_and_stops_cleanly_on_sigterm() {
    let t = tempfile::tempdir().unwrap();
    let (d, b) = dirs(t.path());
    let (mut child, base) = start(command(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        &d,
        "--bundle-dir",
        &b,
    ]));
    assert!(base.starts_with("http://127.0.0.1:"));
    assert!(!base.ends_with(":0"));
    let (status, body) = get(&base, "/api/system/status");
    assert_eq!(status, 200);
    assert!(body.contains("\"status\":\"ready\""), "{body}");
    assert!(body
        .to_ascii_lowercase()
        .contains("cache-control: no-store"));
    assert_eq!(terminate(&mut child), 0);
}

#[test]
fn serve_is_the_default_subcommand_and_env_is_read() {
    let t = tempfile::tempdir().unwrap();
    let (d, b) = dirs(t.path());
    let mut c = command(&[]);
    c.env("COMPANIOND_LISTEN", "127.0.0.1:0")
        .env("COMPANIOND_DATA_DIR", &d)
        .env("COMPANIOND_BUNDLE_DIR", &b);
    c.env("COMPANIOND_CSRF_TOKEN", "from-env");
    let (mut child, base) = start(c);
    assert!(
        Path::new(&d).join("config/characters.json").is_file(),
        "data written under the env data dir"
    );
    let (_, body) = get(&base, "/api/characters");
    assert!(body.contains("Companion"));
    assert_eq!(terminate(&mut child), 0);
}

#[test]
fn flags_beat_environment() {
    let t = tempfile::tempdir().unwrap();
    let (d, b) = dirs(t.path());
    let env_dir = t.path().join("env-data");
    let mut c = command(&[
        "--data-dir",
        &d,
        "--bundle-dir",
        &b,
        "--listen",
        "127.0.0.1:0",
    ]);
    c.env("COMPANIOND_DATA_DIR", &env_dir)
        .env("COMPANIOND_LISTEN", "127.0.0.1:1");
    let (mut child, base) = start(c);
    assert!(!base.ends_with(":1"));
    assert!(Path::new(&d).join("config/characters.json").is_file());
    assert!(!env_dir.exists());
    assert_eq!(terminate(&mut child), 0);
}

#[test]
fn non_loopback_listen_is_refused_without_allow_remote() {
    let t = tempfile::tempdir().unwrap();
    let (d, b) = dirs(t.path());
    for addr in ["0.0.0.0:0", "[::]:0"] {
        let out = command(&[
            "serve",
            "--listen",
            addr,
            "--data-dir",
            &d,
            "--bundle-dir",
            &b,
        ])
        .output()
        .unwrap();
        assert_ne!(out.status.code(), Some(0));
        assert!(String::from_utf8_lossy(&out.stdout).is_empty());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--allow-remote"), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    // With --allow-remote (or its variable) it starts.
    let mut c = command(&[
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--data-dir",
        &d,
        "--bundle-dir",
        &b,
    ]);
    c.env("COMPANIOND_ALLOW_REMOTE", "1");
    let (mut child, base) = start(c);
    assert!(base.starts_with("http://0.0.0.0:"));
    assert_eq!(terminate(&mut child), 0);
}

#[test]
fn taken_port_bad_options_and_unwritable_data_dir_exit_non_zero() {
    let t = tempfile::tempdir().unwrap();
    let (d, b) = dirs(t.path());
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let out = command(&[
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--data-dir",
        &d,
        "--bundle-dir",
        &b,
    ])
    .output()
    .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim().lines().count(),
        1
    );

    let out = command(&["--listen", "not an address", "--data-dir", &d])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&out.stderr).trim().is_empty());

    let file = t.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let bad = file.join("data");
    let out = command(&[
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        bad.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not writable"), "{err}");
}

#[test]
fn a_second_process_on_one_data_dir_is_refused_and_the_first_keeps_serving() {
    let t = tempfile::tempdir().unwrap();
    let (d, b) = dirs(t.path());
    let args = [
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        &d,
        "--bundle-dir",
        &b,
    ];
    let (mut first, base) = start(command(&args));
    let out = command(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("in use by another companiond"), "{err}");
    assert!(err.contains(&format!("pid {}", first.id())), "{err}");
    assert!(err.contains(&base), "{err}");
    let (status, _) = get(&base, "/api/system/status");
    assert_eq!(status, 200);
    assert_eq!(terminate(&mut first), 0);
    // Released at exit: the next start succeeds.
    let (mut again, base) = start(command(&args));
    assert_eq!(get(&base, "/api/system/status").0, 200);
    assert_eq!(terminate(&mut again), 0);
}

#[test]
fn a_restart_right_after_kill_9_removes_every_crash_leftover() {
    let t = tempfile::tempdir().unwrap();
    let (d, b) = dirs(t.path());
    let args = [
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        &d,
        "--bundle-dir",
        &b,
    ];
    let (mut first, _) = start(command(&args));
    // What a write interrupted by the kill leaves: a fresh temporary file.
    let leftover =
        Path::new(&d).join("config/.core_config.json.0123456789abcdef0123456789abcdef.tmp");
    std::fs::write(&leftover, b"{\"half\":").unwrap();
    first.kill().unwrap();
    first.wait().unwrap();
    // The lock died with the process: an immediate restart takes it.
    let (mut second, base) = start(command(&args));
    let deadline = Instant::now() + Duration::from_secs(10);
    while leftover.exists() {
        assert!(Instant::now() < deadline, "leftover still there after 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(get(&base, "/api/system/status").0, 200);
    assert_eq!(terminate(&mut second), 0);
}

#[test]
fn a_request_logs_one_line_with_its_route_and_status_at_debug() {
    let t = tempfile::tempdir().unwrap();
    let (d, b) = dirs(t.path());
    let mut c = command(&[
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        &d,
        "--bundle-dir",
        &b,
    ]);
    c.env("RUST_LOG", "companiond=debug");
    let (mut child, base) = start(c);
    assert_eq!(get(&base, "/api/characters").0, 200);
    assert_eq!(terminate(&mut child), 0);
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("route=/api/characters") && l.contains("status=200"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("family=characters"), "{}", lines[0]);
    assert!(lines[0].contains("method=GET"), "{}", lines[0]);
}

//! A Jinja2-faithful template environment over `minijinja`.
//!
//! The original pages are Jinja2 templates rendered by Starlette (autoescape on).
//! minijinja follows Jinja's syntax; where its output differs from Jinja2's for
//! what the pages use, this module makes it match:
//! * HTML escaping as markupsafe does it (`& < > " '` only; `/` stays as is);
//! * `tojson` as Jinja2's `htmlsafe_json_dumps`: keys sorted, `", "` / `": "`
//!   separators, non-ASCII as `\uXXXX`, and `< > & '` escaped as `\u003c` ...;
//! * `format` as Python's `%` operator for the conversions the pages use.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use minijinja::value::{Rest, Value, ValueKind};
use minijinja::{AutoEscape, Environment, Error, ErrorKind, State};

/// markupsafe's escaping.
pub fn markupsafe_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Python's `str()` of a template value, as Jinja2 prints it.
fn py_str(v: &Value) -> String {
    match v.kind() {
        ValueKind::Undefined => String::new(),
        ValueKind::None => "None".into(),
        ValueKind::Bool => {
            if v.is_true() {
                "True".into()
            } else {
                "False".into()
            }
        }
        ValueKind::Number => match f64::try_from(v.clone()) {
            Ok(f) if v.as_i64().is_none() => py_float(f),
            _ => v.to_string(),
        },
        _ => v.to_string(),
    }
}

/// Python's `repr()` of a float (`0.0`, `1.91`, `inf`).
fn py_float(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let s = format!("{f:?}");
    s
}

fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\'' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn py_json(out: &mut String, v: &serde_json::Value) {
    use serde_json::Value as J;
    match v {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => {
                let _ = write!(out, "{i}");
            }
            (_, Some(u), _) => {
                let _ = write!(out, "{u}");
            }
            (_, _, Some(f)) => {
                let s = py_float(f);
                out.push_str(match s.as_str() {
                    "nan" => "NaN",
                    "inf" => "Infinity",
                    "-inf" => "-Infinity",
                    other => other,
                });
            }
            _ => out.push_str("null"),
        },
        J::String(s) => json_string(out, s),
        J::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_json(out, x);
            }
            out.push(']');
        }
        J::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                json_string(out, k);
                out.push_str(": ");
                if let Some(x) = o.get(*k) {
                    py_json(out, x);
                }
            }
            out.push('}');
        }
    }
}

/// Jinja2's `tojson`: HTML-safe JSON, marked safe.
pub fn tojson(v: &Value) -> Result<Value, Error> {
    let j = serde_json::to_value(v).map_err(|e| {
        Error::new(
            ErrorKind::InvalidOperation,
            format!("cannot serialise: {e}"),
        )
    })?;
    let mut out = String::new();
    py_json(&mut out, &j);
    Ok(Value::from_safe_string(out))
}

fn escape_filter(v: &Value) -> Value {
    if v.is_safe() {
        return v.clone();
    }
    Value::from_safe_string(markupsafe_escape(&py_str(v)))
}

/// Python's `fmt % args` for `%s %r %d %i %f %.Nf %e %g %x %%`.
pub fn py_format(fmt: &str, args: &[Value]) -> Result<String, Error> {
    let bad = |m: &str| Error::new(ErrorKind::InvalidOperation, m.to_string());
    let mut out = String::new();
    let mut args = args.iter();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = String::new();
        let conv = loop {
            match chars.next() {
                Some(ch) if "-+ #0123456789.".contains(ch) => spec.push(ch),
                Some(ch) => break ch,
                None => return Err(bad("incomplete format")),
            }
        };
        if conv == '%' {
            out.push('%');
            continue;
        }
        let arg = args
            .next()
            .ok_or_else(|| bad("not enough arguments for format string"))?;
        let precision: Option<usize> = spec.split_once('.').and_then(|(_, p)| p.parse().ok());
        let width: usize = spec
            .split('.')
            .next()
            .unwrap_or("")
            .trim_start_matches(['-', '+', ' ', '#', '0'])
            .parse()
            .unwrap_or(0);
        let num = || -> Result<f64, Error> {
            f64::try_from(arg.clone()).map_err(|_| bad("a number is required"))
        };
        let body = match conv {
            's' => py_str(arg),
            'r' => format!("{arg:?}"),
            'd' | 'i' => format!("{}", num()?.trunc() as i64),
            'f' | 'F' => format!("{:.*}", precision.unwrap_or(6), num()?),
            'e' => format!("{:.*e}", precision.unwrap_or(6), num()?),
            'g' => py_float(num()?),
            'x' => format!("{:x}", num()? as i64),
            _ => return Err(bad("unsupported format conversion")),
        };
        if body.chars().count() < width {
            let pad = width - body.chars().count();
            if spec.starts_with('-') {
                out.push_str(&body);
                out.push_str(&" ".repeat(pad));
            } else if spec.trim_start_matches(['+', ' ', '#']).starts_with('0') {
                out.push_str(&"0".repeat(pad));
                out.push_str(&body);
            } else {
                out.push_str(&" ".repeat(pad));
                out.push_str(&body);
            }
        } else {
            out.push_str(&body);
        }
    }
    Ok(out)
}

fn format_filter(fmt: String, args: Rest<Value>) -> Result<String, Error> {
    py_format(&fmt, &args)
}

/// An environment loading `<root>/<name>` (names like `templates/index.html`).
pub fn environment(root: PathBuf) -> Environment<'static> {
    let mut env = Environment::new();
    env.set_loader(minijinja::path_loader(root));
    env.set_auto_escape_callback(|name: &str| {
        let n = name.to_ascii_lowercase();
        if n.ends_with(".html") || n.ends_with(".htm") || n.ends_with(".xml") {
            AutoEscape::Html
        } else {
            AutoEscape::None
        }
    });
    env.set_formatter(|out, state: &State, value: &Value| {
        let s = if value.is_safe() {
            value.to_string()
        } else if matches!(state.auto_escape(), AutoEscape::Html) {
            markupsafe_escape(&py_str(value))
        } else {
            py_str(value)
        };
        out.write_str(&s).map_err(Error::from)
    });
    env.add_filter("tojson", tojson);
    env.add_filter("e", escape_filter);
    env.add_filter("escape", escape_filter);
    env.add_filter("format", format_filter);
    env
}

/// Is `name` a template file under `root`?
pub fn template_exists(root: &Path, name: &str) -> bool {
    root.join(name).is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_compatible_output() {
        let dir = std::env::temp_dir().join(format!("cfront-render-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("templates")).unwrap();
        std::fs::write(
            dir.join("templates/t.html"),
            "{{ d | tojson }}|{{ d.a }}|{{ d.z }}|{{ \"%.2f\"|format(d.a) }}|{{ 'sel' if d.n|int == 7 }}|{{ s|e }}|{{ s }}|{{ v | default('0') }}|{{ w|default('0', true) }}|{{' + name + '}}",
        )
        .unwrap();
        let env = environment(dir.clone());
        let t = env.get_template("templates/t.html").unwrap();
        let out = t
            .render(minijinja::context! {
                d => serde_json::json!({"z": 0.0, "a": 1.91, "n": 7, "s": "<é'>"}),
                s => "a/b<\"'&",
                w => "",
            })
            .unwrap();
        assert_eq!(
            out,
            "{\"a\": 1.91, \"n\": 7, \"s\": \"\\u003c\\u00e9\\u0027\\u003e\", \"z\": 0.0}|1.91|0.0|1.91|sel|a/b&lt;&#34;&#39;&amp;|a/b&lt;&#34;&#39;&amp;|0|0| + name + "
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn format_conversions() {
        let f = |s: &str, a: Value| py_format(s, &[a]).unwrap();
        assert_eq!(f("%.2f", Value::from(0.8)), "0.80");
        assert_eq!(f("%d%%", Value::from(3.7)), "3%");
        assert_eq!(f("%5s|", Value::from("ab")), "   ab|");
        assert!(py_format("%d", &[]).is_err());
    }
}

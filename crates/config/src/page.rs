//! `page_config`, `character_reserved_fields` and the language helpers.

use std::path::Path;

use companiond_core::paths;
use serde_json::{json, Map, Value};

/// Default Live2D model (bundled frontend).
pub const DEFAULT_LIVE2D: &str = "yui-lolita/yui-lolita.model3.json";

/// Character-profile fields reserved by the system (owned by core's characters).
pub use companiond_core::characters::SYSTEM_RESERVED;

/// Character-profile fields reserved by workshop metadata.
pub const WORKSHOP_RESERVED: &[&str] = &[
    "原始数据",
    "文件路径",
    "创意工坊物品ID",
    "description",
    "tags",
    "name",
    "描述",
    "标签",
    "关键词",
];

/// The reserved character-profile fields.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ReservedFields {
    pub success: bool,
    pub system_reserved_fields: &'static [&'static str],
    pub workshop_reserved_fields: &'static [&'static str],
    /// Both lists, each field once.
    pub all_reserved_fields: Vec<&'static str>,
}

/// `{success, system_reserved_fields, workshop_reserved_fields, all_reserved_fields}`.
pub fn reserved_fields() -> ReservedFields {
    let mut all: Vec<&'static str> = Vec::new();
    for f in SYSTEM_RESERVED.iter().chain(WORKSHOP_RESERVED) {
        if !all.contains(f) {
            all.push(f);
        }
    }
    ReservedFields {
        success: true,
        system_reserved_fields: SYSTEM_RESERVED,
        workshop_reserved_fields: WORKSHOP_RESERVED,
        all_reserved_fields: all,
    }
}

/// Percent-encode a URL path (segments kept).
pub fn quote_path(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    for b in p.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Does `rel` name an existing file under `root` (through the safe join)?
fn exists_under(root: &Path, rel: &str) -> bool {
    paths::safe_existing(root, &decode(rel)).is_ok_and(|p| p.is_file())
}

fn is_http(s: &str) -> bool {
    let l = s.to_ascii_lowercase();
    l.starts_with("http://") || l.starts_with("https://")
}

/// Where model files live.
pub struct Roots<'a> {
    pub bundle_static: &'a Path,
    /// `<--frontend-dir>/static`, served at `/static/` before the bundle's.
    pub frontend_static: Option<&'a Path>,
    pub data: &'a Path,
}

impl Roots<'_> {
    fn user(&self, dir: &str) -> std::path::PathBuf {
        self.data.join(dir)
    }
    /// Is `/static/<dir>/<rel>` a file (the frontend's `static/`, then the bundle's)?
    fn static_has(&self, dir: &str, rel: &str) -> bool {
        self.frontend_static
            .is_some_and(|f| exists_under(&f.join(dir), rel))
            || exists_under(&self.bundle_static.join(dir), rel)
    }
}

/// Resolve a 3D model path (`vrm` or `mmd`) to a served URL, or `""`.
fn resolve_3d(raw: &str, kind: &str, roots: &Roots) -> String {
    let raw = raw.trim();
    if raw.is_empty() || raw == "undefined" || raw == "null" || raw.starts_with("//") {
        return String::new();
    }
    if is_http(raw) {
        return raw.to_string();
    }
    let static_prefix = format!("/static/{kind}/");
    let user_prefix = format!("/user_{kind}/");
    if let Some(rel) = raw.strip_prefix(&static_prefix) {
        return if roots.static_has(kind, rel) {
            quote_path(&decode(raw))
        } else {
            String::new()
        };
    }
    if let Some(rel) = raw.strip_prefix(&user_prefix) {
        return if exists_under(&roots.user(&format!("user_{kind}")), rel) {
            quote_path(&decode(raw))
        } else {
            String::new()
        };
    }
    if raw.starts_with('/') {
        // Another served route (e.g. /workshop/...): passed through as given.
        return if raw.contains("..") {
            String::new()
        } else {
            quote_path(&decode(raw))
        };
    }
    if roots.static_has(kind, raw) {
        return quote_path(&format!("{static_prefix}{raw}"));
    }
    if exists_under(&roots.user(&format!("user_{kind}")), raw) {
        return quote_path(&format!("{user_prefix}{raw}"));
    }
    String::new()
}

/// Resolve the Live2D model: a URL or served path as given, a relative
/// `*.model3.json` path or a model name (`<name>/<name>.model3.json`) looked up in
/// the bundle's `static/live2d/` then the data dir's `user_live2d/`.
fn resolve_live2d(raw: &str, roots: &Roots) -> String {
    let raw = raw.trim();
    if is_http(raw) || (raw.starts_with('/') && !raw.starts_with("//") && !raw.contains("..")) {
        return raw.to_string();
    }
    let rel = if raw.is_empty() {
        DEFAULT_LIVE2D.to_string()
    } else if raw.ends_with(".model3.json") || raw.ends_with(".model.json") {
        raw.to_string()
    } else {
        format!("{raw}/{raw}.model3.json")
    };
    if roots.static_has("live2d", &rel) {
        return quote_path(&format!("/static/live2d/{rel}"));
    }
    if exists_under(&roots.user("user_live2d"), &rel) {
        return quote_path(&format!("/user_live2d/{rel}"));
    }
    // The original frontend (--frontend-dir) keeps its models directly under
    // static/ (`/static/<name>/<name>.model3.json`).
    if let Some(f) = roots.frontend_static {
        for r in [rel.as_str(), DEFAULT_LIVE2D] {
            if exists_under(f, r) {
                return quote_path(&format!("/static/{r}"));
            }
        }
    }
    // The bundled frontend ships the default model.
    quote_path(&format!("/static/live2d/{DEFAULT_LIVE2D}"))
}

fn resolve_png(raw: &str, roots: &Roots) -> String {
    let raw = raw.trim();
    if raw.is_empty() || raw == "undefined" || raw == "null" || raw.starts_with("//") {
        return String::new();
    }
    if is_http(raw) {
        return raw.to_string();
    }
    let root = roots.user(companiond_core::static_files::USER_PNGTUBER);
    if let Some(rel) = raw.strip_prefix("/user_pngtuber/") {
        return if exists_under(&root, rel) {
            quote_path(&decode(raw))
        } else {
            String::new()
        };
    }
    if raw.starts_with('/') {
        return String::new();
    }
    let ext_ok = Path::new(raw)
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| {
            companiond_core::characters::IMAGE_EXTS.contains(&e.to_ascii_lowercase().as_str())
        });
    if ext_ok && exists_under(&root, raw) {
        return quote_path(&format!("/user_pngtuber/{raw}"));
    }
    String::new()
}

fn field<'a>(profile: &'a Value, key: &str) -> Option<&'a Value> {
    profile
        .get("avatar")
        .and_then(|a| a.get(key))
        .or_else(|| profile.get(key))
}

fn model_string(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Object(o)) => o
            .get("model_path")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        _ => String::new(),
    }
}

/// The page configuration of character `name` (`character_exists`: whether it is stored).
pub fn page_config(
    name: &str,
    character_exists: bool,
    profile: &Value,
    csrf: &str,
    roots: &Roots,
) -> PageConfig {
    let mut model_type = field(profile, "model_type")
        .and_then(Value::as_str)
        .unwrap_or("live2d")
        .trim()
        .to_ascii_lowercase();
    if model_type.is_empty() {
        model_type = "live2d".into();
    }
    if model_type == "vrm" || model_type == "mmd" {
        model_type = "live3d".into();
    }
    let live2d = resolve_live2d(&model_string(field(profile, "live2d")), roots);
    let vrm_raw = field(profile, "vrm");
    let vrm = resolve_3d(&model_string(vrm_raw), "vrm", roots);
    let mmd = resolve_3d(&model_string(field(profile, "mmd")), "mmd", roots);
    let png_obj = field(profile, "pngtuber")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut png = png_obj.clone();
    for k in companiond_core::characters::PNGTUBER_IMAGE_KEYS {
        let raw = png_obj.get(*k).and_then(Value::as_str).unwrap_or("");
        png.insert((*k).to_string(), json!(resolve_png(raw, roots)));
    }
    let png_path = png
        .get("idle_image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let lighting = field(profile, "lighting")
        .filter(|l| l.is_object())
        .or_else(|| {
            vrm_raw
                .and_then(|v| v.get("lighting"))
                .filter(|l| l.is_object())
        })
        .cloned()
        .unwrap_or(Value::Null);
    let stored_sub = field(profile, "live3d_sub_type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_ascii_lowercase();
    let declared = field(profile, "model_type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_ascii_lowercase();
    let sub = if stored_sub == "vrm" || stored_sub == "mmd" {
        stored_sub
    } else if declared == "mmd" || (declared != "vrm" && !mmd.is_empty()) {
        "mmd".to_string()
    } else if !vrm.is_empty() || declared == "vrm" {
        "vrm".to_string()
    } else {
        String::new()
    };
    let model_path = match model_type.as_str() {
        "live3d" => match sub.as_str() {
            "mmd" => mmd.clone(),
            "vrm" => vrm.clone(),
            _ => String::new(),
        },
        "pngtuber" => png_path.clone(),
        _ => live2d.clone(),
    };
    let master = |k: &str| {
        profile
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let master_name = master("master_name");
    let master_nickname = master("master_nickname");
    let master_profile_name = master("master_profile_name");
    let master_display_name = master_nickname
        .split([',', '，'])
        .map(str::trim)
        .find(|s| !s.is_empty())
        .map(str::to_string)
        .or_else(|| (!master_profile_name.is_empty()).then(|| master_profile_name.clone()))
        .unwrap_or_else(|| master_name.clone());
    let live3d = model_type == "live3d";
    let pngtuber = (model_type == "pngtuber").then_some(png);
    PageConfig {
        success: true,
        persona_name: name.to_string(),
        lanlan_name: name.to_string(),
        character_exists,
        master_name,
        master_profile_name,
        master_nickname,
        master_display_name,
        csrf_token: csrf.to_string(),
        autostart_csrf_token: csrf.to_string(),
        model_type,
        model_path,
        lighting,
        model_paths: ModelPaths {
            live2d,
            vrm,
            mmd,
            pngtuber: png_path,
        },
        live3d_sub_type: live3d.then_some(sub),
        pngtuber,
    }
}

/// What a page needs to start: the character, its model, the master's names
/// and the CSRF token.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct PageConfig {
    pub success: bool,
    pub persona_name: String,
    /// The original application's name of `persona_name`.
    pub lanlan_name: String,
    /// Whether the character is stored (else the answer describes an empty profile).
    pub character_exists: bool,
    pub master_name: String,
    pub master_profile_name: String,
    pub master_nickname: String,
    /// The first of the nicknames (comma-separated), else the profile name, else the name.
    pub master_display_name: String,
    /// The token guarded routes need in `X-CSRF-Token`.
    pub csrf_token: String,
    pub autostart_csrf_token: String,
    /// `live2d`, `live3d` or `pngtuber`.
    pub model_type: String,
    /// The URL of the model the page shows (empty when none).
    pub model_path: String,
    /// The character's lighting (`lighting`, else the VRM's), or null.
    #[schema(value_type = Option<Object>)]
    pub lighting: Value,
    pub model_paths: ModelPaths,
    /// `vrm` or `mmd` (`live3d` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live3d_sub_type: Option<String>,
    /// The PNGTuber settings with their image URLs resolved (`pngtuber` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub pngtuber: Option<Map<String, Value>>,
}

/// The URL of each kind of model the character names (empty when none).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ModelPaths {
    pub live2d: String,
    pub vrm: String,
    pub mmd: String,
    pub pngtuber: String,
}

// ------------------------------------------------------------------ languages

/// The OS locale from `LC_ALL`, `LC_MESSAGES`, `LANG` (first set, not `C`/`POSIX`),
/// e.g. `zh_CN.UTF-8`.
pub fn os_locale() -> Option<String> {
    for var in ["LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE"] {
        if let Ok(v) = std::env::var(var) {
            let v = v.split(':').next().unwrap_or("").trim().to_string();
            let base = v.split(['.', '@']).next().unwrap_or("");
            if !base.is_empty() && base != "C" && base != "POSIX" {
                return Some(v);
            }
        }
    }
    None
}

/// Normalise a locale to the frontend's i18n codes (`zh-CN`, `zh-TW`, `en`, `ja`,
/// `ko`, `ru`, ...); unknown or empty → `en`.
pub fn i18n_language(locale: &str) -> String {
    let base = locale
        .split(['.', '@'])
        .next()
        .unwrap_or("")
        .replace('_', "-");
    let mut parts = base.split('-');
    let lang = parts.next().unwrap_or("").to_ascii_lowercase();
    let rest: Vec<String> = parts.map(str::to_ascii_uppercase).collect();
    match lang.as_str() {
        "zh" => {
            if rest
                .iter()
                .any(|r| matches!(r.as_str(), "TW" | "HK" | "MO" | "HANT"))
            {
                "zh-TW".into()
            } else {
                "zh-CN".into()
            }
        }
        "schinese" => "zh-CN".into(),
        "tchinese" => "zh-TW".into(),
        "" => "en".into(),
        l if l.len() == 2 || l.len() == 3 => {
            if l.chars().all(|c| c.is_ascii_lowercase()) {
                l.to_string()
            } else {
                "en".into()
            }
        }
        _ => "en".into(),
    }
}

/// The short language code (`zh`, `en`, `ja` ...) of a locale or i18n code.
pub fn short_language(code: &str) -> String {
    i18n_language(code)
        .split('-')
        .next()
        .unwrap_or("en")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locales() {
        assert_eq!(i18n_language("zh_CN.UTF-8"), "zh-CN");
        assert_eq!(i18n_language("zh_TW.UTF-8"), "zh-TW");
        assert_eq!(i18n_language("en_US.UTF-8"), "en");
        assert_eq!(i18n_language("ja_JP"), "ja");
        assert_eq!(i18n_language(""), "en");
        assert_eq!(short_language("zh-TW"), "zh");
        assert_eq!(quote_path("/user_vrm/a b.vrm"), "/user_vrm/a%20b.vrm");
        assert_eq!(decode("a%20b"), "a b");
    }
}

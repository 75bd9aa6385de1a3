//! `POST /api/translate`: language normalisation and detection, Google's public
//! endpoint (short timeout), then the conversation model; on total failure the
//! original text comes back in the failure envelope.

use std::time::Duration;

use companiond_core::providers::Slot;
use companiond_core::AppState;
use serde_json::Value;

/// Default Google base URL; env `COMPANIOND_GOOGLE_TRANSLATE_URL` overrides it at start-up
/// (`off` disables Google).
pub const GOOGLE_DEFAULT: &str = "https://translate.googleapis.com";
/// Google timeout (whole call).
pub const GOOGLE_TIMEOUT: Duration = Duration::from_secs(5);
/// Model timeout.
pub const MODEL_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest text accepted.
pub const MAX_TEXT: usize = 50_000;
/// Google request chunk size (characters).
const CHUNK: usize = 4500;

/// The Google base URL from the environment (read once at start-up).
pub fn google_base_from_env() -> Option<String> {
    match std::env::var("COMPANIOND_GOOGLE_TRANSLATE_URL") {
        Ok(v) if v.trim().eq_ignore_ascii_case("off") || v.trim().is_empty() => None,
        Ok(v) => Some(v.trim().trim_end_matches('/').to_string()),
        Err(_) => Some(GOOGLE_DEFAULT.to_string()),
    }
}

/// Normalise a language name to zh/en/ja/ko/ru (unknown values become `zh`).
pub fn normalize_lang(raw: &str) -> String {
    let l = raw.trim().to_ascii_lowercase().replace('_', "-");
    let short = match l.as_str() {
        "schinese" | "tchinese" | "chinese" => "zh",
        "english" => "en",
        "japanese" => "ja",
        "koreana" | "korean" => "ko",
        "russian" => "ru",
        _ if l.starts_with("zh") => "zh",
        _ if l.starts_with("en") => "en",
        _ if l.starts_with("ja") || l.starts_with("jp") => "ja",
        _ if l.starts_with("ko") => "ko",
        _ if l.starts_with("ru") => "ru",
        _ => "zh",
    };
    short.to_string()
}

/// Detect the language of `text` by script counts (`unknown` without letters).
pub fn detect(text: &str) -> String {
    let (mut han, mut kana, mut hangul, mut cyr, mut latin) =
        (0usize, 0usize, 0usize, 0usize, 0usize);
    for c in text.chars() {
        match c as u32 {
            0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0xF900..=0xFAFF => han += 1,
            0x3040..=0x30FF | 0x31F0..=0x31FF | 0xFF66..=0xFF9D => kana += 1,
            0xAC00..=0xD7AF | 0x1100..=0x11FF | 0x3130..=0x318F => hangul += 1,
            0x0400..=0x04FF => cyr += 1,
            _ if c.is_ascii_alphabetic() => latin += 1,
            _ => {}
        }
    }
    if kana > 0 && kana as f64 >= 0.2 * han as f64 {
        return "ja".into();
    }
    if hangul > 0 && hangul >= han.max(kana).max(cyr).max(latin) {
        return "ko".into();
    }
    if cyr > 0 && cyr >= han && cyr >= latin {
        return "ru".into();
    }
    if han > 0 && han >= latin {
        return "zh".into();
    }
    if latin > 0 {
        return "en".into();
    }
    "unknown".into()
}

fn google_code(l: &str) -> &str {
    if l == "zh" {
        "zh-CN"
    } else {
        l
    }
}

/// Split text into chunks of at most [`CHUNK`] characters, at line or word ends when possible.
pub fn chunks(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut n = 0;
    for piece in text.split_inclusive(['\n', ' ']) {
        let len = piece.chars().count();
        if n + len > CHUNK && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
            n = 0;
        }
        if len > CHUNK {
            let chars: Vec<char> = piece.chars().collect();
            for c in chars.chunks(CHUNK) {
                out.push(c.iter().collect());
            }
            continue;
        }
        cur.push_str(piece);
        n += len;
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Parse Google's `translate_a/single` answer.
pub fn parse_google(v: &Value) -> Option<String> {
    let parts = v.get(0)?.as_array()?;
    let mut out = String::new();
    for p in parts {
        if let Some(s) = p.get(0).and_then(Value::as_str) {
            out.push_str(s);
        }
    }
    (!out.trim().is_empty()).then_some(out)
}

/// Translate through Google; any failure is `None`.
pub async fn google(
    http: &reqwest::Client,
    base: &str,
    text: &str,
    src: &str,
    tgt: &str,
) -> Option<String> {
    let work = async {
        let mut out = String::new();
        for chunk in chunks(text) {
            let r = http
                .get(format!("{base}/translate_a/single"))
                .query(&[
                    ("client", "gtx"),
                    ("sl", google_code(src)),
                    ("tl", google_code(tgt)),
                    ("dt", "t"),
                    ("q", chunk.as_str()),
                ])
                .send()
                .await
                .ok()?;
            if !r.status().is_success() {
                return None;
            }
            let v: Value = r.json().await.ok()?;
            out.push_str(&parse_google(&v)?);
        }
        Some(out)
    };
    tokio::time::timeout(GOOGLE_TIMEOUT, work)
        .await
        .ok()
        .flatten()
}

/// Is `text` written in the script of language `lang` (at least a third of
/// its letters)? Languages without a known script pass.
pub fn in_script(text: &str, lang: &str) -> bool {
    let is: fn(char) -> bool = match lang {
        "zh" => {
            |c| ('\u{4e00}'..='\u{9fff}').contains(&c) || ('\u{3400}'..='\u{4dbf}').contains(&c)
        }
        "ja" => {
            |c| ('\u{3040}'..='\u{30ff}').contains(&c) || ('\u{4e00}'..='\u{9fff}').contains(&c)
        }
        "ko" => {
            |c| ('\u{ac00}'..='\u{d7af}').contains(&c) || ('\u{1100}'..='\u{11ff}').contains(&c)
        }
        "ru" => |c| ('\u{0400}'..='\u{04ff}').contains(&c),
        "en" => |c| c.is_ascii_alphabetic(),
        _ => return true,
    };
    let letters = text.chars().filter(|c| c.is_alphabetic()).count();
    let hits = text.chars().filter(|c| is(*c)).count();
    letters == 0 || hits * 3 >= letters
}

fn lang_name(l: &str) -> &str {
    match l {
        "zh" => "Simplified Chinese",
        "en" => "English",
        "ja" => "Japanese",
        "ko" => "Korean",
        "ru" => "Russian",
        other => other,
    }
}

/// Translate through the conversation model; `Err` carries the reason.
pub async fn model(st: &AppState, text: &str, src: &str, tgt: &str) -> Result<String, String> {
    let sys = format!(
        "You are a translator. Translate the user's text from {} to {}. \
         Output only the translation, with no notes or quotes.",
        lang_name(src),
        lang_name(tgt)
    );
    // Capped: about twice the source's tokens (an uncapped small model can
    // generate thousands of tokens after the caller has given up).
    let cap = (companiond_core::context::estimate_tokens(text) * 2 + 64).min(4096);
    let opts = crate::model::options("", MODEL_TIMEOUT, 0.3, u32::try_from(cap).ok());
    let c = st
        .llm
        .complete(
            Slot::Conversation,
            &crate::model::one_shot(sys, text),
            &opts,
        )
        .await
        .map_err(|e| e.to_string())?;
    let out = c.content.trim().to_string();
    if out.is_empty() {
        Err("the model returned an empty translation".into())
    } else if !in_script(&out, tgt) {
        Err(format!("the model's answer is not in {}", lang_name(tgt)))
    } else {
        Ok(out)
    }
}

/// The result of a translation.
#[derive(Debug)]
pub struct Translation {
    pub text: String,
    pub source: String,
    pub target: String,
    /// `None` when Google was not tried.
    pub google_failed: Option<bool>,
    /// `Some(reason)` on total failure (the text is then the original).
    pub failure: Option<String>,
    pub provider: &'static str,
}

/// Run the provider chain.
pub async fn translate(
    st: &AppState,
    google_base: Option<&str>,
    text: &str,
    source: Option<&str>,
    target: &str,
    skip_google: bool,
) -> Translation {
    let target = normalize_lang(target);
    let source = match source
        .map(str::trim)
        .filter(|s| !s.is_empty() && *s != "auto")
    {
        Some(s) => normalize_lang(s),
        None => detect(text),
    };
    let mut t = Translation {
        text: text.to_string(),
        source: source.clone(),
        target: target.clone(),
        google_failed: None,
        failure: None,
        provider: "none",
    };
    if source == target || source == "unknown" {
        return t;
    }
    if let (false, Some(base)) = (skip_google, google_base) {
        match google(&st.http, base, text, &source, &target).await {
            Some(out) => {
                t.text = out;
                t.google_failed = Some(false);
                t.provider = "google";
                return t;
            }
            None => t.google_failed = Some(true),
        }
    } else {
        t.google_failed = Some(false);
    }
    match model(st, text, &source, &target).await {
        Ok(out) => {
            t.text = out;
            t.provider = "model";
        }
        Err(e) => t.failure = Some(e),
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_in_the_wrong_script_are_told_apart() {
        assert!(in_script("你好，世界", "zh"));
        assert!(!in_script("Hello world", "zh"));
        assert!(in_script("こんにちは", "ja"));
        assert!(in_script("안녕하세요", "ko"));
        assert!(!in_script("Привет", "en"));
        assert!(in_script("Привет, Alice", "ru"));
        assert!(in_script("Hello, 世界", "en"));
        assert!(in_script("12345", "zh"));
        assert!(in_script("anything", "de"));
    }

    #[test]
    fn langs() {
        crate::testing::assert_maps(
            normalize_lang,
            &[
                ("zh-TW", "zh"),
                ("schinese", "zh"),
                ("en_US", "en"),
                ("koreana", "ko"),
                ("ja-JP", "ja"),
                ("russian", "ru"),
                ("klingon", "zh"),
            ],
        );
        crate::testing::assert_maps(
            detect,
            &[
                ("Hello there", "en"),
                ("你好世界", "zh"),
                ("こんにちは世界", "ja"),
                ("안녕하세요", "ko"),
                ("Привет", "ru"),
                ("12345 !!", "unknown"),
            ],
        );
    }

    #[test]
    fn google_parsing_and_chunks() {
        let v = json!([
            [["Hallo ", "Hello ", null], ["Welt", "world", null]],
            null,
            "en"
        ]);
        assert_eq!(parse_google(&v).as_deref(), Some("Hallo Welt"));
        assert!(parse_google(&json!({"x": 1})).is_none());
        let long = "word ".repeat(3000);
        let c = chunks(&long);
        assert!(c.len() >= 3);
        assert!(c.iter().all(|x| x.chars().count() <= CHUNK));
        assert_eq!(c.concat(), long);
        let solid = "x".repeat(10_000);
        assert_eq!(chunks(&solid).concat(), solid);
    }
}

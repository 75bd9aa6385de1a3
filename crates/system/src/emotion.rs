//! Emotion analysis: the `emotion` model slot, a multilingual label normaliser and a
//! keyword heuristic that the result falls back to (docs/system.md, "Emotion").

use std::time::Duration;

use companiond_core::llm::LlmError;
use companiond_core::providers::Slot;
use companiond_core::AppState;
use serde_json::Value;

use crate::model;

/// The canonical labels, in tie-break order.
pub const LABELS: [&str; 5] = ["happy", "sad", "angry", "surprised", "neutral"];
/// Largest text analysed (longer text is cut).
pub const MAX_TEXT: usize = 4000;

/// The outcome of one analysis.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub emotion: String,
    pub confidence: f64,
    /// `blank`, `model`, `heuristic`, `model+heuristic`, `failed`.
    pub source: &'static str,
    /// Model failure (code, message).
    pub error: Option<(String, String)>,
}

// ----------------------------------------------------------------- heuristic

const HAPPY: &[&str] = &[
    "happy",
    "glad",
    "great",
    "awesome",
    "love it",
    "yay",
    "haha",
    "lol",
    "fun",
    "excited",
    "wonderful",
    "thank",
    "nice",
    "delighted",
    "开心",
    "高兴",
    "哈哈",
    "喜欢",
    "太好了",
    "棒",
    "嘻嘻",
    "快乐",
    "幸福",
    "嬉しい",
    "楽しい",
    "やった",
    "最高",
];
const SAD: &[&str] = &[
    "sad",
    "cry",
    "crying",
    "unhappy",
    "lonely",
    "depressed",
    "miss you",
    "heartbroken",
    "upset",
    "hurt",
    "miserable",
    "难过",
    "伤心",
    "哭",
    "孤独",
    "失落",
    "委屈",
    "难受",
    "悲しい",
    "寂しい",
    "辛い",
    "泣",
];
const ANGRY: &[&str] = &[
    "angry",
    "mad",
    "furious",
    "hate",
    "annoyed",
    "stupid",
    "damn",
    "pissed",
    "irritated",
    "生气",
    "气死",
    "讨厌",
    "烦死",
    "愤怒",
    "混蛋",
    "ムカつく",
    "怒",
];
const SURPRISED: &[&str] = &[
    "wow",
    "whoa",
    "surprised",
    "unbelievable",
    "omg",
    "no way",
    "shocked",
    "amazing",
    "哇",
    "天哪",
    "居然",
    "竟然",
    "真的吗",
    "没想到",
    "えっ",
    "びっくり",
    "まさか",
];
const SAD_VULNERABLE: &[&str] = &[
    "i want to cry",
    "so tired",
    "想哭",
    "好累",
    "撑不住",
    "no one cares",
];
const ANGRY_ATTACK: &[&str] = &["shut up", "get lost", "闭嘴", "滚开", "去死", "you idiot"];
const PLAYFUL: &[&str] = &["hehe", "嘿嘿", "嘻嘻", "~", "(≧▽≦)", "owo", "uwu"];

const NEGATIONS: &[&str] = &[
    "not ", "don't ", "dont ", "never ", "no ", "isn't ", "wasn't ", "aren't ", "not so ", "不",
    "没", "别", "并非", "ない",
];
const DELIMITERS: &[char] = &[',', '.', '!', '?', ';', '，', '。', '！', '？', '；', '\n'];
const CONTRASTS: &[&str] = &["but ", "however", "但是", "可是", "不过", "でも"];

fn negated(lower: &str, at: usize) -> bool {
    let before = &lower[..at];
    let start = before
        .char_indices()
        .rev()
        .nth(13)
        .map(|(i, _)| i)
        .unwrap_or(0);
    let mut window = &before[start..];
    if let Some(p) = window.rfind(DELIMITERS) {
        window = &window[p..];
    }
    for c in CONTRASTS {
        if let Some(p) = window.rfind(c) {
            window = &window[p + c.len()..];
        }
    }
    NEGATIONS.iter().any(|n| window.contains(n))
}

fn hits(lower: &str, words: &[&str]) -> u32 {
    let mut n = 0;
    for w in words {
        let mut from = 0;
        while let Some(p) = lower[from..].find(w) {
            let at = from + p;
            let ascii = w.is_ascii();
            let boundary_ok = !ascii || {
                let pre = lower[..at].chars().next_back();
                !pre.is_some_and(|c| c.is_ascii_alphanumeric())
            };
            if boundary_ok && !negated(lower, at) {
                n += 1;
            }
            from = at + w.len().max(1);
        }
    }
    n
}

/// Keyword scoring: the best emotion and its score (`neutral`, 0 when nothing matched).
pub fn heuristic(text: &str) -> (String, u32) {
    let lower = text.to_lowercase();
    let mut scores = [
        hits(&lower, HAPPY),
        hits(&lower, SAD),
        hits(&lower, ANGRY),
        hits(&lower, SURPRISED),
    ];
    for p in ["!!", "！？", "!?", "?!", "??", "？？", "？！"] {
        if lower.contains(p) {
            scores[3] += 1;
        }
    }
    let vulnerable = hits(&lower, SAD_VULNERABLE);
    let attack = hits(&lower, ANGRY_ATTACK);
    scores[1] += 2 * vulnerable;
    scores[2] += 2 * attack;
    let playful = PLAYFUL.iter().filter(|p| lower.contains(*p)).count() as u32;
    if playful > 0 {
        if vulnerable == 0 && attack == 0 && scores[1] == 0 {
            scores[0] += playful;
        } else if scores[1] > 0 {
            scores[1] += 1;
        }
    }
    let mut best = 0;
    for i in 1..4 {
        if scores[i] > scores[best] {
            best = i;
        }
    }
    if scores[best] == 0 {
        ("neutral".into(), 0)
    } else {
        (LABELS[best].into(), scores[best])
    }
}

// ------------------------------------------------------------ label aliases

const ALIASES: &[(&str, &[&str])] = &[
    (
        "happy",
        &[
            "happy",
            "happiness",
            "joy",
            "joyful",
            "glad",
            "cheerful",
            "excited",
            "delighted",
            "content",
            "pleased",
            "love",
            "开心",
            "高兴",
            "快乐",
            "喜悦",
            "愉快",
            "兴奋",
            "嬉しい",
            "喜び",
            "楽しい",
            "행복",
            "기쁨",
            "радость",
            "счастье",
        ],
    ),
    (
        "sad",
        &[
            "sad",
            "sadness",
            "unhappy",
            "upset",
            "depressed",
            "sorrow",
            "lonely",
            "grief",
            "melancholy",
            "crying",
            "难过",
            "伤心",
            "悲伤",
            "失落",
            "悲しい",
            "悲しみ",
            "寂しい",
            "슬픔",
            "грусть",
        ],
    ),
    (
        "angry",
        &[
            "angry",
            "anger",
            "mad",
            "furious",
            "annoyed",
            "irritated",
            "rage",
            "frustrated",
            "生气",
            "愤怒",
            "恼火",
            "怒り",
            "怒",
            "화남",
            "분노",
            "злость",
            "гнев",
        ],
    ),
    (
        "surprised",
        &[
            "surprised",
            "surprise",
            "shocked",
            "amazed",
            "astonished",
            "startled",
            "惊讶",
            "吃惊",
            "震惊",
            "意外",
            "驚き",
            "びっくり",
            "놀람",
            "удивление",
        ],
    ),
    (
        "neutral",
        &[
            "neutral",
            "calm",
            "normal",
            "none",
            "plain",
            "平静",
            "中性",
            "普通",
            "一般",
            "平常",
            "中立",
            "무표정",
            "нейтрально",
        ],
    ),
];

fn levenshtein(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

fn ratio(a: &str, b: &str) -> f64 {
    let longest = a.chars().count().max(b.chars().count());
    if longest == 0 {
        return 1.0;
    }
    1.0 - levenshtein(a, b) as f64 / longest as f64
}

/// Map a raw model label to a canonical one.
pub fn normalize_label(raw: &str, confidence: f64) -> String {
    let spaced: String = raw
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_whitespace() || c == '-' || c == '_' {
                ' '
            } else {
                c
            }
        })
        .collect();
    let spaced = spaced.split_whitespace().collect::<Vec<_>>().join(" ");
    let find = |s: &str| {
        ALIASES
            .iter()
            .find(|(_, al)| al.contains(&s))
            .map(|(l, _)| l.to_string())
    };
    if let Some(l) = find(&spaced) {
        return l;
    }
    let compact: String = spaced.chars().filter(|c| c.is_alphanumeric()).collect();
    if let Some(l) = find(&compact) {
        return l;
    }
    if ["not ", "no ", "不", "没"]
        .iter()
        .any(|n| spaced.starts_with(n))
    {
        return "neutral".into();
    }
    // Scan: a named emotion wins over neutral, then the earliest, then the longest.
    let mut best: Option<(bool, usize, usize, &str)> = None;
    for (label, al) in ALIASES {
        for a in *al {
            if a.is_ascii() && a.len() < 3 {
                continue;
            }
            if let Some(pos) = spaced.find(a) {
                let key = (*label == "neutral", pos, usize::MAX - a.len(), *label);
                if best.is_none_or(|b| key < b) {
                    best = Some(key);
                }
            }
        }
    }
    if let Some((_, _, _, l)) = best {
        return l.to_string();
    }
    let cutoff = if confidence >= 0.72 { 0.74 } else { 0.88 };
    let mut fuzzy: Option<(f64, &str)> = None;
    for (label, al) in ALIASES {
        for a in *al {
            let r = ratio(&compact, a);
            if r >= cutoff && fuzzy.is_none_or(|f| r > f.0) {
                fuzzy = Some((r, label));
            }
        }
    }
    if let Some((_, l)) = fuzzy {
        return l.to_string();
    }
    "neutral".into()
}

/// Confidence from a model value: non-finite → 0.5, clamped to [0,1], missing → 0.5.
pub fn normalize_confidence(v: Option<&Value>) -> f64 {
    let f = match v {
        Some(Value::Number(n)) => n.as_f64().unwrap_or(0.5),
        Some(Value::String(s)) => s.trim().parse::<f64>().unwrap_or(0.5),
        _ => 0.5,
    };
    if f.is_finite() {
        f.clamp(0.0, 1.0)
    } else {
        0.5
    }
}

/// The JSON object of a model reply (whole, fenced or embedded in prose).
pub fn parse_reply(reply: &str) -> Option<Value> {
    companiond_core::text::reply_json_object(reply).map(Value::Object)
}

fn round3(f: f64) -> f64 {
    (f * 1000.0).round() / 1000.0
}

/// Combine a parsed model reply with the heuristic: the heuristic overrides a weak or
/// neutral model answer when it found clear keywords.
pub fn combine(text: &str, reply: Option<&Value>) -> Outcome {
    let (h, s) = heuristic(text);
    let sf = f64::from(s);
    let Some(obj) = reply.and_then(Value::as_object) else {
        let (emotion, confidence) = if s == 0 {
            ("neutral".to_string(), 0.5)
        } else {
            (h, (0.34 + 0.1 * sf).min(0.62))
        };
        return Outcome {
            emotion,
            confidence: round3(confidence),
            source: "heuristic",
            error: None,
        };
    };
    let c = normalize_confidence(obj.get("confidence"));
    let raw = obj.get("emotion").and_then(Value::as_str).unwrap_or("");
    let m = normalize_label(raw, c);
    let (mut emotion, mut confidence, mut source) = (m.clone(), c, "model");
    if s > 0 && h != m && s >= 4 && c < 0.8 {
        (emotion, confidence) = (h, c.max((0.44 + 0.07 * sf).min(0.86)));
        source = "model+heuristic";
    } else if h == "sad" && m == "happy" && s >= 2 {
        (emotion, confidence) = (h, c.max((0.5 + 0.08 * sf).min(0.84)));
        source = "model+heuristic";
    } else if s > 0 && m == "neutral" && c < 0.6 {
        (emotion, confidence) = (h, c.max((0.42 + 0.12 * sf).min(0.78)));
        source = "model+heuristic";
    } else if s > 0 && c < 0.25 {
        (emotion, confidence) = (h, c.max((0.35 + 0.1 * sf).min(0.65)));
        source = "model+heuristic";
    }
    if confidence < 0.2 {
        emotion = "neutral".into();
    }
    Outcome {
        emotion,
        confidence: round3(confidence),
        source,
        error: None,
    }
}

const SYSTEM_PROMPT: &str = "You classify the emotion of a short chat message. Answer with JSON only: \
{\"emotion\": \"happy\" | \"sad\" | \"angry\" | \"surprised\" | \"neutral\", \"confidence\": a number from 0 to 1}.";

/// Analyse `text` with the model (optional per-request key/model override).
pub async fn analyse(
    st: &AppState,
    text: &str,
    character: &str,
    api_key: Option<String>,
    model: Option<String>,
) -> Outcome {
    let text: String = text.chars().take(MAX_TEXT).collect();
    if text.trim().is_empty() {
        return Outcome {
            emotion: "neutral".into(),
            confidence: 0.5,
            source: "blank",
            error: None,
        };
    }
    let Some(mut ep) = st.llm.endpoint(Slot::Emotion).await else {
        let mut o = combine(&text, None);
        let e = LlmError::NotConfigured;
        o.error = Some((e.code().into(), e.to_string()));
        return o;
    };
    if let Some(k) = api_key.filter(|k| !k.trim().is_empty()) {
        ep.api_key = k.trim().to_string();
    }
    if let Some(m) = model.filter(|m| !m.trim().is_empty()) {
        ep.model = m.trim().to_string();
    }
    let opts = model::options(character, Duration::from_secs(30), 0.3, Some(40));
    let msgs = model::one_shot(SYSTEM_PROMPT, text.clone());
    match st
        .llm
        .complete_at(&ep, Slot::Emotion, &msgs, &[], &opts)
        .await
    {
        Ok(c) => match parse_reply(&c.content) {
            Some(v) => combine(&text, Some(&v)),
            // Not "no model": the model answered something unusable.
            None => {
                let mut o = combine(&text, None);
                o.error = Some((
                    "unusable_answer".into(),
                    "the emotion model's answer is not the expected JSON".into(),
                ));
                o
            }
        },
        Err(e) => Outcome {
            emotion: "neutral".into(),
            confidence: 0.0,
            source: "failed",
            error: Some((e.code().into(), format!("emotion analysis failed: {e}"))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn heuristic_scores() {
        assert_eq!(heuristic("I am so happy today, haha").0, "happy");
        assert_eq!(heuristic("I'm not happy").0, "neutral");
        assert_eq!(heuristic("我好难过，想哭").0, "sad");
        assert_eq!(heuristic("shut up, I hate this").0, "angry");
        assert_eq!(heuristic("what?!").0, "surprised");
        assert_eq!(heuristic("the table is brown").1, 0);
        assert_eq!(heuristic("我不开心").0, "neutral");
    }

    #[test]
    fn labels() {
        assert_eq!(normalize_label("Joyful", 0.9), "happy");
        assert_eq!(normalize_label("  SAD ", 0.9), "sad");
        assert_eq!(normalize_label("生气", 0.9), "angry");
        assert_eq!(normalize_label("not happy", 0.9), "neutral");
        assert_eq!(normalize_label("very surprised!", 0.9), "surprised");
        assert_eq!(normalize_label("hapy", 0.9), "happy");
        assert_eq!(normalize_label("qwertyuiop", 0.9), "neutral");
        assert_eq!(normalize_label("calm but happy", 0.9), "happy");
    }

    #[test]
    fn a_trailing_comma_keeps_the_answer() {
        let v = parse_reply("{\"emotion\": \"sad\", \"confidence\": 0.8,}").unwrap();
        assert_eq!(v["emotion"], "sad");
    }

    #[test]
    fn combining() {
        let o = combine(
            "nice weather",
            Some(&json!({"emotion": "happy", "confidence": 0.9})),
        );
        assert_eq!((o.emotion.as_str(), o.confidence), ("happy", 0.9));
        let o = combine(
            "I am so happy haha",
            Some(&json!({"emotion": "neutral", "confidence": 0.3})),
        );
        assert_eq!(o.emotion, "happy");
        let o = combine(
            "plain words",
            Some(&json!({"emotion": "happy", "confidence": 0.1})),
        );
        assert_eq!(o.emotion, "neutral");
        let o = combine("plain words", None);
        assert_eq!((o.emotion.as_str(), o.confidence), ("neutral", 0.5));
        let o = combine("so sad, crying", None);
        assert_eq!(o.emotion, "sad");
        assert!(o.confidence <= 0.62);
        assert_eq!(normalize_confidence(Some(&json!(7))), 1.0);
        assert_eq!(normalize_confidence(Some(&json!("x"))), 0.5);
        assert_eq!(
            parse_reply("```json\n{\"emotion\":\"sad\"}\n```").unwrap()["emotion"],
            "sad"
        );
        assert_eq!(parse_reply("sure: {\"a\":1} ok").unwrap()["a"], 1);
        assert!(parse_reply("nothing").is_none());
    }

    #[test]
    fn replies_that_are_not_objects_fall_back_to_the_heuristic() {
        assert!(parse_reply("[1, 2]").is_none());
        assert!(parse_reply("\"happy\"").is_none());
        assert_eq!(
            parse_reply("```JSON\n{\"emotion\":\"angry\",\"confidence\":0.9}\n```").unwrap()
                ["emotion"],
            "angry"
        );
        let o = combine("so sad, crying", parse_reply("\"happy\"").as_ref());
        assert_eq!((o.emotion.as_str(), o.source), ("sad", "heuristic"));
    }
}

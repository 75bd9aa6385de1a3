//! Text as the index sees it: tokenising (lowercased words with plural
//! forms folded, CJK one character per token), search terms, and the plan of
//! a search (terms pruned by document frequency).

use rusqlite::{params, Connection};

use super::db_err;

/// Is `c` written without spaces between words (Chinese, Japanese, Korean)?
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF
        | 0xAC00..=0xD7AF | 0x20000..=0x2FA1F)
}

/// A light English stemmer (plural forms) for ASCII words; others unchanged.
pub fn stem(w: &str) -> String {
    let n = w.len();
    if !w.is_ascii() || n <= 3 {
        return w.to_string();
    }
    if n > 4 && w.ends_with("ies") {
        return format!("{}y", &w[..n - 3]);
    }
    if w.ends_with("sses") {
        return w[..n - 2].to_string();
    }
    if w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        return w[..n - 1].to_string();
    }
    w.to_string()
}

enum Tok {
    /// A lowercased word (not stemmed).
    Word(String),
    Cjk(char),
}

fn tokens(text: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if is_cjk(c) {
            if !word.is_empty() {
                out.push(Tok::Word(std::mem::take(&mut word)));
            }
            out.push(Tok::Cjk(c));
        } else if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        } else if !word.is_empty() {
            out.push(Tok::Word(std::mem::take(&mut word)));
        }
    }
    if !word.is_empty() {
        out.push(Tok::Word(word));
    }
    out
}

/// The text as indexed: lowercased, stemmed words and CJK characters as
/// separate tokens, space-separated (the FTS5 tokenizer only splits it).
pub fn fts_body(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for t in tokens(text) {
        if !out.is_empty() {
            out.push(' ');
        }
        match t {
            Tok::Word(w) => out.push_str(&stem(&w)),
            Tok::Cjk(c) => out.push(c),
        }
    }
    out
}

const STOPWORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "been", "but", "by", "can", "could", "did", "do", "does", "for", "from", "had", "has",
    "have", "he", "her", "here", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its",
    "just", "me", "my", "no", "not", "of", "on", "or", "our", "please", "really", "remember",
    "she", "so", "some", "tell", "than", "that", "the", "their", "them", "then", "there", "these",
    "they", "this", "to", "told", "too", "us", "very", "was", "we", "were", "what", "when",
    "where", "which", "who", "why", "will", "with", "would", "yes", "you", "your",
];

/// Most terms of one query.
pub const MAX_TERMS: usize = 16;
/// Rows one BM25 search ranks at most: the rarest terms are kept while
/// their document frequencies add up to this (terms more common than that
/// carry little weight in BM25 anyway); when every term is more common, the
/// newest matches are returned instead (no ranking).
pub const POSTINGS_BUDGET: i64 = 2000;

/// A search term: a stemmed word, or one or two CJK characters (a phrase).
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    Word(String),
    Cjk(Vec<char>),
}

impl Term {
    fn quoted(&self) -> String {
        match self {
            Term::Word(w) => format!("\"{w}\""),
            Term::Cjk(c) => format!(
                "\"{}\"",
                c.iter().map(char::to_string).collect::<Vec<_>>().join(" ")
            ),
        }
    }
}

/// The search terms of free text (stopwords and one-letter words dropped,
/// CJK runs as character bigrams), without repeats.
pub fn terms(text: &str) -> Vec<Term> {
    let mut out: Vec<Term> = Vec::new();
    let mut push = |t: Term, out: &mut Vec<Term>| {
        if !out.contains(&t) && out.len() < MAX_TERMS {
            out.push(t);
        }
    };
    let mut run: Vec<char> = Vec::new();
    let flush =
        |run: &mut Vec<char>, out: &mut Vec<Term>, push: &mut dyn FnMut(Term, &mut Vec<Term>)| {
            match run.len() {
                0 => {}
                1 => push(Term::Cjk(vec![run[0]]), out),
                _ => {
                    for w in run.windows(2) {
                        push(Term::Cjk(w.to_vec()), out);
                    }
                }
            }
            run.clear();
        };
    for t in tokens(text) {
        match t {
            Tok::Cjk(c) => run.push(c),
            Tok::Word(w) => {
                flush(&mut run, &mut out, &mut push);
                if w.chars().count() >= 2 && !STOPWORDS.contains(&w.as_str()) {
                    push(Term::Word(stem(&w)), &mut out);
                }
            }
        }
    }
    flush(&mut run, &mut out, &mut push);
    out
}

/// An FTS5 query with every term of the text OR-ed; `None` when the text has
/// no searchable term.
pub fn fts_query(text: &str) -> Option<String> {
    let t = terms(text);
    (!t.is_empty()).then(|| t.iter().map(Term::quoted).collect::<Vec<_>>().join(" OR "))
}

/// How to run a text search.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// The text has no searchable term (list instead).
    NoTerms,
    /// No term occurs in the index: nothing can match.
    NoMatch,
    /// Rank the matches of this expression by BM25.
    Ranked(String),
    /// Every term is very common: the newest matches of this expression.
    Newest(String),
}

/// Rows matching `term` in the FTS table `fts`, counted up to `cap + 1`.
fn doc_freq(conn: &Connection, fts: &str, term: &str, cap: i64) -> Result<i64, String> {
    let sql = format!("SELECT count(*) FROM (SELECT 1 FROM {fts} WHERE {fts} MATCH ?1 LIMIT ?2)");
    conn.prepare_cached(&sql)
        .map_err(db_err)?
        .query_row(params![term, cap + 1], |r| r.get::<_, i64>(0))
        .map_err(db_err)
}

/// Plan a search of `text` in the FTS table `fts` (`memory_docs_fts` /
/// `memory_lines_fts`): terms that occur nowhere are dropped, then the
/// rarest are kept within [`POSTINGS_BUDGET`] (document frequencies are
/// counted only up to it, so planning is cheap whatever the index size).
pub fn plan(conn: &Connection, fts: &str, text: &str) -> Result<Plan, String> {
    let ts = terms(text);
    if ts.is_empty() {
        return Ok(Plan::NoTerms);
    }
    let mut scored: Vec<(i64, String)> = Vec::new();
    for t in &ts {
        let q = t.quoted();
        let df = doc_freq(conn, fts, &q, POSTINGS_BUDGET)?;
        if df > 0 {
            scored.push((df, q));
        }
    }
    if scored.is_empty() {
        return Ok(Plan::NoMatch);
    }
    scored.sort_by_key(|(df, _)| *df);
    let join = |v: &[(i64, String)]| {
        v.iter()
            .map(|(_, q)| q.as_str())
            .collect::<Vec<_>>()
            .join(" OR ")
    };
    if scored[0].0 > POSTINGS_BUDGET {
        return Ok(Plan::Newest(join(&scored)));
    }
    let mut used = 0;
    let mut keep = 0;
    for (df, _) in &scored {
        if keep > 0 && used + df > POSTINGS_BUDGET {
            break;
        }
        used += df;
        keep += 1;
    }
    Ok(Plan::Ranked(join(&scored[..keep])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::testutil::tmp;
    use crate::index::*;

    #[test]
    fn queries() {
        assert_eq!(
            fts_query("What is my cat's name?").as_deref(),
            Some("\"cat\" OR \"name\"")
        );
        assert_eq!(fts_query("  ?? the a").as_deref(), None);
        assert_eq!(
            fts_query("我喜欢猫").as_deref(),
            Some("\"我 喜\" OR \"喜 欢\" OR \"欢 猫\"")
        );
        assert_eq!(fts_query("AND OR NEAR").as_deref(), Some("\"near\""));
        assert_eq!(fts_body("我a猫"), "我 a 猫");
        assert_eq!(
            fts_body("The user's Cats, ladies & glasses!"),
            "the user s cat lady glass"
        );
        assert_eq!(stem("bus"), "bus");
        assert_eq!(stem("paris"), "paris");
    }

    #[test]
    fn common_terms_are_pruned() {
        let d = tmp();
        let mut c = open(&d).unwrap();
        let tx = c.transaction().unwrap();
        for i in 0..5000 {
            let word = if i < 3 { "rare" } else { "other" };
            let doc = Doc {
                kind: "fact",
                id: format!("f{i}"),
                entity: "master".into(),
                text: format!("common words {word}"),
                ts: i,
            };
            upsert_doc(&tx, &doc).unwrap();
        }
        tx.commit().unwrap();
        let p = |t: &str| plan(&c, "memory_docs_fts", t).unwrap();
        let r = |m: &str| Plan::Ranked(m.into());
        assert_eq!(p("common rare"), r("\"rare\""));
        assert_eq!(p("common"), Plan::Newest("\"common\"".into()));
        assert_eq!(
            p("common others"),
            Plan::Newest("\"common\" OR \"other\"".into())
        );
        assert_eq!(p("absent"), Plan::NoMatch);
        assert_eq!(p("the"), Plan::NoTerms);
        let q = Query {
            text: "common rare".into(),
            limit: 10,
            ..Default::default()
        };
        assert_eq!(search_docs(&c, &q, &["fact"]).unwrap().len(), 3);
        assert_eq!(count_docs(&c, &q, "fact").unwrap(), 3);
        let _ = std::fs::remove_dir_all(d);
    }
}

//! Search latency over a large memory: 100,000 facts and 1,000,000 history
//! lines in one character's `time_indexed.db`
//! (`cargo bench -p companiond-memory --bench search`).
//!
//! The text is synthetic: a 30,000-word vocabulary drawn with a Zipf
//! distribution (s = 1.07, like natural text) plus English function words, so
//! common words match a large share of the rows. Queries are chat messages
//! of the same distribution (4–9 words). Measured per query shape:
//! * `context`: what a chat turn runs (persona, 12 relevant facts/reflections,
//!   6 newest);
//! * `facts`: BM25 over facts and reflections (the search route's default);
//! * `lines`: BM25 over the history lines;
//! * `recall`: the `recall_memory` tool (facts, reflections, lines, fused);
//! * `window`: lines of a 7-day window matching the words.
//!
//! With vectors (every doc embedded, random unit vectors of
//! `COMPANIOND_BENCH_DIM` dimensions, default 768; the query vector is given,
//! as if the embedding endpoint had answered):
//! * `vector`: the cosine ranking alone (newest `vectors::SCAN` of facts and
//!   of reflections, plus the BM25 hits);
//! * `context+v`: `context` plus the vector list (what a chat turn runs);
//! * `facts+v`: `facts` fused with the vector list (the search route).
//!
//! `COMPANIOND_BENCH_DIR=<dir>` keeps (and reuses) the database there.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use companiond_memory::index::{self, Doc, Query};
use companiond_memory::longterm::{search_blocking, search_fused};
use companiond_memory::vectors::{self, QueryVector};

const FACTS: usize = 100_000;
const LINES: usize = 1_000_000;
const QUERIES: usize = 300;
const VOCAB: usize = 30_000;
const DAY: i64 = 86_400_000;
/// Three years of history ending now.
const SPAN: i64 = 3 * 365 * DAY;

const FUNCTION_WORDS: &[&str] = &[
    "the", "and", "i", "you", "to", "a", "it", "is", "that", "of", "in", "my", "me", "we", "do",
    "what", "so", "just", "was", "for", "with", "have", "about", "this", "like", "today", "really",
];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct Words {
    vocab: Vec<String>,
    cdf: Vec<f64>,
}

impl Words {
    fn new(rng: &mut Rng) -> Words {
        const SYL: &[&str] = &[
            "ka", "lo", "mi", "ren", "sa", "to", "vel", "na", "ri", "po", "su", "de", "ban", "fi",
            "go", "hu", "jen", "mar", "ol", "tri", "ze", "qua", "bry", "cel", "dun",
        ];
        let mut vocab = Vec::with_capacity(VOCAB);
        let mut seen = std::collections::HashSet::new();
        while vocab.len() < VOCAB {
            let n = 2 + rng.below(3);
            let w: String = (0..n).map(|_| SYL[rng.below(SYL.len())]).collect();
            if seen.insert(w.clone()) {
                vocab.push(w);
            }
        }
        let mut cdf = Vec::with_capacity(VOCAB);
        let mut acc = 0.0;
        for r in 1..=VOCAB {
            acc += 1.0 / (r as f64).powf(1.07);
            cdf.push(acc);
        }
        for c in &mut cdf {
            *c /= acc;
        }
        Words { vocab, cdf }
    }
    fn word(&self, rng: &mut Rng) -> &str {
        let u = rng.unit();
        let i = self.cdf.partition_point(|c| *c < u).min(VOCAB - 1);
        &self.vocab[i]
    }
    fn sentence(&self, rng: &mut Rng, min: usize, max: usize) -> String {
        let n = min + rng.below(max - min + 1);
        let mut out: Vec<&str> = Vec::with_capacity(n);
        for _ in 0..n {
            if rng.below(10) < 4 {
                out.push(FUNCTION_WORDS[rng.below(FUNCTION_WORDS.len())]);
            } else {
                out.push(self.word(rng));
            }
        }
        out.join(" ")
    }
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let words = Words::new(&mut rng);
    let (dir, _keep) = match std::env::var_os("COMPANIOND_BENCH_DIR") {
        Some(d) => (PathBuf::from(d), None),
        None => {
            let t = tempfile::tempdir().expect("tempdir");
            (t.path().to_path_buf(), Some(t))
        }
    };
    std::fs::create_dir_all(&dir).expect("bench dir");
    let now = companiond_core::now_millis();
    let mut conn = index::open(&dir).expect("open the index");
    let have: i64 = conn
        .query_row("SELECT count(*) FROM memory_lines", [], |r| r.get(0))
        .expect("count");
    if have < LINES as i64 {
        let t = Instant::now();
        let tx = conn.transaction().expect("tx");
        for i in 0..FACTS {
            let d = Doc {
                kind: if i % 10 == 0 { "reflection" } else { "fact" },
                id: format!("fact_{i:07}"),
                entity: "master".into(),
                text: format!("The user {}", words.sentence(&mut rng, 5, 11)),
                ts: now - SPAN + (i as i64 * SPAN / FACTS as i64),
            };
            index::upsert_doc(&tx, &d).expect("doc");
        }
        tx.commit().expect("commit");
        let facts_time = t.elapsed();
        let t = Instant::now();
        for chunk in 0..(LINES / 50_000) {
            let tx = conn.transaction().expect("tx");
            for j in 0..50_000 {
                let i = chunk * 50_000 + j;
                let speaker = if i % 2 == 0 { "human" } else { "ai" };
                let text = words.sentence(&mut rng, 6, 24);
                let ts = now - SPAN + (i as i64 * SPAN / LINES as i64);
                index::insert_line(&tx, speaker, &text, ts).expect("line");
            }
            tx.commit().expect("commit");
        }
        let lines_time = t.elapsed();
        conn.execute_batch(
            "INSERT INTO memory_lines_fts(memory_lines_fts) VALUES ('optimize');
             INSERT INTO memory_docs_fts(memory_docs_fts) VALUES ('optimize');",
        )
        .expect("optimize");
        println!(
            "built: {FACTS} facts in {:.1} s, {LINES} lines in {:.1} s",
            facts_time.as_secs_f64(),
            lines_time.as_secs_f64()
        );
    }
    let dim: usize = std::env::var("COMPANIOND_BENCH_DIM")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(768);
    let model = format!("bench-{dim}");
    let mut vrng = Rng(0xD1B5_4A32_D192_ED03);
    let mut random_vec = |n: usize| -> Vec<f32> {
        let v: Vec<f32> = (0..n)
            .map(|_| (vrng.unit() + vrng.unit() + vrng.unit() - 1.5) as f32)
            .collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / norm).collect()
    };
    let (have_v, docs) = vectors::coverage(&conn, &model).expect("coverage");
    if have_v < docs {
        let t = Instant::now();
        loop {
            let batch = vectors::pending(&conn, &model, 5000).expect("pending");
            if batch.is_empty() {
                break;
            }
            let rows: Vec<(i64, String, Vec<f32>)> = batch
                .into_iter()
                .map(|(id, sig, _)| (id, sig, random_vec(dim)))
                .collect();
            vectors::store(&mut conn, &model, &rows).expect("store");
        }
        println!(
            "built: {docs} vectors of {dim} dimensions in {:.1} s",
            t.elapsed().as_secs_f64()
        );
    }
    drop(conn);
    let size = std::fs::metadata(dir.join("time_indexed.db"))
        .map(|m| m.len())
        .unwrap_or(0);
    println!("database: {:.0} MiB", size as f64 / (1024.0 * 1024.0));

    // A fresh connection, as after a restart (cold statement cache).
    let conn = index::open(&dir).expect("open the index");
    let queries: Vec<String> = (0..QUERIES)
        .map(|_| words.sentence(&mut rng, 4, 9))
        .collect();
    let qvecs: std::collections::HashMap<&str, QueryVector> = queries
        .iter()
        .map(|t| {
            (
                t.as_str(),
                QueryVector {
                    model: model.clone(),
                    vec: std::sync::Arc::new(random_vec(dim)),
                },
            )
        })
        .collect();
    let qv = |t: &str| qvecs.get(t).expect("query vector");
    let q = |text: &str, limit: usize| Query {
        text: text.to_string(),
        limit,
        ..Default::default()
    };
    type Shape<'a> = (&'a str, Box<dyn Fn(&str) -> usize + 'a>);
    let shapes: Vec<Shape> = vec![
        (
            "context",
            Box::new(|t: &str| {
                let p = index::search_docs(&conn, &q("", 200), &["persona"]).expect("persona");
                let r = index::search_docs(&conn, &q(t, 12), &["fact", "reflection"]).expect("rel");
                let n = index::search_docs(&conn, &q("", 6), &["fact", "reflection"]).expect("new");
                p.len() + r.len() + n.len()
            }),
        ),
        (
            "facts",
            Box::new(|t: &str| {
                search_blocking(&conn, &q(t, 20), &["fact", "reflection"])
                    .expect("facts")
                    .len()
            }),
        ),
        (
            "lines",
            Box::new(|t: &str| index::search_lines(&conn, &q(t, 20)).expect("lines").len()),
        ),
        (
            "recall",
            Box::new(|t: &str| {
                search_blocking(&conn, &q(t, 8), &["fact", "reflection", "line"])
                    .expect("recall")
                    .len()
            }),
        ),
        (
            "window",
            Box::new(|t: &str| {
                let w = Query {
                    since: Some(now - 30 * DAY),
                    until: Some(now - 23 * DAY),
                    ..q(t, 8)
                };
                index::search_lines(&conn, &w).expect("window").len()
            }),
        ),
        (
            "vector",
            Box::new(|t: &str| {
                vectors::search(&conn, &q("", 12), &["fact", "reflection"], qv(t), &[])
                    .expect("vector")
                    .len()
            }),
        ),
        (
            "context+v",
            Box::new(|t: &str| {
                let p = index::search_docs(&conn, &q("", 200), &["persona"]).expect("persona");
                let r = index::search_docs(&conn, &q(t, 12), &["fact", "reflection"]).expect("rel");
                let v = vectors::search(&conn, &q("", 12), &["fact", "reflection"], qv(t), &r)
                    .expect("vector");
                let n = index::search_docs(&conn, &q("", 6), &["fact", "reflection"]).expect("new");
                p.len() + r.len() + v.len() + n.len()
            }),
        ),
        (
            "facts+v",
            Box::new(|t: &str| {
                search_fused(&conn, &q(t, 20), &["fact", "reflection"], Some(qv(t)))
                    .expect("facts")
                    .len()
            }),
        ),
    ];
    println!("{QUERIES} queries per shape (4-9 words each):");
    for (name, f) in &shapes {
        // Warm-up pass over a few queries.
        for t in queries.iter().take(10) {
            f(t);
        }
        let mut times = Vec::with_capacity(QUERIES);
        let mut found = 0;
        for t in &queries {
            let s = Instant::now();
            found += f(t);
            times.push(s.elapsed());
        }
        let p50 = pct(&mut times, 0.5);
        let p95 = pct(&mut times, 0.95);
        let max = pct(&mut times, 1.0);
        println!(
            "  {name:8} p50 {:>9}  p95 {:>9}  max {:>9}  ({:.1} results/query)",
            ms(p50),
            ms(p95),
            ms(max),
            found as f64 / QUERIES as f64
        );
    }
}

use super::*;

fn song(id: &str, md5: &str, builtin: bool) -> Song {
    serde_json::from_value(
        json!({"id": id, "name": id, "audio": format!("songs/{id}.mp3"),
        "audioMd5": md5, "audioFormat": "mp3", "isBuiltin": builtin}),
    )
    .unwrap()
}

fn action(id: &str, md5: &str, format: &str) -> Action {
    serde_json::from_value(
        json!({"id": id, "name": id, "file": format!("actions/{id}.{format}"),
        "fileMd5": md5, "format": format}),
    )
    .unwrap()
}

fn bundle() -> BundleDoc {
    let mut b = BundleDoc::default();
    b.songs.insert("b1".into(), song("b1", "m-b1", true));
    b.actions.insert("ba".into(), action("ba", "m-ba", "vmd"));
    b.bindings
        .entry("b1".into())
        .or_default()
        .insert("ba".into(), Binding { offset: 3 });
    b.normalise()
}

#[test]
fn merge_split_round_trip_keeps_only_user_data() {
    let b = bundle();
    let mut lib = Library::merge(&b, &UserDoc::default());
    assert!(lib.songs.get("b1").unwrap().is_builtin);
    assert_eq!(lib.md5.songs["m-b1"], "b1");
    let untouched = lib.split(&b);
    assert!(untouched.songs.is_empty() && untouched.bindings.is_empty());
    assert!(untouched.builtin_overrides.songs.is_empty());

    lib.insert_song(song("u1", "m-u1", false));
    lib.insert_action(action("ua", "m-ua", "bvh"));
    lib.song_mut("b1").unwrap().visible = false;
    lib.unbind("b1", "ba");
    lib.bind("u1", "ba", 7);
    let doc = lib.split(&b);
    assert_eq!(doc.songs.len(), 1);
    assert_eq!(doc.actions.len(), 1);
    assert_eq!(doc.builtin_overrides.songs["b1"]["visible"], json!(false));
    assert!(
        doc.bindings["b1"].is_empty(),
        "an emptied built-in binding map is kept"
    );
    let again = Library::merge(&b, &doc);
    assert_eq!(again, lib);
    assert_eq!(again.revision(), lib.revision());
}

#[test]
fn user_song_shadowing_a_bundled_id_keeps_its_own_empty_bindings() {
    let b = bundle();
    let mut lib = Library::merge(&b, &UserDoc::default());
    lib.insert_song(song("b1", "m-user", false));
    lib.unbind("b1", "ba");
    let doc = lib.split(&b);
    assert!(doc.bindings["b1"].is_empty());
    let again = Library::merge(&b, &doc);
    assert!(!again.bindings.contains_key("b1"));
    assert!(!again.songs.get("b1").unwrap().is_builtin);
}

#[test]
fn default_action_rule() {
    let mut lib = Library::merge(&bundle(), &UserDoc::default());
    lib.insert_action(action("v2", "m2", "vmd"));
    lib.insert_action(action("b3", "m3", "bvh"));
    lib.song_mut("b1").unwrap().default_action.clear();
    assert_eq!(lib.bind("b1", "v2", 0).unwrap(), "v2");
    assert_eq!(
        lib.bind("b1", "ba", 0).unwrap(),
        "v2",
        "same type keeps the default"
    );
    assert_eq!(
        lib.bind("b1", "b3", 0).unwrap(),
        "b3",
        "another type takes over"
    );
    assert_eq!(lib.unbind("b1", "b3").unwrap(), "");
    assert!(lib.unbind("b1", "b3").is_none());
}

#[test]
fn revision_is_stable_and_order_independent() {
    let b = bundle();
    let mut lib = Library::merge(&b, &UserDoc::default());
    lib.insert_song(song("u1", "m-u1", false));
    lib.insert_song(song("u2", "m-u2", false));
    // The same content inserted in the other order.
    let mut other = Library::merge(&b, &UserDoc::default());
    other.insert_song(song("u2", "m-u2", false));
    other.insert_song(song("u1", "m-u1", false));
    assert_eq!(lib.revision(), other.revision());
    assert_eq!(lib.revision().len(), 16);
    // Bindings of one song made in another order.
    lib.insert_action(action("v2", "m2", "vmd"));
    other.insert_action(action("v2", "m2", "vmd"));
    lib.bind("u1", "ba", 1);
    lib.bind("u1", "v2", 2);
    other.bind("u1", "v2", 2);
    other.bind("u1", "ba", 1);
    other.song_mut("u1").unwrap().default_action = "ba".into();
    assert_eq!(lib.revision(), other.revision());
    other.song_mut("b1").unwrap().name = "x".into();
    assert_ne!(lib.revision(), other.revision());
}

/// A small deterministic generator for the property tests.
struct Rng(u64);
impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// One random change through the tracked methods (as the routes make them).
fn random_change(lib: &mut Library, r: &mut Rng, n: u64) {
    let sid = format!("s{}", r.next(12));
    let aid = format!("a{}", r.next(6));
    match r.next(9) {
        0 => lib.insert_song(song(&sid, &format!("m-{}", r.next(14)), false)),
        1 => {
            let fmt = if r.next(2) == 0 { "vmd" } else { "bvh" };
            lib.insert_action(action(&aid, &format!("am-{}", r.next(8)), fmt));
        }
        2 => {
            lib.remove_song(&sid);
        }
        3 => {
            lib.remove_action(&aid);
        }
        4 => {
            lib.bind(&sid, &aid, n as i64);
        }
        5 => {
            lib.unbind(&sid, &aid);
        }
        6 => {
            if let Some(s) = lib.song_mut(&sid) {
                s.name = format!("renamed {n}");
                s.visible = n.is_multiple_of(2);
            }
        }
        7 => {
            if let Some(a) = lib.action_mut("ba") {
                a.visible = n.is_multiple_of(3);
            }
        }
        _ => {
            if let Some(s) = lib.song_mut("b1") {
                s.visible = n.is_multiple_of(2);
                s.default_action = String::new();
            }
        }
    }
}

#[test]
fn incremental_revision_index_and_journal_equal_a_full_recomputation() {
    let b = bundle();
    let mut r = Rng(0x2545_F491_4F6C_DD1D);
    let mut lib = Library::merge(&b, &UserDoc::default());
    let mut digest = Digest3::full(&lib);
    // What a restart would see: the base, with every journal line replayed.
    let base = lib.clone();
    let mut replayed = base.clone();
    for n in 0..3000u64 {
        let before = lib.clone();
        lib.begin();
        let k = 1 + r.next(3);
        for _ in 0..k {
            random_change(&mut lib, &mut r, n);
        }
        if n % 7 == 0 {
            // A failed change is undone completely.
            lib.rollback();
            assert_eq!(lib, before, "rollback at step {n}");
            assert_eq!(lib.md5, lib.full_md5_index());
            let _ = lib.finish();
            continue;
        }
        let changes = lib.finish();
        digest.update(&lib, &changes);
        assert_eq!(digest, Digest3::full(&lib), "digest at step {n}");
        assert_eq!(digest.revision(&lib.version), lib.revision());
        assert_eq!(lib.md5, lib.full_md5_index(), "md5 index at step {n}");
        assert!(lib.reverse_is_exact(), "reverse indexes at step {n}");
        // The journal line, written and read back, replays to the same state.
        let line: Vec<Value> = changes.ops(&lib).iter().map(JournalOp::to_json).collect();
        let line: Value = serde_json::from_str(&serde_json::to_string(&line).unwrap()).unwrap();
        for op in line.as_array().unwrap() {
            replayed.replay(&JournalOp::from_json(op).unwrap());
        }
        replayed.drop_dangling();
        replayed.reindex();
        assert_eq!(replayed, lib, "replay at step {n}");
    }
    // And the persisted document merges back to the same library.
    let again = Library::merge(&b, &lib.split(&b));
    assert_eq!(again.revision(), lib.revision());
}

#[test]
fn ids() {
    assert_eq!(sanitize_id("My Song: <live>.mp3"), "My_Song_live");
    assert_eq!(sanitize_id("???.mp3"), "unnamed");
    assert_eq!(sanitize_id(".mp3"), ".mp3");
    assert_eq!(unique_id("a", |c| c == "a" || c == "a_1"), "a_2");
    assert_eq!(extension("x.MP3"), "mp3");
    assert_eq!(file_stem("a.b.c"), "a.b");
}

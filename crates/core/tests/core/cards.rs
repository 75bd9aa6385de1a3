//! Character cards over HTTP: import of PNG/APNG (chunks written here), JSON
//! V1/V2/V3 and CHARX; every bad input a 400 that creates nothing; the prompt
//! each chat turn sends to a loopback model (greeting, example dialogue,
//! lorebook, post-history instructions); export round trips.

use std::io::Write;

use base64::Engine;
use companiond_core::testkit::{next_frame, quiet, Message, MockLlm, TestServer};
use futures::SinkExt;
use serde_json::{json, Value};

// ------------------------------------------------------------------ building files

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for b in bytes {
        crc ^= *b as u32;
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut out = (data.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut c = kind.to_vec();
    c.extend_from_slice(data);
    out.extend_from_slice(&crc32(&c).to_be_bytes());
    out
}

/// A 1×1 grey PNG with the given extra chunks before IEND (an `acTL` makes it an APNG).
fn png(extra: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    out.extend(chunk(b"IHDR", &[0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0]));
    // zlib stream of one row: filter 0, one grey byte (stored block).
    let row = [0u8, 0x80];
    let mut z = vec![0x78, 0x01, 1, 2, 0, 0xfd, 0xff];
    z.extend_from_slice(&row);
    let (mut a, mut b) = (1u32, 0u32);
    for x in row {
        a = (a + x as u32) % 65521;
        b = (b + a) % 65521;
    }
    z.extend_from_slice(&((b << 16) | a).to_be_bytes());
    out.extend(chunk(b"IDAT", &z));
    for c in extra {
        out.extend_from_slice(c);
    }
    out.extend(chunk(b"IEND", &[]));
    out
}

fn text(key: &str, value: &str) -> Vec<u8> {
    let mut d = key.as_bytes().to_vec();
    d.push(0);
    d.extend_from_slice(value.as_bytes());
    chunk(b"tEXt", &d)
}

fn b64(v: &Value) -> String {
    base64::engine::general_purpose::STANDARD.encode(v.to_string())
}

/// The text chunks of a PNG (keyword, text), checking the structure.
fn read_texts(png: &[u8]) -> Vec<(String, String)> {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let mut at = 8;
    let mut out = Vec::new();
    while at < png.len() {
        let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
        let kind = &png[at + 4..at + 8];
        let data = &png[at + 8..at + 8 + len];
        let crc = u32::from_be_bytes(png[at + 8 + len..at + 12 + len].try_into().unwrap());
        assert_eq!(crc32(&png[at + 4..at + 8 + len]), crc);
        if kind == b"tEXt" {
            let nul = data.iter().position(|b| *b == 0).unwrap();
            out.push((
                String::from_utf8(data[..nul].to_vec()).unwrap(),
                String::from_utf8(data[nul + 1..].to_vec()).unwrap(),
            ));
        }
        at += 12 + len;
    }
    out
}

fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes) in entries {
        z.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        z.write_all(bytes).unwrap();
    }
    z.finish().unwrap().into_inner()
}

fn v2(data: Value) -> Value {
    json!({"spec": "chara_card_v2", "spec_version": "2.0", "data": data})
}

fn v3(data: Value) -> Value {
    json!({"spec": "chara_card_v3", "spec_version": "3.0", "data": data})
}

// ------------------------------------------------------------------ HTTP helpers

const BOUNDARY: &str = "cardtestboundary7MA4YWxk";

async fn upload_part(s: &TestServer, part: &str, file_name: &str, bytes: &[u8]) -> (u16, Value) {
    let mut body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{part}\"; filename=\"{file_name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    let r = s
        .csrf(reqwest::Method::POST, "/api/characters/card/import")
        .header(
            "content-type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    companiond_core::testkit::split(r).await
}

async fn upload(s: &TestServer, file_name: &str, bytes: &[u8]) -> (u16, Value) {
    upload_part(s, "file", file_name, bytes).await
}

async fn get_bytes(s: &TestServer, path: &str) -> (u16, Vec<u8>, String) {
    let r = reqwest::get(s.url(path)).await.unwrap();
    let status = r.status().as_u16();
    let ct = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, r.bytes().await.unwrap().to_vec(), ct)
}

fn profile(s: &TestServer, name: &str) -> Value {
    s.state
        .characters
        .profile(name)
        .map_or(Value::Null, Value::from)
}

fn stored_data(s: &TestServer, name: &str) -> Value {
    profile(s, name)["_reserved"]["character_card"]["data"].clone()
}

// ------------------------------------------------------------------ import

#[tokio::test]
async fn imports_png_apng_json_and_charx_cards() {
    let s = TestServer::start(&[]).await;
    // PNG with both chunks: V3 wins.
    let both = png(&[
        text(
            "chara",
            &b64(&v2(json!({"name": "Old", "description": "v2"}))),
        ),
        text(
            "ccv3",
            &b64(&v3(
                json!({"name": "Mika", "description": "A cat.", "nickname": "Mimi",
                "tags": ["cat"], "extensions": {"x": {"y": 1}}, "unknown_field": 7}),
            )),
        ),
    ]);
    let (st, b) = upload(&s, "mika.png", &both).await;
    assert_eq!(st, 200, "{b}");
    assert_eq!(
        (
            b["name"].as_str(),
            b["spec"].as_str(),
            b["format"].as_str(),
            b["image"].as_bool()
        ),
        (Some("Mika"), Some("chara_card_v3"), Some("png"), Some(true))
    );
    let p = profile(&s, "Mika");
    assert_eq!(p["description"], "A cat.");
    assert_eq!(p["昵称"], "Mimi");
    assert_eq!(p["关键词"], json!(["cat"]));
    assert_eq!(stored_data(&s, "Mika")["extensions"]["x"]["y"], 1);
    assert_eq!(stored_data(&s, "Mika")["unknown_field"], 7);
    // The avatar image is the character's card image, byte for byte.
    let (st, img, ct) = get_bytes(&s, "/api/characters/card/Mika/image").await;
    assert_eq!((st, ct.as_str()), (200, "image/png"));
    assert_eq!(img, both);
    let (_, list) = s.get("/api/characters").await;
    assert!(list["猫娘"]["Mika"].is_object());

    // V2 chunk alone; an APNG (acTL chunk) the same way.
    let apng = png(&[
        chunk(b"acTL", &[0, 0, 0, 1, 0, 0, 0, 0]),
        text(
            "chara",
            &b64(&v2(json!({"name": "Rin", "first_mes": "Hi"}))),
        ),
    ]);
    let (st, b) = upload(&s, "rin.apng", &apng).await;
    assert_eq!(
        (st, b["spec"].as_str()),
        (200, Some("chara_card_v2")),
        "{b}"
    );
    assert_eq!(
        get_bytes(&s, "/api/characters/card/Rin/image").await.1,
        apng
    );

    // Compressed text chunks are read too: zTXt, and iTXt with its compression flag.
    let deflate = |t: &str| {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(t.as_bytes()).unwrap();
        z.finish().unwrap()
    };
    let mut ztxt = b"chara\0\0".to_vec();
    ztxt.extend(deflate(&b64(&v2(json!({"name": "Zed"})))));
    let (st, b) = upload(&s, "z.png", &png(&[chunk(b"zTXt", &ztxt)])).await;
    assert_eq!((st, b["name"].as_str()), (200, Some("Zed")), "{b}");
    let mut itxt = b"ccv3\0\x01\0\0\0".to_vec();
    itxt.extend(deflate(&b64(&v3(json!({"name": "Ito"})))));
    let (st, b) = upload(&s, "i.png", &png(&[chunk(b"iTXt", &itxt)])).await;
    assert_eq!((st, b["name"].as_str()), (200, Some("Ito")), "{b}");

    // Bare JSON: V1 flat fields; the name made valid by the name rules.
    let (st, b) = upload(
        &s,
        "who.json",
        json!({"name": "Dr. Who?", "description": "d", "personality": "p", "scenario": "s",
               "first_mes": "f", "mes_example": "m", "extra": "kept"})
        .to_string()
        .as_bytes(),
    )
    .await;
    assert_eq!(
        (st, b["name"].as_str(), b["spec"].as_str()),
        (200, Some("Dr Who"), Some("v1")),
        "{b}"
    );
    assert_eq!(stored_data(&s, "Dr Who")["extra"], "kept");
    assert_eq!(b["image"], false);
    assert_eq!(
        get_bytes(&s, "/api/characters/card/Dr%20Who/image").await.0,
        404
    );

    // Name clash: a new name, never an overwrite.
    let (st, b) = upload(
        &s,
        "m.json",
        v3(json!({"name": "Mika", "description": "other"}))
            .to_string()
            .as_bytes(),
    )
    .await;
    assert_eq!((st, b["name"].as_str()), (200, Some("Mika(1)")));
    assert_eq!(profile(&s, "Mika")["description"], "A cat.");
    assert_eq!(profile(&s, "Mika(1)")["description"], "other");

    // CHARX: card.json + assets; the main icon becomes the card image.
    let icon = png(&[]);
    let card = v3(json!({"name": "Kai", "assets": [
        {"type": "icon", "uri": "embeded://assets/icon/images/main.png", "name": "main", "ext": "png"},
        {"type": "other", "uri": "embeded://assets/other/notes.txt", "name": "notes", "ext": "txt"}]}));
    let charx = zip_of(&[
        ("card.json", card.to_string().as_bytes()),
        ("assets/icon/images/main.png", &icon),
        ("assets/other/notes.txt", b"hello"),
    ]);
    let (st, b) = upload(&s, "kai.charx", &charx).await;
    assert_eq!(
        (st, b["format"].as_str(), b["image"].as_bool()),
        (200, Some("charx"), Some(true)),
        "{b}"
    );
    assert_eq!(
        get_bytes(&s, "/api/characters/card/Kai/image").await.1,
        icon
    );

    // Deleting a character removes its card image and assets.
    let files = |dir: &str| {
        std::fs::read_dir(s.data.join(dir))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    let (images, assets) = (
        files("character_cards/images"),
        files("character_cards/assets"),
    );
    assert_eq!(
        s.send(reqwest::Method::DELETE, "/api/characters/profile/Kai", None)
            .await
            .0,
        200
    );
    assert_eq!(files("character_cards/images"), images - 1);
    assert_eq!(files("character_cards/assets"), assets - 1);

    // The route is in the OpenAPI document.
    let (_, doc) = s.get("/openapi.json").await;
    assert!(doc["paths"]["/api/characters/card/import"]["post"].is_object());
    assert!(doc["paths"]["/api/characters/card/{name}/export"]["get"].is_object());
}

#[tokio::test]
async fn bad_card_files_answer_400_and_create_nothing() {
    let s = TestServer::start(&[]).await;
    let before = s.state.characters.names();
    let bad_crc = {
        let mut p = png(&[text("chara", &b64(&v2(json!({"name": "X"}))))]);
        let n = p.len();
        p[n - 16] ^= 0x55;
        p
    };
    let many: Vec<(String, Vec<u8>)> = (0..300)
        .map(|i| (format!("assets/{i}.txt"), vec![b'x']))
        .collect();
    let mut many_refs: Vec<(&str, &[u8])> = many
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    let card_json = v3(json!({"name": "Z"})).to_string();
    many_refs.push(("card.json", card_json.as_bytes()));
    // A compressed chunk that inflates past the 20 MiB limit (a few KiB sent).
    let bomb = {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(&vec![b'A'; (20 << 20) + 16]).unwrap();
        let mut d = b"chara\0\0".to_vec();
        d.extend(z.finish().unwrap());
        png(&[chunk(b"zTXt", &d)])
    };
    assert!(bomb.len() < 100_000);
    let cases: Vec<(&str, &str, Vec<u8>)> = vec![
        ("bad_png", "bomb.png", bomb),
        ("no_card_chunk", "plain.png", png(&[])),
        ("no_card_chunk", "other.png", png(&[text("Comment", "hi")])),
        (
            "invalid_base64",
            "b.png",
            png(&[text("chara", "!!! not base64 ***")]),
        ),
        (
            "invalid_json",
            "j.png",
            png(&[text(
                "ccv3",
                &base64::engine::general_purpose::STANDARD.encode("{not json"),
            )]),
        ),
        (
            "invalid_card",
            "n.png",
            png(&[text("chara", &b64(&v2(json!({"description": "no name"}))))]),
        ),
        ("not_png", "fake.png", b"this is not a png at all".to_vec()),
        ("not_png", "sig.png", b"\x89PNG\r\n\x1a\x00rest".to_vec()),
        ("bad_png", "crc.png", bad_crc),
        (
            "bad_png",
            "cut.png",
            png(&[text("chara", &b64(&v2(json!({"name": "X"}))))])[..60].to_vec(),
        ),
        ("invalid_json", "x.json", b"{\"name\": ".to_vec()),
        (
            "invalid_card",
            "x.json",
            json!({"spec": "chara_card_v2", "data": []})
                .to_string()
                .into_bytes(),
        ),
        (
            "invalid_card",
            "x.json",
            json!({"spec": "chara_card_v9", "data": {"name": "A"}})
                .to_string()
                .into_bytes(),
        ),
        (
            "invalid_card",
            "x.json",
            v2(json!({"name": "A", "first_mes": 3}))
                .to_string()
                .into_bytes(),
        ),
        (
            "invalid_card",
            "x.json",
            v2(json!({"name": "A", "character_book": {"entries": [{"keys": "k"}]}}))
                .to_string()
                .into_bytes(),
        ),
        ("unknown_format", "x.bin", b"\x00\x01\x02".to_vec()),
        ("file_too_large", "big.json", vec![b' '; (20 << 20) + 1]),
        (
            "unsafe_path",
            "t.charx",
            zip_of(&[("card.json", card_json.as_bytes()), ("../evil.txt", b"x")]),
        ),
        (
            "unsafe_path",
            "a.charx",
            zip_of(&[("card.json", card_json.as_bytes()), ("/etc/evil", b"x")]),
        ),
        ("too_many_entries", "m.charx", zip_of(&many_refs)),
        ("no_card_json", "e.charx", zip_of(&[("assets/a.txt", b"x")])),
        ("invalid_charx", "c.charx", b"PK\x03\x04 broken".to_vec()),
    ];
    for (code, name, bytes) in cases {
        let (st, b) = upload(&s, name, &bytes).await;
        assert_eq!(st, 400, "{code} {name}: {b}");
        assert_eq!(b["success"], false, "{b}");
        assert_eq!(b["error_code"], code, "{name}: {b}");
        assert!(!b["error"].as_str().unwrap_or("").is_empty());
    }
    // No file part at all.
    let (st, b) = upload_part(&s, "other", "", b"x").await;
    assert_eq!(
        (st, b["error_code"].as_str()),
        (400, Some("no_file")),
        "{b}"
    );
    // Nothing created: no character, no image, no asset folder.
    assert_eq!(s.state.characters.names(), before);
    for dir in ["character_cards/images", "character_cards/assets"] {
        let n = std::fs::read_dir(s.data.join(dir))
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(n, 0, "{dir}");
    }
}

// ------------------------------------------------------------------ prompt

fn lorebook_card() -> Value {
    v3(json!({
        "name": "Mika",
        "system_prompt": "You are {{char}}. {{original}}",
        "description": "{{char}} lives with {{user}}.",
        "personality": "curious",
        "scenario": "A rainy evening.",
        "mes_example": "<START>\n{{user}}: Hi\n{{char}}: Meow!\n<START>\n{{user}}: Bye\n{{char}}: Purr.",
        "post_history_instructions": "Stay in character, {{user}}.",
        "first_mes": "Hello {{user}}, I'm {{char}}!",
        "alternate_greetings": ["Yo {{user}}."],
        "character_book": {"scan_depth": 1, "token_budget": 40, "entries": [
            {"keys": ["castle"], "content": "LORE-CASTLE: the castle is old.", "insertion_order": 1},
            {"keys": ["dragon"], "secondary_keys": ["fire"], "selective": true,
             "content": "LORE-DRAGON breathes fire.", "position": "after_char", "insertion_order": 2},
            {"keys": [], "constant": true, "content": "LORE-ALWAYS", "insertion_order": 0},
            {"keys": ["castle"], "enabled": false, "content": "LORE-DISABLED"},
            {"keys": ["Moon"], "case_sensitive": true, "content": "LORE-MOON"},
            {"keys": ["castle"], "content": format!("LORE-HUGE {}", "word ".repeat(100)), "insertion_order": 3}
        ]}
    }))
}

async fn send_turn(ws: &mut companiond_core::testkit::Ws, text: &str) -> String {
    ws.send(Message::Text(
        json!({"type": "user_text", "text": text}).to_string(),
    ))
    .await
    .unwrap();
    let mut reply = String::new();
    loop {
        let f = next_frame(ws).await;
        match f["type"].as_str() {
            Some("assistant_delta") => reply.push_str(f["text"].as_str().unwrap_or("")),
            Some("turn_end") => break,
            other => panic!("unexpected frame {other:?}: {f}"),
        }
    }
    reply
}

fn last_request(llm: &MockLlm) -> Vec<(String, String)> {
    let reqs = llm.chat_requests();
    let last = reqs.last().expect("a model request");
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or("").to_string(),
                m["content"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn every_turn_sends_the_card_prompt_with_greeting_examples_and_lorebook() {
    let llm = MockLlm::start("Sure.").await;
    let s = TestServer::start(&[]).await;
    s.configure_llm(&llm.base()).await;
    std::fs::write(
        s.data.join(companiond_core::characters::MASTER_DOC),
        json!({"档案名": "Ash"}).to_string(),
    )
    .unwrap();
    let (st, b) = upload(&s, "mika.json", lorebook_card().to_string().as_bytes()).await;
    assert_eq!(st, 200, "{b}");

    // A new conversation opens with the greeting.
    let (mut ws, _) = s.chat("Mika").await;
    let g = next_frame(&mut ws).await;
    assert_eq!(
        (g["type"].as_str(), g["text"].as_str()),
        (Some("assistant_delta"), Some("Hello Ash, I'm Mika!")),
        "{g}"
    );
    assert_eq!(g["greeting"], true);
    assert_eq!(next_frame(&mut ws).await["type"], "turn_end");

    send_turn(&mut ws, "Tell me about the castle").await;
    let m = last_request(&llm);
    let sys = &m[0].1;
    assert_eq!(m[0].0, "system");
    assert!(
        sys.starts_with("You are Mika. You are Mika, a warm"),
        "{sys}"
    );
    for part in [
        "Mika lives with Ash.",
        "Mika's personality: curious",
        "Scenario: A rainy evening.",
        "Ash: Hi\nMika: Meow!",
        "Ash: Bye\nMika: Purr.",
        "LORE-ALWAYS",
        "LORE-CASTLE",
    ] {
        assert!(sys.contains(part), "{part} missing in {sys}");
    }
    for absent in [
        "LORE-DRAGON",
        "LORE-DISABLED",
        "LORE-MOON",
        "LORE-HUGE",
        "<START>",
        "{{",
    ] {
        assert!(!sys.contains(absent), "{absent} in {sys}");
    }
    // Order: before_char entries, the description, then the example dialogue.
    let at = |p: &str| sys.find(p).unwrap();
    assert!(
        at("LORE-ALWAYS") < at("LORE-CASTLE") && at("LORE-CASTLE") < at("Mika lives with Ash.")
    );
    assert!(at("Scenario:") < at("Ash: Hi"));
    // History: the greeting first, the input, then the post-history instructions.
    assert_eq!(m[1], ("assistant".into(), "Hello Ash, I'm Mika!".into()));
    assert_eq!(
        m[m.len() - 2],
        ("user".into(), "Tell me about the castle".into())
    );
    assert_eq!(
        m[m.len() - 1],
        ("system".into(), "Stay in character, Ash.".into())
    );

    // Selective: a key without a secondary key does nothing; with one it
    // applies (after the character); scan depth 1 drops the castle.
    send_turn(&mut ws, "a dragon sleeps under the Moon").await;
    let sys = last_request(&llm)[0].1.clone();
    assert!(
        !sys.contains("LORE-DRAGON") && !sys.contains("LORE-CASTLE"),
        "{sys}"
    );
    assert!(sys.contains("LORE-MOON"), "{sys}");
    send_turn(&mut ws, "the dragon breathes FIRE").await;
    let sys = last_request(&llm)[0].1.clone();
    assert!(
        sys.find("LORE-DRAGON").unwrap() > sys.find("Scenario:").unwrap(),
        "{sys}"
    );
    assert!(
        !sys.contains("LORE-MOON"),
        "case-sensitive key matched: {sys}"
    );

    // A second connection to the same conversation is not greeted again.
    let _ = ws.close(None).await;
    let (mut ws2, _) = s.chat("Mika").await;
    assert!(quiet(&mut ws2, 600).await);

    // The alternate greeting can be chosen; a bad index is refused.
    let (st, b) = s
        .post("/api/characters/card/Mika/greeting", json!({"index": 1}))
        .await;
    assert_eq!((st, b["greeting"].as_str()), (200, Some("Yo Ash.")), "{b}");
    let (st, b) = s
        .post("/api/characters/card/Mika/greeting", json!({"index": 2}))
        .await;
    assert_eq!((st, b["success"].as_bool()), (400, Some(false)));
}

// ------------------------------------------------------------------ export

async fn reimport(s: &TestServer, name: &str, format: &str) -> (String, Vec<u8>) {
    let (st, bytes, _) = get_bytes(
        s,
        &format!("/api/characters/card/{name}/export?format={format}"),
    )
    .await;
    assert_eq!(st, 200, "{format}");
    let (st, b) = upload(s, &format!("again.{format}"), &bytes).await;
    assert_eq!(st, 200, "{format}: {b}");
    (b["name"].as_str().unwrap().to_string(), bytes)
}

#[tokio::test]
async fn export_round_trips_png_json_and_charx() {
    let s = TestServer::start(&[]).await;
    let card = lorebook_card();
    let mut card = card;
    card["data"]["extensions"] = json!({"depth_prompt": {"depth": 4, "prompt": "x"}});
    card["data"]["creator"] = json!("someone");
    card["data"]["custom"] = json!({"kept": true});
    let image = png(&[text("chara", &b64(&v2(json!({"name": "ignored"}))))]);
    let with_card = png(&[
        chunk(b"acTL", &[0, 0, 0, 1, 0, 0, 0, 0]),
        text("ccv3", &b64(&card)),
    ]);
    let (st, b) = upload(&s, "mika.png", &with_card).await;
    assert_eq!((st, b["name"].as_str()), (200, Some("Mika")), "{b}");
    let _ = image;
    let original = card["data"].as_object().unwrap().clone();
    for format in ["png", "json", "charx"] {
        let (name, bytes) = reimport(&s, "Mika", format).await;
        assert_ne!(name, "Mika");
        let back = stored_data(&s, &name);
        for (k, v) in &original {
            assert_eq!(&back[k], v, "{format}: field {k}");
        }
        if format == "png" {
            // V3 PNG that also carries the V2 chunk; the APNG's own chunks kept.
            let texts = read_texts(&bytes);
            let keys: Vec<&str> = texts.iter().map(|t| t.0.as_str()).collect();
            assert_eq!(keys, vec!["chara", "ccv3"]);
            let decode = |t: &str| -> Value {
                serde_json::from_slice(
                    &base64::engine::general_purpose::STANDARD.decode(t).unwrap(),
                )
                .unwrap()
            };
            let v2c = decode(&texts[0].1);
            assert_eq!(
                (
                    v2c["spec"].as_str(),
                    v2c["data"]["name"].as_str(),
                    v2c["name"].as_str()
                ),
                (Some("chara_card_v2"), Some("Mika"), Some("Mika"))
            );
            assert_eq!(decode(&texts[1].1)["spec"], "chara_card_v3");
            assert!(bytes.windows(4).any(|w| w == b"acTL"));
        }
        if format == "json" {
            let v: Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(v["spec"], "chara_card_v3");
        }
    }

    // A character made in companiond exports too, its own fields kept.
    let (st, _) = s
        .post(
            "/api/characters/profile",
            json!({"name": "Ren", "性别": "男", "Core Traits": ["calm", "kind"]}),
        )
        .await;
    assert_eq!(st, 200);
    let (_, bytes, ct) = get_bytes(&s, "/api/characters/card/Ren/export").await;
    assert_eq!(ct, "image/png");
    assert_eq!(read_texts(&bytes).len(), 2);
    let (name, _) = reimport(&s, "Ren", "json").await;
    assert_eq!(name, "Ren(1)");
    let p = profile(&s, "Ren(1)");
    assert_eq!(
        (p["性别"].as_str(), p["Core Traits"].clone()),
        (Some("男"), json!(["calm", "kind"]))
    );
    assert!(stored_data(&s, "Ren(1)")["description"]
        .as_str()
        .unwrap()
        .contains("性别: 男"));

    // Fields added to an imported character (the original's card form) travel too.
    s.state
        .characters
        .mutate(|doc| {
            if let Some(Value::Object(p)) = doc.characters.get_mut("Mika") {
                p.insert("性格".into(), json!("gentle"));
            }
            Ok(())
        })
        .await
        .unwrap();
    let (name, _) = reimport(&s, "Mika", "json").await;
    assert_eq!(profile(&s, &name)["性格"], "gentle");
    assert_eq!(
        stored_data(&s, &name)["extensions"]["depth_prompt"]["depth"],
        4
    );

    // A CHARX keeps its assets through export.
    let charx = zip_of(&[
        ("card.json", v3(json!({"name": "Kai", "assets": [{"type": "other", "uri": "embeded://assets/other/notes.txt", "name": "notes", "ext": "txt"}]})).to_string().as_bytes()),
        ("assets/other/notes.txt", b"hello"),
    ]);
    assert_eq!(upload(&s, "kai.charx", &charx).await.0, 200);
    let (_, bytes, _) = get_bytes(&s, "/api/characters/card/Kai/export?format=charx").await;
    let mut z = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
    let mut notes = String::new();
    std::io::Read::read_to_string(
        &mut z.by_name("assets/other/notes.txt").unwrap(),
        &mut notes,
    )
    .unwrap();
    assert_eq!(notes, "hello");

    // Refusals.
    let (st, b) = s.get("/api/characters/card/Mika/export?format=gif").await;
    assert_eq!((st, b["error_code"].as_str()), (400, Some("bad_request")));
    let (st, b) = s.get("/api/characters/card/Nobody/export").await;
    assert_eq!(
        (st, b["error_code"].as_str()),
        (404, Some("character_not_found"))
    );
}

/// A client of the original application's protocol (docs/chat-protocol.md)
/// sees the card greeting as a message of its own; its first turn keeps its
/// request id, even when it was sent at once.
#[tokio::test]
async fn the_original_protocol_shows_the_greeting_and_keeps_request_ids() {
    let llm = MockLlm::start("Sure.").await;
    let s = TestServer::start(&[]).await;
    s.configure_llm(&llm.base()).await;
    let card = v3(json!({"name": "Mika", "first_mes": "Hello {{user}}!"}));
    assert_eq!(
        upload(&s, "m.json", card.to_string().as_bytes()).await.0,
        200
    );
    let mut ws = s.ws("Mika").await;
    let send = |v: Value| Message::Text(v.to_string());
    ws.send(send(
        json!({"action": "start_session", "input_type": "text", "request_id": "R1"}),
    ))
    .await
    .unwrap();
    ws.send(send(
        json!({"action": "stream_data", "input_type": "text", "data": "Hi", "request_id": "R2"}),
    ))
    .await
    .unwrap();
    let mut frames = Vec::new();
    while frames.len() < 8 {
        let f = next_frame(&mut ws).await;
        let done = f["type"] == "system" && f["request_id"] == "R2";
        frames.push(f);
        if done {
            break;
        }
    }
    let greeting = frames
        .iter()
        .find(|f| f["turn_id"] == "greeting")
        .unwrap_or_else(|| panic!("{frames:?}"));
    assert_eq!(
        (greeting["type"].as_str(), greeting["text"].as_str()),
        (Some("gemini_response"), Some("Hello User!"))
    );
    assert!(greeting.get("request_id").is_none());
    let reply: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "gemini_response" && f["turn_id"] != "greeting")
        .collect();
    assert!(
        !reply.is_empty() && reply.iter().all(|f| f["request_id"] == "R2"),
        "{frames:?}"
    );
    assert_eq!(frames.last().unwrap()["request_id"], "R2");
}

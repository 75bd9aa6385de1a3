//! The `pngtuber_layered_project` adapter (`layered_canvas_v1`, adapter_version 2):
//! a PNGTube Remix `.pngRemix` project (a Godot 4 binary Variant dictionary with
//! `sprites_array`, embedded PNGs and per-state sprite dictionaries) becomes
//! flattened `idle.png`/`talking.png`, one PNG per sprite under `layers/`, the
//! layered metadata `metadata.pngtube-remix.json` and a `model.json`.

mod mesh;
mod sprite;

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::{json, Map, Value};

use super::godot::{self, Variant};
use super::image::{decode_png, Rgba};
use super::layered::{layered_metadata, safe_id, write_layered, Imported, LayeredPackage};
use crate::fsutil::stem;
use mesh::{extract_mesh, MESH_HINT_KEYS};
use sprite::{has_physics, image_bytes, variants, whitelisted, Key, Sprite, St};

pub const SOURCE_FORMAT: &str = "pngtuber_layered_project";
pub const METADATA_FILE: &str = "metadata.pngtube-remix.json";

const EMOTIONS: &[(&str, &[&str])] = &[
    (
        "happy",
        &[
            "happy",
            "joy",
            "smile",
            "laugh",
            "开心",
            "高兴",
            "笑",
            "嬉しい",
            "喜",
        ],
    ),
    (
        "sad",
        &[
            "sad",
            "cry",
            "tear",
            "down",
            "难过",
            "伤心",
            "哭",
            "悲しい",
            "泣",
        ],
    ),
    (
        "angry",
        &["angry", "rage", "mad", "annoy", "生气", "愤怒", "怒"],
    ),
    (
        "surprised",
        &["surprised", "surprise", "shock", "惊讶", "吃惊", "驚"],
    ),
];

/// Convert the project at `file` inside the package `pkg` in place.
pub fn convert(pkg: &Path, file: &Path) -> Result<Imported, String> {
    let bytes = std::fs::read(file).map_err(|e| format!("cannot read the project: {e}"))?;
    let root = godot::decode(&bytes)?;
    if !matches!(root, Variant::Dict(_)) {
        return Err("the project is not a dictionary".into());
    }
    let sprites_v = root
        .get("sprites_array")
        .and_then(Variant::as_array)
        .ok_or("missing sprites_array")?;
    let mut shared: HashMap<i64, Vec<u8>> = HashMap::new();
    for item in root
        .get("image_manager_data")
        .and_then(Variant::as_array)
        .unwrap_or(&[])
    {
        if let Some(id) = item.get("id").and_then(Variant::as_i64) {
            if let Some(b) = item
                .get("runtime_texture")
                .and_then(image_bytes)
                .or_else(|| item.get("image_data").and_then(image_bytes))
            {
                shared.insert(id, b);
            }
        }
    }
    let inputs: &[Variant] = root
        .get("input_array")
        .and_then(Variant::as_array)
        .unwrap_or(&[]);
    let settings = root.get("settings_dict");
    let settings_states: &[Variant] = settings
        .and_then(|s| s.get("states"))
        .and_then(Variant::as_array)
        .unwrap_or(&[]);

    // Sprites with a decodable image.
    let mut sprites: Vec<Sprite> = Vec::new();
    for (order, sv) in sprites_v.iter().enumerate() {
        if !matches!(sv, Variant::Dict(_)) {
            continue;
        }
        let img = sv
            .get("img")
            .and_then(image_bytes)
            .or_else(|| {
                sv.get("image_id")
                    .and_then(Variant::as_i64)
                    .and_then(|id| shared.get(&id).cloned())
            })
            .and_then(|b| decode_png(&b).ok());
        let Some(mut image) = img else { continue };
        let states: Vec<&Variant> = sv
            .get("states")
            .and_then(Variant::as_array)
            .map(|a| a.iter().filter(|s| matches!(s, Variant::Dict(_))).collect())
            .unwrap_or_default();
        let st0 = St {
            raw: states.first().copied(),
        };
        let flip_h = st0.b("flip_sprite_h", false)
            || sv
                .get("flipped_h")
                .and_then(Variant::as_bool)
                .unwrap_or(false);
        let flip_v = st0.b("flip_sprite_v", false)
            || sv
                .get("flipped_v")
                .and_then(Variant::as_bool)
                .unwrap_or(false);
        if flip_h {
            image.flip_h();
        }
        if flip_v {
            image.flip_v();
        }
        let (sx, sy) = st0.v2("scale", (1.0, 1.0));
        let (sx, sy) = (sx.abs(), sy.abs());
        if (sx - 1.0).abs() > 1e-9 || (sy - 1.0).abs() > 1e-9 {
            let w = (f64::from(image.w) * sx).round().max(1.0);
            let h = (f64::from(image.h) * sy).round().max(1.0);
            if w * h > super::image::MAX_PIXELS as f64 {
                return Err("a scaled sprite is too large".into());
            }
            image = image.resize(w as u32, h as u32)?;
        }
        let id = sv
            .get("sprite_id")
            .and_then(Variant::as_i64)
            .unwrap_or(order as i64);
        let is_asset = sv
            .get("is_asset")
            .and_then(Variant::as_bool)
            .unwrap_or(false);
        let was_active = sv
            .get("was_active_before")
            .and_then(Variant::as_bool)
            .unwrap_or(true);
        let hide_events = sv
            .get("saved_disappear")
            .and_then(Variant::as_array)
            .map(|a| a.iter().filter_map(Key::from).collect())
            .unwrap_or_default();
        sprites.push(Sprite {
            order,
            id,
            parent: sv.get("parent_id").and_then(Variant::as_i64),
            name: sv
                .get("sprite_name")
                .and_then(Variant::as_str)
                .unwrap_or("")
                .to_string(),
            sprite_type: sv
                .get("sprite_type")
                .map(Variant::to_json)
                .unwrap_or(Value::Null),
            image,
            states,
            raw: sv,
            inactive_asset: is_asset && !was_active,
            show_event: sv.get("saved_event").and_then(Key::from),
            hide_events,
            file: format!("layers/remix_{order:04}_{}.png", safe_id(&id.to_string())),
        });
    }
    if sprites.is_empty() {
        return Err("the project has no decodable PNG sprites".into());
    }
    let by_id: HashMap<i64, usize> = sprites.iter().enumerate().map(|(i, s)| (s.id, i)).collect();
    let chains: Vec<Vec<usize>> = (0..sprites.len())
        .map(|i| {
            let mut c = Vec::new();
            let mut seen = HashSet::from([i]);
            let mut cur = sprites[i].parent;
            while let Some(p) = cur.and_then(|p| by_id.get(&p).copied()) {
                if !seen.insert(p) {
                    break;
                }
                c.push(p);
                cur = sprites[p].parent;
            }
            c
        })
        .collect();
    let state_count = sprites
        .iter()
        .map(|s| s.states.len())
        .chain([inputs.len(), settings_states.len(), 1])
        .max()
        .unwrap_or(1);

    let center = |i: usize, s: usize| {
        let mut c = (0.0, 0.0);
        for &n in std::iter::once(&i).chain(chains[i].iter()) {
            let st = sprites[n].st(s);
            let p = st.v2("position", (0.0, 0.0));
            let o = st.v2("offset", (0.0, 0.0));
            c.0 += p.0 + o.0;
            c.1 += p.1 + o.1;
        }
        c
    };
    let eff_z = |i: usize, s: usize| {
        let mut z = 0i64;
        for &n in std::iter::once(&i).chain(chains[i].iter()) {
            let st = sprites[n].st(s);
            // Clamped before the cast; the sum saturates (project numbers are client input).
            z = z.saturating_add(st.f("z_index", 0.0).clamp(-1e9, 1e9) as i64);
            if !st.b("z_as_relative", true) {
                break;
            }
        }
        z
    };
    let inactive_anc = |i: usize| {
        std::iter::once(&i)
            .chain(chains[i].iter())
            .any(|&n| sprites[n].inactive_asset)
    };
    let ancestors_visible = |i: usize, s: usize| {
        chains[i]
            .iter()
            .all(|&n| sprites[n].st(s).b("visible", true))
    };
    let state_visible = |i: usize, s: usize| {
        let st = sprites[i].st(s);
        st.b("visible", true) && !st.b("folder", false) && ancestors_visible(i, s)
    };
    // (should_talk, open_mouth), (should_blink, open_eyes) inherited up the chain.
    let effective = |i: usize, s: usize, flag: &str, value: &str, d: bool| {
        for &n in std::iter::once(&i).chain(chains[i].iter()) {
            let st = sprites[n].st(s);
            if st.b(flag, false) {
                return (true, st.b(value, d));
            }
        }
        (false, d)
    };

    // Canvas bounds: every visible state's frame rectangle.
    let mut min = (f64::MAX, f64::MAX);
    let mut max = (f64::MIN, f64::MIN);
    for (i, sp) in sprites.iter().enumerate() {
        if inactive_anc(i) && sp.show_event.is_none() {
            continue;
        }
        for s in 0..state_count {
            if !state_visible(i, s) {
                continue;
            }
            let (fw, fh, _, _) = sp.frame(s);
            let c = center(i, s);
            let (x, y) = (c.0 - f64::from(fw) / 2.0, c.1 - f64::from(fh) / 2.0);
            min = (min.0.min(x), min.1.min(y));
            max = (max.0.max(x + f64::from(fw)), max.1.max(y + f64::from(fh)));
        }
    }
    if min.0 == f64::MAX {
        return Err("the project has no visible PNG layers".into());
    }
    let (min_x, min_y) = (min.0.round(), min.1.round());
    let width = ((max.0.round() - min_x) as i64).max(1);
    let height = ((max.1.round() - min_y) as i64).max(1);
    if width > 8192 || height > 8192 {
        return Err(format!(
            "the canvas of {width}x{height} pixels is too large"
        ));
    }

    let compose = |talking: bool| -> Result<(Rgba, usize), String> {
        let mut canvas = Rgba::new(width as u32, height as u32)?;
        let mut idx: Vec<usize> = (0..sprites.len()).collect();
        idx.sort_by_key(|&i| (eff_z(i, 0), sprites[i].order));
        let mut drawn = 0;
        for i in idx {
            if inactive_anc(i) || !state_visible(i, 0) {
                continue;
            }
            let (talks, open) = effective(i, 0, "should_talk", "open_mouth", false);
            if talks && open != talking {
                continue;
            }
            let (blinks, eyes) = effective(i, 0, "should_blink", "open_eyes", true);
            if blinks && !eyes {
                continue;
            }
            let (fw, fh, cx, cy) = sprites[i].frame(0);
            let cell = sprites[i].image.crop(cx, cy, fw, fh);
            let c = center(i, 0);
            canvas.draw_over(
                &cell,
                (c.0 - f64::from(fw) / 2.0 - min_x).round() as i64,
                (c.1 - f64::from(fh) / 2.0 - min_y).round() as i64,
            );
            drawn += 1;
        }
        Ok((canvas, drawn))
    };
    let (idle, n_idle) = compose(false)?;
    let (talking, n_talk) = compose(true)?;
    if n_idle == 0 || n_talk == 0 {
        return Err("the project has no visible idle/talking layers".into());
    }

    // Project-level features.
    let mut any_physics = false;
    let mut mesh_hint = false;
    let mut mesh_valid = false;
    let mut degrade: Vec<String> = Vec::new();
    let mut layer_meta = Vec::new();
    for (i, sp) in sprites.iter().enumerate() {
        let mesh = extract_mesh(sp.raw, sp.states.first().copied());
        if let Some(m) = &mesh {
            mesh_hint = true;
            if m["valid"] == json!(true) {
                mesh_valid = true;
            } else if let Some(r) = m["degrade_reason"].as_str() {
                if !degrade.iter().any(|d| d == r) {
                    degrade.push(r.to_string());
                }
            }
        }
        let (fw0, fh0, _, _) = sp.frame(0);
        let c0 = center(i, 0);
        let parent_chain: Vec<Value> = std::iter::once(&i)
            .chain(chains[i].iter())
            .map(|&n| {
                let st = sprites[n].st(0);
                json!({
                    "name": sprites[n].name, "sprite_id": sprites[n].id, "parent_id": sprites[n].parent,
                    "folder": st.b("folder", false), "visible": st.b("visible", true),
                    "z_index": st.f("z_index", 0.0), "effective_z_index": eff_z(n, 0),
                    "position": st.v2("position", (0.0, 0.0)).to_arr(),
                    "offset": st.v2("offset", (0.0, 0.0)).to_arr(),
                    "scale": st.v2("scale", (1.0, 1.0)).to_arr(),
                    "rotation": st.f("rotation", 0.0),
                    "flip_sprite_h": st.b("flip_sprite_h", false),
                    "flip_sprite_v": st.b("flip_sprite_v", false),
                })
            })
            .collect();
        let mut states = Vec::new();
        for s in 0..state_count {
            let st = sp.st(s);
            if has_physics(&st) {
                any_physics = true;
            }
            if MESH_HINT_KEYS.iter().any(|k| variants(&st, k)) {
                mesh_hint = true;
            }
            let mut m = whitelisted(&st);
            let (fw, fh, _, _) = sp.frame(s);
            let c = center(i, s);
            let (talk, mouth) = effective(i, s, "should_talk", "open_mouth", false);
            let (blink, eyes) = effective(i, s, "should_blink", "open_eyes", true);
            m.insert("state_index".into(), json!(s));
            m.insert("ancestor_visible".into(), json!(ancestors_visible(i, s)));
            m.insert("effective_should_talk".into(), json!(talk));
            m.insert("effective_open_mouth".into(), json!(mouth));
            m.insert("effective_should_blink".into(), json!(blink));
            m.insert("effective_open_eyes".into(), json!(eyes));
            m.insert("effective_z_index".into(), json!(eff_z(i, s)));
            m.insert("center_x".into(), json!(c.0));
            m.insert("center_y".into(), json!(c.1));
            m.insert("frame_width".into(), json!(fw));
            m.insert("frame_height".into(), json!(fh));
            m.insert("image_width".into(), json!(sp.image.w));
            m.insert("image_height".into(), json!(sp.image.h));
            m.insert("x".into(), json!(c.0 - f64::from(fw) / 2.0 - min_x));
            m.insert("y".into(), json!(c.1 - f64::from(fh) / 2.0 - min_y));
            m.insert(
                "mesh".into(),
                extract_mesh(sp.raw, sp.states.get(s).copied()).unwrap_or(Value::Null),
            );
            states.push(Value::Object(m));
        }
        let st0 = sp.st(0);
        layer_meta.push(json!({
            "image": sp.file, "name": sp.name, "sprite_id": sp.id, "parent_id": sp.parent,
            "sprite_type": sp.sprite_type, "inactive_asset_ancestor": inactive_anc(i),
            "ancestor_visible": ancestors_visible(i, 0), "order": sp.order,
            "zindex": st0.f("z_index", 0.0), "effective_zindex": eff_z(i, 0),
            "x": c0.0 - f64::from(fw0) / 2.0 - min_x, "y": c0.1 - f64::from(fh0) / 2.0 - min_y,
            "width": fw0, "height": fh0, "image_width": sp.image.w, "image_height": sp.image.h,
            "base_scale": st0.v2("scale", (1.0, 1.0)).to_arr(),
            "base_flip_h": st0.b("flip_sprite_h", false), "base_flip_v": st0.b("flip_sprite_v", false),
            "parent_chain": parent_chain,
            "mesh": mesh.unwrap_or(Value::Null),
            "state": Value::Object(whitelisted(&st0)),
            "states": states,
            "asset_events": {
                "show": sp.show_event.as_ref().map(Key::json),
                "hide": sp.hide_events.iter().map(Key::json).collect::<Vec<_>>(),
            },
        }));
    }
    let mesh_runtime = mesh_valid;
    let mesh_metadata = mesh_valid || mesh_hint;
    let mut unsupported = vec![
        "remix_editor_timeline".to_string(),
        "godot_runtime_nodes".to_string(),
    ];
    if mesh_metadata && !mesh_runtime {
        let mut s = "mesh geometry missing; physics metadata preserved only".to_string();
        if !degrade.is_empty() {
            s.push_str(&format!(" ({})", degrade.join("; ")));
        }
        unsupported.push(s);
    }
    if !mesh_metadata {
        unsupported.push("mesh metadata absent".into());
    }
    if !any_physics {
        unsupported.push("physics metadata absent".into());
    }

    // States: catalog, hotkeys, emotions.
    let mut catalog = Vec::new();
    let mut state_hotkeys = Vec::new();
    for s in 0..state_count {
        let name_of = |v: Option<&Variant>| {
            let v = v?;
            [
                "state_name",
                "name",
                "label",
                "title",
                "button_text",
                "text",
            ]
            .iter()
            .find_map(|k| {
                v.get(k)
                    .and_then(Variant::as_str)
                    .filter(|x| !x.trim().is_empty())
            })
            .map(str::to_string)
        };
        let name = name_of(inputs.get(s))
            .or_else(|| name_of(settings_states.get(s)))
            .unwrap_or_else(|| format!("State {}", s + 1));
        let key = inputs.get(s).and_then(Key::from);
        let hotkey = key.as_ref().map(Key::label);
        if let Some(k) = &key {
            let mut h = k.json();
            h["state_index"] = json!(s);
            h["state_name"] = json!(name);
            state_hotkeys.push(h);
        }
        let mut aliases: Vec<String> = vec![
            format!("{}", s + 1),
            format!("state {}", s + 1),
            format!("state_{}", s + 1),
            name.clone(),
        ];
        if let Some(h) = &hotkey {
            aliases.push(h.clone());
        }
        aliases.sort();
        aliases.dedup();
        catalog.push(json!({
            "state_index": s, "state_number": s + 1, "name": name, "hotkey": hotkey, "aliases": aliases,
        }));
    }
    let mut emotions = Map::new();
    emotions.insert(
        "neutral".into(),
        json!({"state_index": 0, "source": "default_state"}),
    );
    for (emotion, words) in EMOTIONS {
        let hit = catalog.iter().find(|c| {
            let mut texts: Vec<String> = vec![c["name"].as_str().unwrap_or("").to_lowercase()];
            if let Some(a) = c["aliases"].as_array() {
                texts.extend(a.iter().filter_map(Value::as_str).map(str::to_lowercase));
            }
            texts.iter().any(|t| words.iter().any(|w| t.contains(w)))
        });
        if let Some(c) = hit {
            emotions.insert(
                (*emotion).into(),
                json!({"state_index": c["state_index"], "source": "state_label"}),
            );
        }
    }
    if state_count >= 5 {
        for (i, (emotion, _)) in EMOTIONS.iter().enumerate() {
            emotions
                .entry(*emotion)
                .or_insert_with(|| json!({"state_index": i + 1, "source": "fallback_state_order"}));
        }
    }
    let mut actions: Vec<(Key, Vec<i64>, Vec<i64>)> = Vec::new();
    let mut add = |k: &Key, id: i64, show: bool| {
        let pos = match actions.iter().position(|(x, _, _)| x == k) {
            Some(p) => p,
            None => {
                actions.push((k.clone(), Vec::new(), Vec::new()));
                actions.len() - 1
            }
        };
        if show {
            actions[pos].1.push(id);
        } else {
            actions[pos].2.push(id);
        }
    };
    for sp in &sprites {
        if let Some(k) = &sp.show_event {
            add(k, sp.id, true);
        }
        for k in &sp.hide_events {
            add(k, sp.id, false);
        }
    }
    let asset_actions: Vec<Value> = actions
        .iter()
        .map(|(k, show, hide)| {
            let mut v = k.json();
            v["show_sprite_ids"] = json!(show);
            v["hide_sprite_ids"] = json!(hide);
            v
        })
        .collect();

    let file_name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model.pngRemix".into());
    let warnings = vec![
        "project imported through layered_canvas_v1 (adapter_version 2); speech, blink layers, states, asset actions and layered physics supported; source state hotkeys preserved as metadata but not bound at runtime; mesh data preserved as metadata".to_string(),
    ];
    let own = json!({
        "capabilities": {
            "idle_talking_swap": true, "speech_layers": true, "blink_layers": true,
            "layered_state_emotions": true, "blink_speech_bounce": true,
            "sprite_sheet_frames": true, "physics_v2": any_physics, "state_switching": true,
            "emotion_mappings": true, "effective_z_index_ordering": true,
            "hotkeys": false, "motion_layers": any_physics, "physics": any_physics,
            "mesh": mesh_metadata, "mesh_metadata": mesh_metadata, "mesh_runtime": mesh_runtime,
            "meshMetadata": mesh_metadata, "meshRuntime": mesh_runtime,
        },
        "canvas": {"width": width, "height": height},
        "runtime_features": {
            "layer_motion": true, "sprite_sheet_animation": true, "layered_breathing": true,
            "mesh_deformation": mesh_runtime, "physics_v2": any_physics,
            "unsupported_features": unsupported, "unsupportedFeatures": unsupported,
        },
        "blink": {"enabled": true, "interval_min_ms": 2800, "interval_max_ms": 5200, "duration_ms": 140},
        "state_count": state_count,
        "state_catalog": catalog,
        "emotion_mappings": emotions,
        "hotkeys": [],
        "state_hotkeys": state_hotkeys,
        "raw_hotkeys": inputs.iter().map(Variant::to_json).collect::<Vec<_>>(),
        "asset_actions": asset_actions,
        "settings": settings.map(Variant::to_json).unwrap_or(Value::Null),
        "layers": layer_meta,
        "sprite_count": sprites.len(),
    });
    let metadata = layered_metadata(SOURCE_FORMAT, "pngtube-remix", &file_name, &warnings, own);

    write_layered(
        pkg,
        LayeredPackage {
            source_format: SOURCE_FORMAT,
            metadata_file: METADATA_FILE,
            name: stem(&file_name).to_string(),
            idle: &idle,
            talking: &talking,
            parts: sprites
                .iter()
                .map(|sp| (sp.file.as_str(), &sp.image))
                .collect(),
            source: (file != pkg.join("source.pngRemix"))
                .then_some(("source.pngRemix", &bytes[..])),
            metadata,
            warnings,
        },
    )
}

trait ToArr {
    fn to_arr(self) -> Value;
}
impl ToArr for (f64, f64) {
    fn to_arr(self) -> Value {
        json!([self.0, self.1])
    }
}

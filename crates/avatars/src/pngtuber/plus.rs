//! The `pngtuber_layered_save` adapter (`layered_canvas_v1`, adapter_version 2):
//! a PNGTuber Plus `.save` file (UTF-8 JSON; layers under all-digit keys, each
//! with an inline base64 PNG or a `path` to a file of the package) becomes
//! flattened `idle.png`/`talking.png`, one PNG per layer under `layers/`, the
//! layered metadata `metadata.pngtuber-plus.json` and a `model.json`.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use base64::Engine;
use serde_json::{json, Map, Value};

use companiond_core::paths::safe_join;

use super::image::{decode_png, Rgba};
use super::layered::{layered_metadata, safe_id, write_layered, Imported, LayeredPackage};
use crate::fsutil::{stem, walk_files};

pub const SOURCE_FORMAT: &str = "pngtuber_layered_save";
pub const METADATA_FILE: &str = "metadata.pngtuber-plus.json";
const STATES: usize = 10;
/// Visible combinations of showTalk + 3*showBlink + 10*talking + 20*blinking.
const VISIBLE: &[i64] = &[0, 10, 20, 30, 1, 21, 12, 32, 3, 13, 4, 15, 26, 36, 27, 38];
const DEFAULT_KEYS: [&str; 10] = ["1", "2", "3", "4", "5", "6", "7", "8", "9", "0"];

/// Finite float from a JSON number or numeric string; `default` otherwise.
pub fn num(v: Option<&Value>, default: f64) -> f64 {
    let f = match v {
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
        Some(Value::Bool(b)) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    };
    match f {
        Some(f) if f.is_finite() => f,
        _ => default,
    }
}

/// Most magnitude an integer of a save file is taken with: keeps every sum
/// and product of these values far from overflow (a save is client input).
const MAX_SAVE_INT: f64 = 1e9;

fn int(v: Option<&Value>, default: i64) -> i64 {
    // Clamped before the cast, so the cast is exact.
    num(v, default as f64)
        .clamp(-MAX_SAVE_INT, MAX_SAVE_INT)
        .trunc() as i64
}

fn boolean(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::String(s)) => matches!(s.trim().to_ascii_lowercase().as_str(), "true" | "1"),
        _ => false,
    }
}

/// Layer ids: numbers and strings; "", "none", "null" mean none.
fn ident(v: Option<&Value>) -> Option<String> {
    let s = match v? {
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
            _ => n.to_string(),
        },
        Value::String(s) => s.trim().to_string(),
        _ => return None,
    };
    if s.is_empty() || s.eq_ignore_ascii_case("none") || s.eq_ignore_ascii_case("null") {
        None
    } else {
        Some(s)
    }
}

fn opt_str(v: Option<&Value>) -> Option<String> {
    match v {
        Some(Value::String(s)) => {
            let t = s.trim();
            if t.is_empty() || t.eq_ignore_ascii_case("none") || t.eq_ignore_ascii_case("null") {
                None
            } else {
                Some(t.to_string())
            }
        }
        _ => None,
    }
}

/// `"Vector2(x, y)"` or `[x, y]`.
pub fn vec2(v: Option<&Value>) -> (f64, f64) {
    let fin = |f: f64| if f.is_finite() { f } else { 0.0 };
    match v {
        Some(Value::String(s)) => {
            let inner = s
                .trim()
                .strip_prefix("Vector2")
                .unwrap_or(s)
                .trim()
                .trim_start_matches('(')
                .trim_end_matches(')');
            let mut it = inner
                .split(',')
                .map(|p| p.trim().parse::<f64>().unwrap_or(0.0));
            (fin(it.next().unwrap_or(0.0)), fin(it.next().unwrap_or(0.0)))
        }
        Some(Value::Array(a)) => (num(a.first(), 0.0), num(a.get(1), 0.0)),
        Some(Value::Object(o)) => (num(o.get("x"), 0.0), num(o.get("y"), 0.0)),
        _ => (0.0, 0.0),
    }
}

/// `"[1, 0, ...]"` or a list: 10 entries of 0/1, padded with 1.
fn costume_layers(v: Option<&Value>) -> Vec<u8> {
    let vals: Vec<f64> = match v {
        Some(Value::String(s)) => s
            .trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| p.trim().parse::<f64>().unwrap_or(0.0))
            .collect(),
        Some(Value::Array(a)) => a.iter().map(|x| num(Some(x), 0.0)).collect(),
        _ => Vec::new(),
    };
    let mut out: Vec<u8> = vals
        .into_iter()
        .take(STATES)
        .map(|f| u8::from(f == 1.0))
        .collect();
    out.resize(STATES, 1);
    out
}

fn r3(f: f64) -> f64 {
    (f * 1000.0).round() / 1000.0
}

struct Layer {
    key: String,
    order: i64,
    id: Option<String>,
    parent: Option<String>,
    raw: Map<String, Value>,
    pos: (f64, f64),
    offset: (f64, f64),
    zindex: i64,
    show_talk: i64,
    show_blink: i64,
    frames: u32,
    anim_speed: f64,
    toggle: Option<String>,
    costume: Vec<u8>,
    clipped: bool,
    image: Rgba,
    file: String,
}

impl Layer {
    fn frame_size(&self) -> (u32, u32) {
        ((self.image.w / self.frames).max(1), self.image.h)
    }
    fn label(&self) -> String {
        self.id.clone().unwrap_or_else(|| self.key.clone())
    }
}

/// Find an image or settings file named by a save: the save's folder first,
/// then the package root; the path as given, then its base name; then a search
/// of the whole package by base name. Nothing outside the package is used.
fn find_asset(pkg: &Path, save_dir: &Path, raw_path: &str) -> Option<std::path::PathBuf> {
    let p = raw_path.replace('\\', "/");
    let p = p
        .strip_prefix("user://")
        .or_else(|| p.strip_prefix("res://"))
        .unwrap_or(&p)
        .to_string();
    let base = p.rsplit('/').next().unwrap_or("").to_string();
    if base.is_empty() {
        return None;
    }
    let plain_rel = !(p.starts_with('/') || p.as_bytes().get(1) == Some(&b':'));
    for root in [save_dir, pkg] {
        if plain_rel {
            if let Ok(c) = safe_join(root, &p) {
                if c.is_file() && companiond_core::paths::ensure_within(pkg, &c).is_ok() {
                    return Some(c);
                }
            }
        }
        if let Ok(c) = safe_join(root, &base) {
            if c.is_file() && companiond_core::paths::ensure_within(pkg, &c).is_ok() {
                return Some(c);
            }
        }
    }
    walk_files(pkg, &[])
        .into_iter()
        .find(|f| f.rel.last().is_some_and(|n| *n == base))
        .map(|f| f.path)
}

fn decode_inline(data: &str) -> Option<Rgba> {
    let d = data.trim();
    let d = match d.find("base64,") {
        Some(i) if d.starts_with("data:") => &d[i + 7..],
        _ => d,
    };
    let clean: String = d.chars().filter(|c| !c.is_whitespace()).collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(clean.as_bytes())
        .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(clean.as_bytes()))
        .ok()?;
    decode_png(&bytes).ok()
}

/// Convert the save at `save_path` inside the package `pkg` in place.
pub fn convert(pkg: &Path, save_path: &Path) -> Result<Imported, String> {
    let bytes = std::fs::read(save_path).map_err(|e| format!("cannot read the save: {e}"))?;
    let doc: Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("the save is not valid JSON: {e}"))?;
    let Value::Object(doc) = doc else {
        return Err("the save is not a valid JSON object".into());
    };
    let save_dir = save_path.parent().unwrap_or(pkg).to_path_buf();
    let save_name = save_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model.save".into());

    // Layers.
    let mut layers: Vec<Layer> = Vec::new();
    for (key, v) in &doc {
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Value::Object(l) = v else { continue };
        let order: i64 = key.parse().unwrap_or(0);
        let path = l
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let image = match l.get("imageData").and_then(Value::as_str) {
            Some(d) if !d.trim().is_empty() => decode_inline(d),
            _ => None,
        }
        .or_else(|| {
            if path.trim().is_empty() {
                return None;
            }
            find_asset(pkg, &save_dir, &path)
                .and_then(|p| std::fs::read(p).ok())
                .and_then(|b| decode_png(&b).ok())
        });
        let Some(image) = image else { continue };
        let mut raw = l.clone();
        raw.remove("imageData");
        let id = ident(l.get("identification"));
        let frames = int(l.get("frames"), 1).clamp(1, i64::from(image.w.max(1))) as u32;
        let file = format!(
            "layers/plus_{:04}_{}.png",
            order.max(0),
            safe_id(&id.clone().unwrap_or_else(|| key.clone()))
        );
        layers.push(Layer {
            key: key.clone(),
            order,
            parent: ident(l.get("parentId")),
            id,
            pos: vec2(l.get("pos")),
            offset: vec2(l.get("offset")),
            zindex: int(l.get("zindex"), 0),
            show_talk: int(l.get("showTalk"), 0),
            show_blink: int(l.get("showBlink"), 0),
            frames,
            anim_speed: num(l.get("animSpeed"), 0.0),
            toggle: opt_str(l.get("toggle")),
            costume: costume_layers(l.get("costumeLayers")),
            clipped: boolean(l.get("clipped")),
            raw,
            image,
            file,
        });
    }
    if layers.is_empty() {
        return Err("the save did not contain decodable layers".into());
    }

    // Parent chains (nearest first), cycles broken.
    let by_id: HashMap<String, usize> = layers
        .iter()
        .enumerate()
        .filter_map(|(i, l)| l.id.clone().map(|id| (id, i)))
        .collect();
    let chains: Vec<Vec<usize>> = (0..layers.len())
        .map(|i| {
            let mut chain = Vec::new();
            let mut seen = HashSet::from([i]);
            let mut cur = layers[i].parent.clone();
            while let Some(pid) = cur {
                match by_id.get(&pid) {
                    Some(&p) if seen.insert(p) => {
                        chain.push(p);
                        cur = layers[p].parent.clone();
                    }
                    _ => break,
                }
            }
            chain
        })
        .collect();
    let abs: Vec<(f64, f64)> = (0..layers.len())
        .map(|i| {
            let mut p = layers[i].pos;
            for &a in &chains[i] {
                p.0 += layers[a].pos.0;
                p.1 += layers[a].pos.1;
            }
            p
        })
        .collect();
    let draw: Vec<(f64, f64)> = (0..layers.len())
        .map(|i| {
            let (fw, fh) = layers[i].frame_size();
            (
                abs[i].0 + layers[i].offset.0 - f64::from(fw) / 2.0,
                abs[i].1 + layers[i].offset.1 - f64::from(fh) / 2.0,
            )
        })
        .collect();
    let mut min = (f64::MAX, f64::MAX);
    let mut max = (f64::MIN, f64::MIN);
    for (i, l) in layers.iter().enumerate() {
        let (fw, fh) = l.frame_size();
        min.0 = min.0.min(draw[i].0);
        min.1 = min.1.min(draw[i].1);
        max.0 = max.0.max(draw[i].0 + f64::from(fw));
        max.1 = max.1.max(draw[i].1 + f64::from(fh));
    }
    let (min_x, min_y) = (min.0.trunc(), min.1.trunc());
    let width = ((max.0.trunc() - min_x) as i64).max(1);
    let height = ((max.1.trunc() - min_y) as i64).max(1);
    if width > 8192 || height > 8192 {
        return Err(format!(
            "the canvas of {width}x{height} pixels is too large"
        ));
    }

    let mode_visible = |l: &Layer, talking: bool, blinking: bool| {
        let v = l.show_talk
            + 3 * l.show_blink
            + if talking { 10 } else { 0 }
            + if blinking { 20 } else { 0 };
        VISIBLE.contains(&v)
    };
    let costume_visible = |i: usize, c: usize| {
        layers[i].costume[c] == 1 && chains[i].iter().all(|&a| layers[a].costume[c] == 1)
    };
    let compose = |talking: bool| -> Result<(Rgba, usize), String> {
        let mut canvas = Rgba::new(width as u32, height as u32)?;
        let mut idx: Vec<usize> = (0..layers.len()).collect();
        idx.sort_by_key(|&i| (layers[i].zindex, layers[i].order));
        let mut drawn = 0;
        for i in idx {
            let l = &layers[i];
            let visible = costume_visible(i, 0)
                && mode_visible(l, talking, false)
                && chains[i]
                    .iter()
                    .all(|&a| mode_visible(&layers[a], talking, false));
            if !visible {
                continue;
            }
            let (fw, fh) = l.frame_size();
            let frame = l.image.crop(0, 0, fw, fh);
            canvas.draw_over(
                &frame,
                (draw[i].0 - min_x).round() as i64,
                (draw[i].1 - min_y).round() as i64,
            );
            drawn += 1;
        }
        Ok((canvas, drawn))
    };
    let (idle, n_idle) = compose(false)?;
    let (talking, n_talk) = compose(true)?;
    if n_idle == 0 || n_talk == 0 {
        return Err("the save has no visible idle/talking layers".into());
    }

    // Settings (settings.pngtp beside the save, else anywhere in the package).
    let settings: Map<String, Value> = find_asset(pkg, &save_dir, "settings.pngtp")
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| match v {
            Value::Object(m) => Some(m),
            _ => None,
        })
        .unwrap_or_default();
    let settings_loaded = !settings.is_empty();
    let mut costume_keys: Vec<String> = DEFAULT_KEYS.iter().map(|s| s.to_string()).collect();
    if let Some(Value::Array(keys)) = settings.get("costumeKeys") {
        for (i, k) in keys.iter().take(STATES).enumerate() {
            costume_keys[i] = match k {
                Value::Null => "null".into(),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
        }
    }
    let blink_speed = num(settings.get("blinkSpeed"), 1.0).clamp(0.1, 1000.0);
    let blink_chance = int(settings.get("blinkChance"), 200).clamp(1, 1_000_000);
    let bounce = boolean(settings.get("bounceOnCostumeChange"));
    let base = (420.0 / 60.0 * blink_speed * 1000.0).round() as i64;
    let spread = (blink_chance as f64 / 60.0 * 1000.0).round() as i64;
    let interval_min = base.max(500);
    let interval_max = interval_min.max(base + 2 * spread);

    let mut hotkeys = Vec::new();
    let mut seen_keys = HashSet::new();
    for (i, k) in costume_keys.iter().enumerate() {
        let t = k.trim();
        if t.is_empty() || t.eq_ignore_ascii_case("null") || !seen_keys.insert(t.to_lowercase()) {
            continue;
        }
        let keycode = if t.chars().count() == 1 {
            t.to_uppercase()
                .chars()
                .next()
                .map(|c| c as u32)
                .unwrap_or(0)
        } else {
            0
        };
        hotkeys.push(json!({
            "state_index": i, "key": t, "keycode": keycode,
            "ctrl": false, "shift": false, "alt": false, "meta": false,
            "label": format!("Costume {}", i + 1), "name": format!("Costume {}", i + 1),
        }));
    }
    let mut toggles: Map<String, Value> = Map::new();
    for l in &layers {
        if let Some(t) = &l.toggle {
            let e = toggles.entry(t.clone()).or_insert_with(|| json!([]));
            if let Value::Array(a) = e {
                a.push(json!(l.label()));
            }
        }
    }

    let f = |l: &Layer, k: &str| num(l.raw.get(k), 0.0);
    let motion = |l: &Layer| {
        (f(l, "xAmp").abs() > 1e-4 && f(l, "xFrq").abs() > 1e-4)
            || (f(l, "yAmp").abs() > 1e-4 && f(l, "yFrq").abs() > 1e-4)
    };
    let physics =
        |l: &Layer| f(l, "drag") != 0.0 || f(l, "rotDrag") != 0.0 || f(l, "stretchAmount") != 0.0;
    let any_motion = layers.iter().any(motion);
    let any_physics = layers.iter().any(physics);
    let any_sheet = layers.iter().any(|l| l.frames > 1 && l.anim_speed > 0.0);
    let any_clipped = layers.iter().any(|l| l.clipped);

    // Layer metadata.
    let mut layer_meta = Vec::new();
    for (i, l) in layers.iter().enumerate() {
        let (fw, fh) = l.frame_size();
        let x = r3(draw[i].0 - min_x);
        let y = r3(draw[i].1 - min_y);
        let node_origin = json!([r3(abs[i].0 - min_x), r3(abs[i].1 - min_y)]);
        let draw_offset = json!([
            r3(l.offset.0 - f64::from(fw) / 2.0),
            r3(l.offset.1 - f64::from(fh) / 2.0)
        ]);
        let anim = if l.anim_speed > 0.0 {
            (l.anim_speed / 24.0 * 10000.0).round() / 10000.0
        } else {
            0.0
        };
        let parent_chain: Vec<String> = chains[i].iter().map(|&a| layers[a].label()).collect();
        let states: Vec<Value> = (0..STATES)
            .map(|s| {
                json!({
                    "state_index": s, "costume_index": s, "costume_number": s + 1,
                    "x": x, "y": y,
                    "position": [l.pos.0, l.pos.1], "local_position": [l.pos.0, l.pos.1],
                    "node_origin": node_origin, "sprite_offset": [l.offset.0, l.offset.1],
                    "draw_offset": draw_offset, "plus_transform": true,
                    "center_x": r3(abs[i].0), "center_y": r3(abs[i].1),
                    "offset": [l.offset.0, l.offset.1],
                    "xFrq": f(l, "xFrq"), "xAmp": f(l, "xAmp"), "yFrq": f(l, "yFrq"), "yAmp": f(l, "yAmp"),
                    "rdragStr": f(l, "rotDrag"), "dragSpeed": f(l, "drag"),
                    "stretchAmount": f(l, "stretchAmount"),
                    "rLimitMin": num(l.raw.get("rLimitMin"), -180.0),
                    "rLimitMax": num(l.raw.get("rLimitMax"), 180.0),
                    "frames": l.frames, "hframes": l.frames, "vframes": 1, "frame": 0,
                    "frame_width": fw, "frame_height": fh,
                    "image_width": l.image.w, "image_height": l.image.h,
                    "animation_speed": anim, "source_anim_speed": l.anim_speed,
                    "physics": physics(l) || motion(l),
                    "ignore_bounce": boolean(l.raw.get("ignoreBounce")),
                    "costumeLayers": l.costume, "toggle": l.toggle, "clipped": l.clipped,
                    "visible": l.costume[s] == 1,
                    "ancestor_visible": chains[i].iter().all(|&a| layers[a].costume[s] == 1),
                })
            })
            .collect();
        layer_meta.push(json!({
            "image": l.file, "key": l.key, "identification": l.id,
            "parentId": l.parent, "parent_id": l.parent, "parent_chain": parent_chain,
            "local_position": [l.pos.0, l.pos.1], "node_origin": node_origin,
            "sprite_offset": [l.offset.0, l.offset.1], "draw_offset": draw_offset,
            "plus_transform": true,
            "path": l.raw.get("path").cloned().unwrap_or(json!("")),
            "order": l.order, "zindex": l.zindex, "x": x, "y": y,
            "width": fw, "height": fh, "image_width": l.image.w, "image_height": l.image.h,
            "frame_width": fw, "frame_height": fh, "hframes": l.frames, "vframes": 1,
            "base_scale": [1, 1], "base_flip_h": false, "base_flip_v": false,
            "showTalk": l.show_talk, "showBlink": l.show_blink, "frames": l.frames,
            "animation_speed": anim, "source_anim_speed": l.anim_speed,
            "costumeLayers": l.costume, "toggle": l.toggle, "clipped": l.clipped,
            "state": states[0].clone(), "states": states,
            "metadata": Value::Object(l.raw.clone()),
        }));
    }
    let warnings = vec![
        "project imported through layered_canvas_v1 (adapter_version 2); speech, blink, costumes, hotkeys, visibility toggles, layer offsets, parent positions, wobble and sprite-sheet metadata supported; Godot collision/clip details preserved as metadata".to_string(),
    ];
    let own = json!({
        "capabilities": {
            "idle_talking_swap": true,
            "speech_layers": true, "blink_layers": true,
            "hotkeys": !hotkeys.is_empty(), "toggles": !toggles.is_empty(),
            "costumes": true, "motion_layers": any_motion,
            "sprite_sheet_animation": any_sheet, "physics": any_physics,
            "mesh": false,
        },
        "runtime_features": {
            "layer_motion": any_motion, "sprite_sheet_animation": any_sheet,
            "layered_breathing": true, "plus_transform_stack": true,
            "plus_physics": any_motion || any_physics, "clip_children_rect": any_clipped,
            "costume_change_bounce": bounce, "mesh_deformation": false, "physics_v2": false,
            "unsupported_features": [
                "godot_collision_polygons",
                "clip_children is approximated with rectangular sprite clipping, not alpha masks"
            ],
        },
        "canvas": {"width": width, "height": height},
        "blink": {
            "enabled": true, "interval_min_ms": interval_min, "interval_max_ms": interval_max,
            "duration_ms": 200, "source_blink_speed": blink_speed, "source_blink_chance": blink_chance,
        },
        "plus_settings": {
            "settings_loaded": settings_loaded, "costumeKeys": costume_keys,
            "blinkSpeed": blink_speed, "blinkChance": blink_chance,
            "bounceOnCostumeChange": bounce,
        },
        "state_count": STATES,
        "settings": {"states": (0..STATES).map(|i| json!({"name": format!("costume_{}", i + 1), "label": format!("Costume {}", i + 1)})).collect::<Vec<_>>()},
        "hotkeys": hotkeys,
        "toggles": toggles,
        "layers": layer_meta,
    });
    let metadata = layered_metadata(SOURCE_FORMAT, "pngtuber-plus", &save_name, &warnings, own);

    write_layered(
        pkg,
        LayeredPackage {
            source_format: SOURCE_FORMAT,
            metadata_file: METADATA_FILE,
            name: stem(&save_name).to_string(),
            idle: &idle,
            talking: &talking,
            parts: layers.iter().map(|l| (l.file.as_str(), &l.image)).collect(),
            source: (save_path != pkg.join("source.save")).then_some(("source.save", &bytes[..])),
            metadata,
            warnings,
        },
    )
}

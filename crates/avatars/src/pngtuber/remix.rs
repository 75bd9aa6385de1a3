//! The `pngtuber_layered_project` adapter (`layered_canvas_v1`, adapter_version 2):
//! a PNGTube Remix `.pngRemix` project (a Godot 4 binary Variant dictionary with
//! `sprites_array`, embedded PNGs and per-state sprite dictionaries) becomes
//! flattened `idle.png`/`talking.png`, one PNG per sprite under `layers/`, the
//! layered metadata `metadata.pngtube-remix.json` and a `model.json`.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use base64::Engine;
use serde_json::{json, Map, Value};

use super::godot::{self, Variant};
use super::image::{decode_png, Rgba};
use super::{Imported, ADAPTER_VERSION, LAYERED_ADAPTER};
use crate::fsutil::stem;

pub const SOURCE_FORMAT: &str = "pngtuber_layered_project";
pub const METADATA_FILE: &str = "metadata.pngtube-remix.json";

/// State keys copied verbatim into the metadata (physics, motion, follow, animation).
const STATE_KEYS: &[&str] = &[
    "xFrq",
    "xAmp",
    "yFrq",
    "yAmp",
    "rdragStr",
    "dragSpeed",
    "stretchAmount",
    "rLimitMin",
    "rLimitMax",
    "rot_frq",
    "wiggle",
    "wiggle_amp",
    "wiggle_freq",
    "wiggle_physics",
    "physics",
    "look_at_mouse_pos",
    "look_at_mouse_pos_y",
    "mouse_rotation",
    "mouse_rotation_max",
    "mouse_scale_x",
    "mouse_scale_y",
    "pos_x_min",
    "pos_x_max",
    "pos_y_min",
    "pos_y_max",
    "pos_swap_x",
    "pos_swap_y",
    "pos_invert_x",
    "pos_invert_y",
    "rot_min",
    "rot_max",
    "rot_swap",
    "rot_invert",
    "scale_x_min",
    "scale_x_max",
    "scale_y_min",
    "scale_y_max",
    "scale_swap_x",
    "scale_swap_y",
    "scale_invert_x",
    "scale_invert_y",
    "follow_mouse_velocity",
    "follow_parent_effects",
    "follow_wa_tip",
    "follow_wa_mini",
    "follow_wa_max",
    "follow_strength",
    "follow_range",
    "chain_softness",
    "chain_rot_min",
    "chain_rot_max",
    "bone_length",
    "tip_point",
    "mesh_phys_x",
    "mesh_phys_y",
    "use_object_pos",
    "phys_eff",
    "ignore_bounce",
    "static_obj",
    "drag_snap",
    "mo_xFrq",
    "mo_xAmp",
    "mo_yFrq",
    "mo_yAmp",
    "mo_rdragStr",
    "mo_dragSpeed",
    "mo_stretchAmount",
    "mo_tip_point",
    "mo_mesh_phys_x",
    "mo_mesh_phys_y",
    "mo_use_object_pos",
    "scream_xFrq",
    "scream_xAmp",
    "scream_yFrq",
    "scream_yAmp",
    "scream_rdragStr",
    "scream_dragSpeed",
    "scream_stretchAmount",
    "scream_tip_point",
    "scream_mesh_phys_x",
    "scream_mesh_phys_y",
    "scream_use_object_pos",
    "img_animated",
    "non_animated_sheet",
    "animate_to_mouse",
    "animate_to_mouse_speed",
    "animate_to_mouse_track_pos",
    "animation_speed",
    "position",
    "offset",
    "scale",
    "rotation",
    "z_index",
    "z_as_relative",
    "visible",
    "folder",
    "should_talk",
    "open_mouth",
    "should_blink",
    "open_eyes",
    "hframes",
    "vframes",
    "frames",
    "frame",
    "flip_sprite_h",
    "flip_sprite_v",
];
const MESH_DICT_KEYS: &[&str] = &[
    "mesh",
    "mesh_data",
    "meshData",
    "deform_mesh",
    "deformMesh",
    "polygon",
    "polygon_data",
    "mesh_dict",
];
const VERTEX_KEYS: &[&str] = &[
    "vertices",
    "vertexes",
    "points",
    "mesh_vertices",
    "mesh_points",
    "verts",
];
const UV_KEYS: &[&str] = &["uvs", "uv", "mesh_uvs", "mesh_uv", "texture_uvs", "tex_uvs"];
const TRIANGLE_KEYS: &[&str] = &[
    "triangles",
    "triangle_indices",
    "indices",
    "mesh_triangles",
    "faces",
    "polygons",
];
const BINDING_KEYS: &[&str] = &[
    "bindings",
    "binds",
    "weights",
    "bone_weights",
    "bones",
    "mesh_bindings",
];
const MESH_HINT_KEYS: &[&str] = &["tip_point", "mesh_phys_x", "mesh_phys_y", "use_object_pos"];
const PHYS_HINT_KEYS: &[&str] = &[
    "tip_point",
    "mesh_phys_x",
    "mesh_phys_y",
    "chain_softness",
    "chain_rot_min",
    "chain_rot_max",
    "drag_snap",
];

struct St<'a> {
    raw: Option<&'a Variant>,
}

impl<'a> St<'a> {
    fn v(&self, k: &str) -> Option<&'a Variant> {
        self.raw.and_then(|r| r.get(k))
    }
    fn f(&self, k: &str, d: f64) -> f64 {
        self.v(k).and_then(Variant::as_f64).unwrap_or(d)
    }
    fn b(&self, k: &str, d: bool) -> bool {
        self.v(k).and_then(Variant::as_bool).unwrap_or(d)
    }
    fn v2(&self, k: &str, d: (f64, f64)) -> (f64, f64) {
        self.v(k).and_then(Variant::as_vec2).unwrap_or(d)
    }
    fn present(&self, k: &str) -> bool {
        self.v(k).is_some_and(|v| *v != Variant::Nil)
    }
}

struct Sprite<'a> {
    order: usize,
    id: i64,
    parent: Option<i64>,
    name: String,
    sprite_type: Value,
    image: Rgba,
    states: Vec<&'a Variant>,
    raw: &'a Variant,
    inactive_asset: bool,
    show_event: Option<Key>,
    hide_events: Vec<Key>,
    file: String,
}

impl<'a> Sprite<'a> {
    fn st(&self, s: usize) -> St<'a> {
        St {
            raw: self.states.get(s).or_else(|| self.states.first()).copied(),
        }
    }
    /// Frame size and the cell of the current frame for state `s`.
    fn frame(&self, s: usize) -> (u32, u32, u32, u32) {
        let st = self.st(s);
        // Numbers of the project file are clamped before any cast or product
        // (at most 4096 cells per axis: 4096 * 4096 * 64 fits in u32).
        let cells = |k: &str| st.f(k, 1.0).clamp(1.0, 4096.0) as u32;
        let (h, v) = (cells("hframes"), cells("vframes"));
        let max_frames = h * v * 64;
        let frames = st
            .f("frames", f64::from(h * v))
            .clamp(1.0, f64::from(max_frames)) as u32;
        let rows = v.max(frames.div_ceil(h));
        let fw = (self.image.w / h).max(1);
        let fh = (self.image.h / rows).max(1);
        let frame = st.f("frame", 0.0).clamp(0.0, f64::from(frames - 1)) as u32;
        (fw, fh, (frame % h) * fw, (frame / h) * fh)
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    keycode: i64,
    ctrl: bool,
    shift: bool,
    alt: bool,
    meta: bool,
}

impl Key {
    fn from(v: &Variant) -> Option<Key> {
        let ev = v.get("hot_key").unwrap_or(v);
        let props = ev.get("properties").unwrap_or(ev);
        let code = props
            .get("keycode")
            .and_then(Variant::as_i64)
            .filter(|c| *c != 0)
            .or_else(|| props.get("physical_keycode").and_then(Variant::as_i64))?;
        if code == 0 {
            return None;
        }
        let b = |k: &str| props.get(k).and_then(Variant::as_bool).unwrap_or(false);
        Some(Key {
            keycode: code,
            ctrl: b("ctrl_pressed"),
            shift: b("shift_pressed"),
            alt: b("alt_pressed"),
            meta: b("meta_pressed"),
        })
    }
    fn label(&self) -> String {
        let mut parts = Vec::new();
        for (on, n) in [
            (self.ctrl, "Ctrl"),
            (self.shift, "Shift"),
            (self.alt, "Alt"),
            (self.meta, "Meta"),
        ] {
            if on {
                parts.push(n.to_string());
            }
        }
        let c = self.keycode;
        parts.push(if (48..=57).contains(&c) || (65..=90).contains(&c) {
            char::from(c as u8).to_string()
        } else if (4194332..=4194343).contains(&c) {
            format!("F{}", c - 4194331)
        } else {
            c.to_string()
        });
        parts.join("+")
    }
    fn json(&self) -> Value {
        json!({"key": self.label(), "keycode": self.keycode, "ctrl": self.ctrl,
               "shift": self.shift, "alt": self.alt, "meta": self.meta})
    }
}

fn image_bytes(v: &Variant) -> Option<Vec<u8>> {
    match v {
        Variant::Bytes(b) if !b.is_empty() => Some(b.clone()),
        Variant::Str(s) if !s.trim().is_empty() => {
            let d = s.trim();
            let d = d.find("base64,").map(|i| &d[i + 7..]).unwrap_or(d);
            base64::engine::general_purpose::STANDARD
                .decode(d.as_bytes())
                .ok()
        }
        _ => None,
    }
}

/// Points as flat `[x, y, ...]`, pairs, vectors or `{x, y}`/`{u, v}` objects.
fn points(v: &Variant) -> Option<Vec<[f64; 2]>> {
    let a = v.as_array()?;
    if a.iter().all(|x| x.as_f64().is_some()) {
        if a.len() % 2 != 0 {
            return None;
        }
        return Some(
            a.chunks(2)
                .map(|c| [c[0].as_f64().unwrap_or(0.0), c[1].as_f64().unwrap_or(0.0)])
                .collect(),
        );
    }
    a.iter()
        .map(|p| {
            p.as_vec2().map(|(x, y)| [x, y]).or_else(|| {
                let x = p.get("x").or_else(|| p.get("u"))?.as_f64()?;
                let y = p.get("y").or_else(|| p.get("v"))?.as_f64()?;
                Some([x, y])
            })
        })
        .collect()
}

fn triangles(v: &Variant) -> Option<Vec<[i64; 3]>> {
    let a = v.as_array()?;
    if a.iter().all(|x| x.as_i64().is_some()) {
        if a.len() % 3 != 0 {
            return None;
        }
        return Some(
            a.chunks(3)
                .map(|c| {
                    [
                        c[0].as_i64().unwrap_or(-1),
                        c[1].as_i64().unwrap_or(-1),
                        c[2].as_i64().unwrap_or(-1),
                    ]
                })
                .collect(),
        );
    }
    a.iter()
        .map(|t| {
            let t = t.as_array()?;
            if t.len() != 3 {
                return None;
            }
            Some([t[0].as_i64()?, t[1].as_i64()?, t[2].as_i64()?])
        })
        .collect()
}

/// Mesh of a sprite/state: real geometry only when vertices, matching UVs and
/// in-range triangles are all present.
fn extract_mesh(sprite: &Variant, state: Option<&Variant>) -> Option<Value> {
    let mesh_dict = MESH_DICT_KEYS.iter().find_map(|k| {
        state
            .and_then(|s| s.get(k))
            .or_else(|| sprite.get(k))
            .filter(|v| matches!(v, Variant::Dict(_)))
    });
    let sources: Vec<(&str, &Variant)> = [
        ("mesh", mesh_dict),
        ("state", state),
        ("sprite", Some(sprite)),
    ]
    .into_iter()
    .filter_map(|(n, v)| v.map(|v| (n, v)))
    .collect();
    let find = |keys: &[&str]| -> Option<(String, &Variant)> {
        for (src, v) in &sources {
            for k in keys {
                if let Some(x) = v.get(k).filter(|x| **x != Variant::Nil) {
                    return Some((format!("{src}.{k}"), x));
                }
            }
        }
        None
    };
    let verts = find(VERTEX_KEYS);
    let uvs = find(UV_KEYS);
    let tris = find(TRIANGLE_KEYS);
    let binds = find(BINDING_KEYS);
    if mesh_dict.is_none() && verts.is_none() && uvs.is_none() && tris.is_none() {
        return None;
    }
    let vp = verts
        .as_ref()
        .and_then(|(_, v)| points(v))
        .unwrap_or_default();
    let up = uvs
        .as_ref()
        .and_then(|(_, v)| points(v))
        .unwrap_or_default();
    let tp = tris
        .as_ref()
        .and_then(|(_, v)| triangles(v))
        .unwrap_or_default();
    let reason = if vp.len() < 3 {
        Some("mesh geometry missing vertices")
    } else if up.len() != vp.len() {
        Some("mesh geometry missing matching UV coordinates")
    } else if tp.is_empty() {
        Some("mesh geometry missing triangles")
    } else if tp
        .iter()
        .flatten()
        .any(|&i| i < 0 || i as usize >= vp.len())
    {
        Some("mesh triangle index out of range")
    } else {
        None
    };
    let mut fields = Map::new();
    for (n, f) in [
        ("vertices", &verts),
        ("uvs", &uvs),
        ("triangles", &tris),
        ("bindings", &binds),
    ] {
        if let Some((src, _)) = f {
            fields.insert(n.into(), json!(src));
        }
    }
    Some(json!({
        "valid": reason.is_none(),
        "vertices": vp, "uvs": up, "triangles": tp,
        "bindings": binds.map(|(_, v)| v.to_json()).unwrap_or(Value::Null),
        "source_fields": fields,
        "degrade_reason": reason,
    }))
}

fn whitelisted(st: &St) -> Map<String, Value> {
    let mut m = Map::new();
    for k in STATE_KEYS {
        m.insert(
            (*k).into(),
            st.v(k).map(Variant::to_json).unwrap_or(Value::Null),
        );
    }
    m
}

fn variants(st: &St, base: &str) -> bool {
    ["", "mo_", "scream_"]
        .iter()
        .any(|p| st.present(&format!("{p}{base}")))
}

fn has_physics(st: &St) -> bool {
    let t = |k: &str| {
        st.v(k)
            .is_some_and(|v| v.as_bool().unwrap_or(false) || v.as_f64().is_some_and(|f| f != 0.0))
    };
    let big = |a: &str, b: &str| st.f(a, 0.0).abs() > 1e-4 && st.f(b, 0.0).abs() > 1e-4;
    t("physics")
        || t("wiggle")
        || big("xAmp", "xFrq")
        || big("yAmp", "yFrq")
        || (st.f("wiggle_amp", 0.0).abs() > 1e-4
            && (st.f("wiggle_freq", 0.0).abs() > 1e-4 || st.f("rot_frq", 0.0).abs() > 1e-4))
        || PHYS_HINT_KEYS.iter().any(|k| variants(st, k))
}

fn safe_id(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

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
    let metadata = json!({
        "adapter": LAYERED_ADAPTER,
        "adapter_version": ADAPTER_VERSION,
        "runtime": "layered_canvas",
        "supported": super::capabilities(SOURCE_FORMAT),
        "source_format": SOURCE_FORMAT,
        "source_application": "pngtube-remix",
        "source_file": file_name,
        "warnings": warnings,
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

    super::write_layered(
        pkg,
        super::LayeredPackage {
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

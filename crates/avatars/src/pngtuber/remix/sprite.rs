//! A layered project's sprites as the adapter reads them: per-state values
//! with defaults, frame cells of sprite sheets, hot keys, embedded images and
//! the state keys copied into the metadata.

use base64::Engine;
use serde_json::{json, Map, Value};

use super::super::godot::Variant;
use super::super::image::Rgba;

/// State keys copied verbatim into the metadata (physics, motion, follow, animation).
pub(super) const STATE_KEYS: &[&str] = &[
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

const PHYS_HINT_KEYS: &[&str] = &[
    "tip_point",
    "mesh_phys_x",
    "mesh_phys_y",
    "chain_softness",
    "chain_rot_min",
    "chain_rot_max",
    "drag_snap",
];

pub(super) struct St<'a> {
    pub(super) raw: Option<&'a Variant>,
}

impl<'a> St<'a> {
    pub(super) fn v(&self, k: &str) -> Option<&'a Variant> {
        self.raw.and_then(|r| r.get(k))
    }
    pub(super) fn f(&self, k: &str, d: f64) -> f64 {
        self.v(k).and_then(Variant::as_f64).unwrap_or(d)
    }
    pub(super) fn b(&self, k: &str, d: bool) -> bool {
        self.v(k).and_then(Variant::as_bool).unwrap_or(d)
    }
    pub(super) fn v2(&self, k: &str, d: (f64, f64)) -> (f64, f64) {
        self.v(k).and_then(Variant::as_vec2).unwrap_or(d)
    }
    pub(super) fn present(&self, k: &str) -> bool {
        self.v(k).is_some_and(|v| *v != Variant::Nil)
    }
}

pub(super) struct Sprite<'a> {
    pub(super) order: usize,
    pub(super) id: i64,
    pub(super) parent: Option<i64>,
    pub(super) name: String,
    pub(super) sprite_type: Value,
    pub(super) image: Rgba,
    pub(super) states: Vec<&'a Variant>,
    pub(super) raw: &'a Variant,
    pub(super) inactive_asset: bool,
    pub(super) show_event: Option<Key>,
    pub(super) hide_events: Vec<Key>,
    pub(super) file: String,
}

impl<'a> Sprite<'a> {
    pub(super) fn st(&self, s: usize) -> St<'a> {
        St {
            raw: self.states.get(s).or_else(|| self.states.first()).copied(),
        }
    }
    /// Frame size and the cell of the current frame for state `s`.
    pub(super) fn frame(&self, s: usize) -> (u32, u32, u32, u32) {
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
pub(super) struct Key {
    pub(super) keycode: i64,
    pub(super) ctrl: bool,
    pub(super) shift: bool,
    pub(super) alt: bool,
    pub(super) meta: bool,
}

impl Key {
    pub(super) fn from(v: &Variant) -> Option<Key> {
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
    pub(super) fn label(&self) -> String {
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
    pub(super) fn json(&self) -> Value {
        json!({"key": self.label(), "keycode": self.keycode, "ctrl": self.ctrl,
               "shift": self.shift, "alt": self.alt, "meta": self.meta})
    }
}

pub(super) fn image_bytes(v: &Variant) -> Option<Vec<u8>> {
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

pub(super) fn whitelisted(st: &St) -> Map<String, Value> {
    let mut m = Map::new();
    for k in STATE_KEYS {
        m.insert(
            (*k).into(),
            st.v(k).map(Variant::to_json).unwrap_or(Value::Null),
        );
    }
    m
}

pub(super) fn variants(st: &St, base: &str) -> bool {
    ["", "mo_", "scream_"]
        .iter()
        .any(|p| st.present(&format!("{p}{base}")))
}

pub(super) fn has_physics(st: &St) -> bool {
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

//! Mesh geometry of a layered project's sprite: vertices, UVs, triangles and
//! bindings under the many key names the editor versions use, kept only when
//! they describe real, in-range geometry.

use serde_json::{json, Map, Value};

use super::super::godot::Variant;

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
pub(super) const VERTEX_KEYS: &[&str] = &[
    "vertices",
    "vertexes",
    "points",
    "mesh_vertices",
    "mesh_points",
    "verts",
];
pub(super) const UV_KEYS: &[&str] = &["uvs", "uv", "mesh_uvs", "mesh_uv", "texture_uvs", "tex_uvs"];
pub(super) const TRIANGLE_KEYS: &[&str] = &[
    "triangles",
    "triangle_indices",
    "indices",
    "mesh_triangles",
    "faces",
    "polygons",
];
pub(super) const BINDING_KEYS: &[&str] = &[
    "bindings",
    "binds",
    "weights",
    "bone_weights",
    "bones",
    "mesh_bindings",
];
pub(super) const MESH_HINT_KEYS: &[&str] =
    &["tip_point", "mesh_phys_x", "mesh_phys_y", "use_object_pos"];

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
pub(super) fn extract_mesh(sprite: &Variant, state: Option<&Variant>) -> Option<Value> {
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

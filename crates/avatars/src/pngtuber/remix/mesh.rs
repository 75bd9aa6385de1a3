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

/// A list of groups of `N` numbers, either flat (every item a number `num`
/// reads; its length a multiple of `N`) or one item per group read by `group`.
fn groups<T: Copy, const N: usize>(
    v: &Variant,
    num: fn(&Variant) -> Option<T>,
    group: impl Fn(&Variant) -> Option<[T; N]>,
) -> Option<Vec<[T; N]>> {
    let a = v.as_array()?;
    if let Some(nums) = a.iter().map(num).collect::<Option<Vec<T>>>() {
        if nums.len() % N != 0 {
            return None;
        }
        let flat = nums.chunks_exact(N).map(|c| std::array::from_fn(|i| c[i]));
        return Some(flat.collect());
    }
    a.iter().map(group).collect()
}

/// Points as flat `[x, y, ...]`, pairs, vectors or `{x, y}`/`{u, v}` objects.
fn points(v: &Variant) -> Option<Vec<[f64; 2]>> {
    groups(v, Variant::as_f64, |p| {
        p.as_vec2().map(|(x, y)| [x, y]).or_else(|| {
            let x = p.get("x").or_else(|| p.get("u"))?.as_f64()?;
            let y = p.get("y").or_else(|| p.get("v"))?.as_f64()?;
            Some([x, y])
        })
    })
}

/// Triangles as flat `[a, b, c, ...]` vertex indexes or `[a, b, c]` triples.
fn triangles(v: &Variant) -> Option<Vec<[i64; 3]>> {
    groups(v, Variant::as_i64, |t| match t.as_array()? {
        [a, b, c] => Some([a.as_i64()?, b.as_i64()?, c.as_i64()?]),
        _ => None,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_and_triangles_read_flat_and_nested_forms() {
        let ints = |v: &[i64]| Variant::Array(v.iter().map(|i| Variant::Int(*i)).collect());
        assert_eq!(
            points(&ints(&[1, 2, 3, 4])),
            Some(vec![[1.0, 2.0], [3.0, 4.0]])
        );
        assert_eq!(points(&ints(&[1, 2, 3])), None);
        assert_eq!(
            points(&Variant::Array(vec![Variant::Tuple(vec![0.5, 1.5])])),
            Some(vec![[0.5, 1.5]])
        );
        assert_eq!(triangles(&ints(&[0, 1, 2])), Some(vec![[0, 1, 2]]));
        assert_eq!(triangles(&ints(&[0, 1, 2, 3])), None);
        assert_eq!(
            triangles(&Variant::Array(vec![ints(&[2, 1, 0])])),
            Some(vec![[2, 1, 0]])
        );
        assert_eq!(triangles(&Variant::Array(vec![ints(&[2, 1])])), None);
    }
}

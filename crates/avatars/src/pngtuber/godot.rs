//! Decoder of Godot 4's binary Variant serialisation (`var_to_bytes`,
//! `FileAccess.store_var`), used by the layered project adapter. Every read is
//! bounds-checked, nesting is limited and counts are checked against the bytes
//! left, so a hostile file yields an error, never a panic or a huge allocation.

use serde_json::{json, Map, Value};

/// A decoded Variant.
#[derive(Clone, Debug, PartialEq)]
pub enum Variant {
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// Fixed-size tuples (vectors, rects, colours, transforms...).
    Tuple(Vec<f64>),
    Bytes(Vec<u8>),
    Array(Vec<Variant>),
    Dict(Vec<(Variant, Variant)>),
    Object {
        class: String,
        properties: Vec<(String, Variant)>,
    },
}

const MAX_DEPTH: usize = 64;

impl Variant {
    pub fn get(&self, key: &str) -> Option<&Variant> {
        match self {
            Variant::Dict(d) => d
                .iter()
                .find(|(k, _)| matches!(k, Variant::Str(s) if s == key))
                .map(|(_, v)| v),
            Variant::Object { properties, .. } => {
                properties.iter().find(|(k, _)| k == key).map(|(_, v)| v)
            }
            _ => None,
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Variant::Int(i) => Some(*i as f64),
            Variant::Float(f) if f.is_finite() => Some(*f),
            Variant::Bool(b) => Some(f64::from(u8::from(*b))),
            _ => None,
        }
    }
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Variant::Int(i) => Some(*i),
            Variant::Float(f) if f.is_finite() => Some(*f as i64),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Variant::Bool(b) => Some(*b),
            Variant::Int(i) => Some(*i != 0),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Variant::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_array(&self) -> Option<&[Variant]> {
        match self {
            Variant::Array(a) => Some(a),
            _ => None,
        }
    }
    /// A 2-vector from a tuple or a 2-element array.
    pub fn as_vec2(&self) -> Option<(f64, f64)> {
        match self {
            Variant::Tuple(t) if t.len() >= 2 => Some((t[0], t[1])),
            Variant::Array(a) if a.len() >= 2 => Some((a[0].as_f64()?, a[1].as_f64()?)),
            _ => None,
        }
    }
    /// JSON form for metadata (byte arrays become their length only).
    pub fn to_json(&self) -> Value {
        match self {
            Variant::Nil => Value::Null,
            Variant::Bool(b) => json!(b),
            Variant::Int(i) => json!(i),
            Variant::Float(f) if f.is_finite() => json!(f),
            Variant::Float(_) => Value::Null,
            Variant::Str(s) => json!(s),
            Variant::Tuple(t) => json!(t
                .iter()
                .map(|f| if f.is_finite() { json!(f) } else { Value::Null })
                .collect::<Vec<_>>()),
            Variant::Bytes(b) => json!({"bytes": b.len()}),
            Variant::Array(a) => Value::Array(a.iter().map(Variant::to_json).collect()),
            Variant::Dict(d) => {
                let mut m = Map::new();
                for (k, v) in d {
                    let key = match k {
                        Variant::Str(s) => s.clone(),
                        other => other.to_json().to_string(),
                    };
                    m.insert(key, v.to_json());
                }
                Value::Object(m)
            }
            Variant::Object { class, properties } => {
                let mut p = Map::new();
                for (k, v) in properties {
                    p.insert(k.clone(), v.to_json());
                }
                json!({"class": class, "properties": p})
            }
        }
    }
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or("truncated variant data")?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn left(&self) -> usize {
        self.b.len() - self.pos
    }
    fn u32(&mut self) -> Result<u32, String> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn i32(&mut self) -> Result<i32, String> {
        Ok(self.u32()? as i32)
    }
    fn i64(&mut self) -> Result<i64, String> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(i64::from_le_bytes(a))
    }
    fn f32(&mut self) -> Result<f64, String> {
        Ok(f64::from(f32::from_bits(self.u32()?)))
    }
    fn f64(&mut self) -> Result<f64, String> {
        Ok(f64::from_bits(self.i64()? as u64))
    }
    fn real(&mut self, wide: bool) -> Result<f64, String> {
        if wide {
            self.f64()
        } else {
            self.f32()
        }
    }
    fn pad(&mut self, n: usize) -> Result<(), String> {
        let p = (4 - n % 4) % 4;
        self.take(p).map(|_| ())
    }
    fn string(&mut self) -> Result<String, String> {
        let n = self.u32()? as usize;
        let s = self.take(n)?;
        self.pad(n)?;
        Ok(String::from_utf8_lossy(s).into_owned())
    }
    /// A count that cannot exceed the bytes left (each element takes ≥ `min` bytes).
    fn count(&mut self, min: usize) -> Result<usize, String> {
        let n = (self.u32()? & 0x7fff_ffff) as usize;
        if n.saturating_mul(min.max(1)) > self.left() {
            return Err("variant count exceeds the data".into());
        }
        Ok(n)
    }

    /// Skip the type description of a typed container's keys, values or
    /// elements: none (0), a built-in type (1: its id) or a class or script
    /// (2, 3: its name).
    fn skip_type_hint(&mut self, kind: u32) -> Result<(), String> {
        match kind {
            1 => {
                self.u32()?;
            }
            2 | 3 => {
                self.string()?;
            }
            _ => {}
        }
        Ok(())
    }

    fn variant(&mut self, depth: usize) -> Result<Variant, String> {
        if depth > MAX_DEPTH {
            return Err("variant nesting too deep".into());
        }
        let header = self.u32()?;
        let ty = header & 0xffff;
        let flags = header >> 16;
        let wide = flags & 1 != 0;
        let reals = |r: &mut Self, n: usize| -> Result<Variant, String> {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(r.real(wide)?);
            }
            Ok(Variant::Tuple(v))
        };
        let ints = |r: &mut Self, n: usize| -> Result<Variant, String> {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(f64::from(r.i32()?));
            }
            Ok(Variant::Tuple(v))
        };
        Ok(match ty {
            0 => Variant::Nil,
            1 => Variant::Bool(self.u32()? != 0),
            2 => Variant::Int(if wide {
                self.i64()?
            } else {
                i64::from(self.i32()?)
            }),
            3 => Variant::Float(self.real(wide)?),
            4 | 21 => Variant::Str(self.string()?),
            5 => reals(self, 2)?,
            6 => ints(self, 2)?,
            7 => reals(self, 4)?,
            8 => ints(self, 4)?,
            9 => reals(self, 3)?,
            10 => ints(self, 3)?,
            11 => reals(self, 6)?,
            12 | 14 | 15 => reals(self, 4)?,
            13 => ints(self, 4)?,
            16 => reals(self, 6)?,
            17 => reals(self, 9)?,
            18 => reals(self, 12)?,
            19 => reals(self, 16)?,
            20 => {
                let mut v = Vec::with_capacity(4);
                for _ in 0..4 {
                    v.push(self.f32()?);
                }
                Variant::Tuple(v)
            }
            22 => {
                // NodePath (new format): names + subnames as strings.
                let n = self.u32()?;
                if n & 0x8000_0000 == 0 {
                    return Err("old NodePath format is not supported".into());
                }
                let names = (n & 0x7fff_ffff) as usize;
                let subs = self.u32()? as usize;
                let _flags = self.u32()?;
                let total = names.saturating_add(subs);
                if total.saturating_mul(4) > self.left() {
                    return Err("variant count exceeds the data".into());
                }
                let mut parts = Vec::with_capacity(total);
                for _ in 0..total {
                    parts.push(self.string()?);
                }
                Variant::Str(parts.join("/"))
            }
            23 => Variant::Int(self.i64()?),
            24 => {
                if wide {
                    Variant::Int(self.i64()?)
                } else {
                    let class = self.string()?;
                    if class.is_empty() {
                        Variant::Nil
                    } else {
                        let n = self.count(8)?;
                        let mut properties = Vec::with_capacity(n);
                        for _ in 0..n {
                            let k = self.string()?;
                            let v = self.variant(depth + 1)?;
                            properties.push((k, v));
                        }
                        Variant::Object { class, properties }
                    }
                }
            }
            27 => {
                // Typed dictionaries carry key and value type descriptions.
                self.skip_type_hint(flags & 3)?;
                self.skip_type_hint((flags >> 2) & 3)?;
                let n = self.count(8)?;
                let mut d = Vec::with_capacity(n);
                for _ in 0..n {
                    let k = self.variant(depth + 1)?;
                    let v = self.variant(depth + 1)?;
                    d.push((k, v));
                }
                Variant::Dict(d)
            }
            28 => {
                // A typed array carries its element type description.
                self.skip_type_hint(flags & 3)?;
                let n = self.count(4)?;
                let mut a = Vec::with_capacity(n);
                for _ in 0..n {
                    a.push(self.variant(depth + 1)?);
                }
                Variant::Array(a)
            }
            29 => {
                let n = self.count(1)?;
                let b = self.take(n)?.to_vec();
                self.pad(n)?;
                Variant::Bytes(b)
            }
            // Packed int32, int64, float32 and float64 arrays.
            30..=33 => {
                let n = self.count(if ty % 2 == 0 { 4 } else { 8 })?;
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(match ty {
                        30 => Variant::Int(i64::from(self.i32()?)),
                        31 => Variant::Int(self.i64()?),
                        32 => Variant::Float(self.f32()?),
                        _ => Variant::Float(self.f64()?),
                    });
                }
                Variant::Array(v)
            }
            34 => {
                let n = self.count(4)?;
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(Variant::Str(self.string()?));
                }
                Variant::Array(v)
            }
            35..=38 => {
                let comps = match ty {
                    35 => 2,
                    36 => 3,
                    _ => 4,
                };
                let size = if ty == 37 || !wide { 4 } else { 8 };
                let n = self.count(comps * size)?;
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    let mut t = Vec::with_capacity(comps);
                    for _ in 0..comps {
                        t.push(if size == 8 { self.f64()? } else { self.f32()? });
                    }
                    v.push(Variant::Tuple(t));
                }
                Variant::Array(v)
            }
            other => return Err(format!("unsupported variant type {other}")),
        })
    }
}

/// Decode a whole file: with or without the `store_var` length prefix.
pub fn decode(bytes: &[u8]) -> Result<Variant, String> {
    if bytes.len() >= 8 {
        let n = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        if n == bytes.len() - 4 {
            let mut r = Reader {
                b: &bytes[4..],
                pos: 0,
            };
            if let Ok(v) = r.variant(0) {
                return Ok(v);
            }
        }
    }
    let mut r = Reader { b: bytes, pos: 0 };
    r.variant(0)
}

/// Encoder (the inverse of [`decode`]) for tests and tools.
pub fn encode(v: &Variant, out: &mut Vec<u8>) {
    fn pad(out: &mut Vec<u8>) {
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
    }
    fn string(s: &str, out: &mut Vec<u8>) {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
        pad(out);
    }
    match v {
        Variant::Nil => out.extend_from_slice(&0u32.to_le_bytes()),
        Variant::Bool(b) => {
            out.extend_from_slice(&1u32.to_le_bytes());
            out.extend_from_slice(&u32::from(*b).to_le_bytes());
        }
        Variant::Int(i) => {
            out.extend_from_slice(&(2u32 | 1 << 16).to_le_bytes());
            out.extend_from_slice(&i.to_le_bytes());
        }
        Variant::Float(f) => {
            out.extend_from_slice(&(3u32 | 1 << 16).to_le_bytes());
            out.extend_from_slice(&f.to_le_bytes());
        }
        Variant::Str(s) => {
            out.extend_from_slice(&4u32.to_le_bytes());
            string(s, out);
        }
        Variant::Tuple(t) => {
            // Encoded as Vector2 (2), Rect2 (4 reals) or a float64 array otherwise.
            let ty: u32 = match t.len() {
                2 => 5,
                3 => 9,
                4 => 7,
                _ => 33,
            };
            out.extend_from_slice(&ty.to_le_bytes());
            if ty == 33 {
                out.extend_from_slice(&(t.len() as u32).to_le_bytes());
                for f in t {
                    out.extend_from_slice(&f.to_le_bytes());
                }
            } else {
                for f in t {
                    out.extend_from_slice(&(*f as f32).to_le_bytes());
                }
            }
        }
        Variant::Bytes(b) => {
            out.extend_from_slice(&29u32.to_le_bytes());
            out.extend_from_slice(&(b.len() as u32).to_le_bytes());
            out.extend_from_slice(b);
            pad(out);
        }
        Variant::Array(a) => {
            out.extend_from_slice(&28u32.to_le_bytes());
            out.extend_from_slice(&(a.len() as u32).to_le_bytes());
            for x in a {
                encode(x, out);
            }
        }
        Variant::Dict(d) => {
            out.extend_from_slice(&27u32.to_le_bytes());
            out.extend_from_slice(&(d.len() as u32).to_le_bytes());
            for (k, x) in d {
                encode(k, out);
                encode(x, out);
            }
        }
        Variant::Object { class, properties } => {
            out.extend_from_slice(&24u32.to_le_bytes());
            string(class, out);
            out.extend_from_slice(&(properties.len() as u32).to_le_bytes());
            for (k, x) in properties {
                string(k, out);
                encode(x, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_hostile_input() {
        let v = Variant::Dict(vec![
            (Variant::Str("a".into()), Variant::Int(-5)),
            (Variant::Str("v".into()), Variant::Tuple(vec![1.5, -2.0])),
            (Variant::Str("b".into()), Variant::Bytes(vec![1, 2, 3])),
            (
                Variant::Str("l".into()),
                Variant::Array(vec![
                    Variant::Nil,
                    Variant::Bool(true),
                    Variant::Float(0.25),
                ]),
            ),
        ]);
        let mut out = Vec::new();
        encode(&v, &mut out);
        assert_eq!(decode(&out).unwrap(), v);
        let mut prefixed = (out.len() as u32).to_le_bytes().to_vec();
        prefixed.extend_from_slice(&out);
        assert_eq!(decode(&prefixed).unwrap(), v);
        for cut in 0..out.len() {
            let _ = decode(&out[..cut]);
        }
        // A count far beyond the data is refused without allocating.
        let mut bad = 28u32.to_le_bytes().to_vec();
        bad.extend_from_slice(&0x7fff_fff0u32.to_le_bytes());
        assert!(decode(&bad).is_err());
    }

    #[test]
    fn typed_containers_skip_their_type_descriptions() {
        let words = |w: &[u32]| w.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        // Array typed by a built-in type id (hint 1), two Nil elements.
        let array = words(&[28 | (1 << 16), 2, 2, 0, 0]);
        assert_eq!(
            decode(&array).unwrap(),
            Variant::Array(vec![Variant::Nil, Variant::Nil])
        );
        // Dictionary: keys typed by a class name (hint 2: "Node" as a string),
        // values by a type id (hint 1); one Nil → Nil pair.
        let mut dict = words(&[27 | ((2 | (1 << 2)) << 16), 4]);
        dict.extend_from_slice(b"Node");
        dict.extend(words(&[2, 1, 0, 0]));
        assert_eq!(
            decode(&dict).unwrap(),
            Variant::Dict(vec![(Variant::Nil, Variant::Nil)])
        );
        // Packed arrays: int32, int64, float32, float64.
        let mut packed = words(&[30, 2, 7, (-1i32) as u32]);
        assert_eq!(
            decode(&packed).unwrap(),
            Variant::Array(vec![Variant::Int(7), Variant::Int(-1)])
        );
        packed = words(&[31, 1]);
        packed.extend((-3i64).to_le_bytes());
        assert_eq!(
            decode(&packed).unwrap(),
            Variant::Array(vec![Variant::Int(-3)])
        );
        packed = words(&[32, 1, 0.5f32.to_bits()]);
        assert_eq!(
            decode(&packed).unwrap(),
            Variant::Array(vec![Variant::Float(0.5)])
        );
        packed = words(&[33, 1]);
        packed.extend(0.25f64.to_le_bytes());
        assert_eq!(
            decode(&packed).unwrap(),
            Variant::Array(vec![Variant::Float(0.25)])
        );
        // A description cut short is an error.
        assert!(decode(&words(&[28 | (2 << 16), 9])).is_err());
    }
}

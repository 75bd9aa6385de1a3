//! The PNG side of a character card: the `chara` (V2) and `ccv3` (V3) text
//! chunks of a PNG or APNG file, read and written.
//!
//! A hand-written chunk walker rather than the `png` crate: a card's text lives
//! in ancillary chunks and its image must come back byte for byte (APNG frames
//! included), so nothing is decoded or re-encoded; the walker checks the
//! signature, every chunk's length and CRC, and copies the image chunks as
//! they are. `tEXt`, `zTXt` and `iTXt` (compressed or not) are read.

use std::io::Read;

/// The eight bytes every PNG starts with.
pub const SIGNATURE: &[u8; 8] = b"\x89PNG\r\n\x1a\n";

/// Most bytes one inflated text chunk may give (the per-file limit).
const MAX_INFLATED: u64 = super::MAX_FILE_BYTES as u64;

/// Why a PNG cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PngError {
    NotPng,
    Truncated,
    BadCrc(String),
    BadText(String),
}

impl std::fmt::Display for PngError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PngError::NotPng => f.write_str("the file is not a PNG (no PNG signature)"),
            PngError::Truncated => f.write_str("the PNG is truncated (a chunk runs past the end)"),
            PngError::BadCrc(t) => write!(f, "the PNG chunk {t} has a wrong CRC"),
            PngError::BadText(m) => write!(f, "a PNG text chunk is malformed: {m}"),
        }
    }
}

/// One chunk: its type and where its data lies in the file.
struct Chunk<'a> {
    kind: [u8; 4],
    data: &'a [u8],
    /// The whole chunk (length, type, data, CRC).
    raw: &'a [u8],
}

fn chunks(bytes: &[u8]) -> Result<Vec<Chunk<'_>>, PngError> {
    if bytes.len() < 8 || &bytes[..8] != SIGNATURE {
        return Err(PngError::NotPng);
    }
    let mut out = Vec::new();
    let mut at = 8usize;
    while at < bytes.len() {
        let head = bytes.get(at..at + 8).ok_or(PngError::Truncated)?;
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let kind = [head[4], head[5], head[6], head[7]];
        let end = at
            .checked_add(12)
            .and_then(|v| v.checked_add(len))
            .ok_or(PngError::Truncated)?;
        let raw = bytes.get(at..end).ok_or(PngError::Truncated)?;
        let data = &raw[8..8 + len];
        let crc = u32::from_be_bytes([raw[8 + len], raw[9 + len], raw[10 + len], raw[11 + len]]);
        let mut h = crc32fast::Hasher::new();
        h.update(&kind);
        h.update(data);
        if h.finalize() != crc {
            return Err(PngError::BadCrc(
                String::from_utf8_lossy(&kind).into_owned(),
            ));
        }
        out.push(Chunk { kind, data, raw });
        at = end;
        if &kind == b"IEND" {
            break;
        }
    }
    Ok(out)
}

fn inflate(data: &[u8]) -> Result<Vec<u8>, PngError> {
    let mut out = Vec::new();
    flate2::read::ZlibDecoder::new(data)
        .take(MAX_INFLATED + 1)
        .read_to_end(&mut out)
        .map_err(|e| PngError::BadText(format!("cannot inflate: {e}")))?;
    if out.len() as u64 > MAX_INFLATED {
        return Err(PngError::BadText(
            "an inflated text chunk is too large".into(),
        ));
    }
    Ok(out)
}

/// The text chunks of a PNG as (keyword, text bytes), in file order.
pub fn text_chunks(bytes: &[u8]) -> Result<Vec<(String, Vec<u8>)>, PngError> {
    let mut out = Vec::new();
    for c in chunks(bytes)? {
        let split = |d: &[u8]| -> Result<(String, usize), PngError> {
            let nul = d
                .iter()
                .position(|b| *b == 0)
                .ok_or_else(|| PngError::BadText("a keyword without its NUL".into()))?;
            Ok((String::from_utf8_lossy(&d[..nul]).into_owned(), nul + 1))
        };
        match &c.kind {
            b"tEXt" => {
                let (k, at) = split(c.data)?;
                out.push((k, c.data[at..].to_vec()));
            }
            b"zTXt" => {
                let (k, at) = split(c.data)?;
                // One byte of compression method (0 = zlib), then the stream.
                let rest = c.data.get(at + 1..).unwrap_or_default();
                out.push((k, inflate(rest)?));
            }
            b"iTXt" => {
                let (k, at) = split(c.data)?;
                let d = &c.data[at..];
                if d.len() < 2 {
                    return Err(PngError::BadText("an iTXt chunk is truncated".into()));
                }
                let compressed = d[0] == 1;
                // Language tag, then the translated keyword, each NUL-ended.
                let mut rest = &d[2..];
                for _ in 0..2 {
                    let nul = rest
                        .iter()
                        .position(|b| *b == 0)
                        .ok_or_else(|| PngError::BadText("an iTXt chunk is truncated".into()))?;
                    rest = &rest[nul + 1..];
                }
                let text = if compressed {
                    inflate(rest)?
                } else {
                    rest.to_vec()
                };
                out.push((k, text));
            }
            _ => {}
        }
    }
    Ok(out)
}

fn chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 12);
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut h = crc32fast::Hasher::new();
    h.update(kind);
    h.update(data);
    out.extend_from_slice(&h.finalize().to_be_bytes());
    out
}

/// `image` with its card text chunks (`chara`, `ccv3`) replaced by `texts`
/// (keyword, Latin-1/ASCII text: base64 here), written as `tEXt` just before
/// `IEND`. Every other chunk is copied unchanged.
pub fn with_text_chunks(image: &[u8], texts: &[(&str, &str)]) -> Result<Vec<u8>, PngError> {
    let all = chunks(image)?;
    let mut out =
        Vec::with_capacity(image.len() + texts.iter().map(|t| t.1.len() + 32).sum::<usize>());
    out.extend_from_slice(SIGNATURE);
    for c in &all {
        if matches!(&c.kind, b"tEXt" | b"zTXt" | b"iTXt") {
            let key = c.data.split(|b| *b == 0).next().unwrap_or_default();
            if key.eq_ignore_ascii_case(b"chara") || key.eq_ignore_ascii_case(b"ccv3") {
                continue;
            }
        }
        if &c.kind == b"IEND" {
            break;
        }
        out.extend_from_slice(c.raw);
    }
    for (k, v) in texts {
        let mut data = Vec::with_capacity(k.len() + 1 + v.len());
        data.extend_from_slice(k.as_bytes());
        data.push(0);
        data.extend_from_slice(v.as_bytes());
        out.extend_from_slice(&chunk(b"tEXt", &data));
    }
    out.extend_from_slice(&chunk(b"IEND", &[]));
    Ok(out)
}

/// A small plain PNG (a square of one colour) for a character without an
/// image: the carrier of an exported card.
pub fn placeholder() -> Vec<u8> {
    const SIDE: u32 = 64;
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&SIDE.to_be_bytes());
    ihdr.extend_from_slice(&SIDE.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]); // 8-bit RGB
                                              // Each row: filter byte 0 (none), then the pixels.
    let mut row = vec![0u8];
    row.extend([0xb8u8, 0xc4, 0xe0].repeat(SIDE as usize));
    let raw = row.repeat(SIDE as usize);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    let _ = std::io::Write::write_all(&mut z, &raw);
    let idat = z.finish().unwrap_or_default();
    let mut out = SIGNATURE.to_vec();
    out.extend_from_slice(&chunk(b"IHDR", &ihdr));
    out.extend_from_slice(&chunk(b"IDAT", &idat));
    out.extend_from_slice(&chunk(b"IEND", &[]));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_chunks_read_back_and_the_image_is_kept() {
        let img = placeholder();
        let with = with_text_chunks(&img, &[("chara", "QUJD"), ("ccv3", "REVG")]).unwrap();
        let t = text_chunks(&with).unwrap();
        assert_eq!(
            t,
            vec![
                ("chara".into(), b"QUJD".to_vec()),
                ("ccv3".into(), b"REVG".to_vec())
            ]
        );
        // Writing again replaces, never duplicates.
        let again = with_text_chunks(&with, &[("ccv3", "WA==")]).unwrap();
        assert_eq!(
            text_chunks(&again).unwrap(),
            vec![("ccv3".into(), b"WA==".to_vec())]
        );
        assert_eq!(with_text_chunks(&again, &[]).unwrap(), img);
    }

    #[test]
    fn not_a_png_and_bad_crc_are_refused() {
        assert_eq!(text_chunks(b"GIF89a....").unwrap_err(), PngError::NotPng);
        let mut img = with_text_chunks(&placeholder(), &[("chara", "QUJD")]).unwrap();
        let n = img.len();
        img[n - 14] ^= 0xff; // inside the tEXt chunk's data or CRC
        assert!(matches!(text_chunks(&img), Err(PngError::BadCrc(_))));
        assert_eq!(
            text_chunks(&placeholder()[..40]).unwrap_err(),
            PngError::Truncated
        );
    }
}

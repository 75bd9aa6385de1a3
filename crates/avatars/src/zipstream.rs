//! Reading a ZIP archive as it streams in, without seeking: the local entries
//! one after the other (stored or deflated, sizes in the header or in a data
//! descriptor after the data, Zip64 included), then the central directory.
//!
//! The model ZIP import extracts while the upload arrives, so every byte is
//! written once. Each entry's data goes to a file named after its position in a
//! private work folder; names are only decoded, checked and given to files once
//! the central directory (the authority on names and attributes) has been read
//! (see `zipimport`). While streaming, every entry's real uncompressed bytes are
//! counted against the limit (a lying header cannot get past it), its CRC-32 is
//! checked, and encrypted entries and unknown compression methods are refused.

use std::fs::File;
use std::path::{Path, PathBuf};

use bytes::{Buf, Bytes};
use companiond_core::sink::FileWriter;
use flate2::{Decompress, FlushDecompress, Status};
use tokio::sync::mpsc;

use crate::error::AvatarError;
use companiond_core::text::human_size;

/// Record signatures: "PK" followed by the record's two kind bytes.
mod sig {
    const fn pk(kind: [u8; 2]) -> u32 {
        u32::from_le_bytes([b'P', b'K', kind[0], kind[1]])
    }
    pub const LOCAL: u32 = pk([3, 4]);
    pub const CENTRAL: u32 = pk([1, 2]);
    pub const DESCRIPTOR: u32 = pk([7, 8]);
    pub const END: u32 = pk([5, 6]);
}
/// Bits of the general purpose flag word.
mod flag {
    pub const ENCRYPTED: u16 = 1;
    pub const DESCRIPTOR: u16 = 1 << 3;
    pub const UTF8: u16 = 1 << 11;
}
/// The compression methods read here; any other is refused.
const STORED: u16 = 0;
const DEFLATED: u16 = 8;
/// Ids of the extra fields read here.
mod extra_id {
    pub const ZIP64: u16 = 0x0001;
    pub const UNICODE_PATH: u16 = 0x7075;
}
/// "Made by" host system whose external attributes carry a Unix mode.
const UNIX_HOST: u16 = 3;
/// A 32-bit size or offset with this value is stored in the Zip64 extra field.
const U32_MAX: u64 = u32::MAX as u64;
/// The central directory and the end records are kept in memory: at most this much.
const MAX_DIRECTORY: usize = 16 << 20;
/// Output buffer of the inflater (each filled buffer is one write).
const INFLATE_BUF: usize = 256 << 10;

pub(crate) fn bad_zip(msg: impl Into<String>) -> AvatarError {
    AvatarError::invalid("invalid_zip", msg)
}

fn truncated() -> AvatarError {
    bad_zip("the archive ends too early: the upload is incomplete or the file is damaged")
}

fn corrupt(name: &str, why: &str) -> AvatarError {
    bad_zip(format!("entry {name:?} is corrupt: {why}"))
}

fn too_large(limit: u64) -> AvatarError {
    AvatarError::TooLarge(format!(
        "the archive expands to more than {}",
        human_size(limit)
    ))
}

fn le16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
        .unwrap_or(0)
}

fn le32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .unwrap_or(0)
}

fn le64(b: &[u8], at: usize) -> Option<u64> {
    let s = b.get(at..at + 8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_le_bytes(a))
}

/// The request body as the blocking reader sees it: chunks from a channel.
pub struct Input {
    rx: mpsc::Receiver<Bytes>,
    cur: Bytes,
    /// Archive offset of `cur[0]`.
    offset: u64,
}

impl Input {
    pub fn new(rx: mpsc::Receiver<Bytes>) -> Input {
        Input {
            rx,
            cur: Bytes::new(),
            offset: 0,
        }
    }

    /// Make the current chunk non-empty; `false` at the end of the body.
    fn fill(&mut self) -> bool {
        while self.cur.is_empty() {
            match self.rx.blocking_recv() {
                Some(b) => self.cur = b,
                None => return false,
            }
        }
        true
    }

    /// At least `n` contiguous bytes at the front (chunks are joined when a
    /// header straddles two), or `None` when the body ends first.
    fn peek(&mut self, n: usize) -> Option<&[u8]> {
        if self.cur.len() < n {
            let mut joined = Vec::with_capacity(n.max(self.cur.len()));
            joined.extend_from_slice(&self.cur);
            while joined.len() < n {
                match self.rx.blocking_recv() {
                    Some(b) => joined.extend_from_slice(&b),
                    None => {
                        self.cur = Bytes::from(joined);
                        return None;
                    }
                }
            }
            self.cur = Bytes::from(joined);
        }
        self.cur.get(..n)
    }

    fn advance(&mut self, n: usize) {
        let n = n.min(self.cur.len());
        self.cur.advance(n);
        self.offset += n as u64;
    }

    fn take(&mut self, n: usize) -> Option<Bytes> {
        self.peek(n)?;
        self.offset += n as u64;
        Some(self.cur.split_to(n))
    }
}

/// One entry as found in the stream.
pub struct Local {
    /// Offset of its local header (how the central directory refers to it).
    pub offset: u64,
    pub crc: u32,
    /// Real uncompressed size.
    pub size: u64,
    /// Where its data was written (`None` for names ending in `/`).
    pub file: Option<PathBuf>,
}

/// One record of the central directory.
pub struct Central {
    pub name_raw: Vec<u8>,
    /// The name when the archive marks it as UTF-8 (flag or Unicode-path field).
    pub utf8_name: Option<String>,
    /// Unix mode bits, when the entry was made on Unix.
    pub unix_mode: Option<u32>,
    pub encrypted: bool,
    pub crc: u32,
    pub size: u64,
    pub offset: u64,
}

/// Everything read from the stream.
pub struct Streamed {
    pub locals: Vec<Local>,
    pub central: Vec<Central>,
}

/// Read the whole archive from `input`, writing each entry's data into `work`.
pub fn read_archive(
    input: &mut Input,
    work: &Path,
    max_entries: usize,
    max_bytes: u64,
) -> Result<Streamed, AvatarError> {
    let mut locals = Vec::new();
    let mut total = 0u64;
    loop {
        let at = input.offset;
        let Some(sig) = input.peek(4).map(|b| le32(b, 0)) else {
            return Err(if at == 0 {
                bad_zip("the upload is not a ZIP archive")
            } else {
                truncated()
            });
        };
        match sig {
            sig::LOCAL => {
                if locals.len() >= max_entries {
                    return Err(AvatarError::invalid(
                        "too_many_entries",
                        format!("the archive has more than {max_entries} entries"),
                    ));
                }
                let e = read_entry(input, work, locals.len(), max_bytes - total, max_bytes)?;
                total += e.size;
                locals.push(e);
            }
            sig::CENTRAL | sig::END => break,
            _ if at == 0 => return Err(bad_zip("the upload is not a ZIP archive")),
            _ => {
                return Err(bad_zip(format!(
                    "unexpected data at byte {at}: the archive is damaged"
                )))
            }
        }
    }
    let mut dir = Vec::new();
    while input.fill() {
        if dir.len() + input.cur.len() > MAX_DIRECTORY {
            return Err(bad_zip("the archive's central directory is too large"));
        }
        dir.extend_from_slice(&input.cur);
        let n = input.cur.len();
        input.advance(n);
    }
    // The central directory's own count is checked by `zipimport::place`.
    let central = parse_central(&dir)?;
    Ok(Streamed { locals, central })
}

/// Where an entry's uncompressed bytes go: counted, checksummed, written.
struct Out {
    crc: crc32fast::Hasher,
    written: u64,
    budget: u64,
    limit: u64,
    file: Option<FileWriter>,
}

impl Out {
    fn emit(&mut self, data: &[u8]) -> Result<(), AvatarError> {
        self.written += data.len() as u64;
        if self.written > self.budget {
            return Err(too_large(self.limit));
        }
        self.crc.update(data);
        if let Some(f) = self.file.as_mut() {
            f.write(data)
                .map_err(|e| AvatarError::io("cannot write an extracted file", e))?;
        }
        Ok(())
    }
}

fn find_extra(extra: &[u8], id: u16) -> Option<&[u8]> {
    let mut at = 0;
    while at + 4 <= extra.len() {
        let tag = le16(extra, at);
        let len = le16(extra, at + 2) as usize;
        let body = extra.get(at + 4..at + 4 + len)?;
        if tag == id {
            return Some(body);
        }
        at += 4 + len;
    }
    None
}

/// Read one local entry (header, data, descriptor) at the front of `input`.
fn read_entry(
    input: &mut Input,
    work: &Path,
    index: usize,
    budget: u64,
    limit: u64,
) -> Result<Local, AvatarError> {
    let offset = input.offset;
    let h = input.peek(30).ok_or_else(truncated)?;
    let flags = le16(h, 6);
    let method = le16(h, 8);
    let mut crc = le32(h, 14);
    let mut csize = u64::from(le32(h, 18));
    let mut usize = u64::from(le32(h, 22));
    let name_len = le16(h, 26) as usize;
    let extra_len = le16(h, 28) as usize;
    input.advance(30);
    let name_raw = input.take(name_len).ok_or_else(truncated)?;
    let extra = input.take(extra_len).ok_or_else(truncated)?;
    let name = String::from_utf8_lossy(&name_raw).into_owned();
    let zip64 = find_extra(&extra, extra_id::ZIP64);
    if let Some(z) = zip64 {
        let mut at = 0;
        if usize == U32_MAX {
            usize = le64(z, at).ok_or_else(|| corrupt(&name, "bad Zip64 field"))?;
            at += 8;
        }
        if csize == U32_MAX {
            csize = le64(z, at).ok_or_else(|| corrupt(&name, "bad Zip64 field"))?;
        }
    }
    if flags & flag::ENCRYPTED != 0 {
        return Err(bad_zip(format!("entry {name:?} is encrypted")));
    }
    if method != STORED && method != DEFLATED {
        return Err(bad_zip(format!(
            "entry {name:?} uses compression method {method}; only stored and Deflate entries \
             are supported (re-pack the archive as a standard ZIP)"
        )));
    }
    let descriptor = flags & flag::DESCRIPTOR != 0;
    if !descriptor && usize > budget {
        return Err(too_large(limit));
    }
    let file = if name_raw.ends_with(b"/") {
        None
    } else {
        Some(work.join(index.to_string()))
    };
    let writer = match &file {
        Some(p) => Some(FileWriter::new(
            File::options()
                .write(true)
                .create_new(true)
                .open(p)
                .map_err(|e| AvatarError::io("cannot write an extracted file", e))?,
        )),
        None => None,
    };
    let mut out = Out {
        crc: crc32fast::Hasher::new(),
        written: 0,
        budget,
        limit,
        file: writer,
    };
    let wide = zip64.is_some();
    if method == DEFLATED {
        let consumed = inflate(input, &mut out, (!descriptor).then_some(csize), &name)?;
        if descriptor {
            let (c, cs, us) = read_descriptor(input, wide, consumed, out.written, &name)?;
            (crc, csize, usize) = (c, cs, us);
        }
        if consumed != csize {
            return Err(corrupt(&name, "its compressed size does not match"));
        }
    } else if descriptor {
        (crc, usize) = stored_until_descriptor(input, &mut out, wide)?;
    } else {
        let mut left = csize;
        while left > 0 {
            if !input.fill() {
                return Err(truncated());
            }
            let n = left.min(input.cur.len() as u64) as usize;
            let piece = input.cur.split_to(n);
            input.offset += n as u64;
            out.emit(&piece)?;
            left -= n as u64;
        }
    }
    if out.written != usize {
        return Err(corrupt(&name, "its size does not match its header"));
    }
    if out.crc.clone().finalize() != crc {
        return Err(corrupt(&name, "CRC-32 mismatch"));
    }
    if let Some(f) = out.file.take() {
        f.finish(false)
            .map_err(|e| AvatarError::io("cannot write an extracted file", e))?;
    }
    Ok(Local {
        offset,
        crc,
        size: out.written,
        file,
    })
}

/// Inflate one Deflate stream (it ends by itself), at most `csize` input bytes
/// when known. Returns the compressed bytes consumed.
fn inflate(
    input: &mut Input,
    out: &mut Out,
    csize: Option<u64>,
    name: &str,
) -> Result<u64, AvatarError> {
    let mut d = Decompress::new(false);
    let mut buf = Vec::with_capacity(INFLATE_BUF);
    loop {
        if !input.fill() {
            return Err(truncated());
        }
        let consumed = d.total_in();
        let avail = match csize {
            Some(c) => (c - consumed).min(input.cur.len() as u64) as usize,
            None => input.cur.len(),
        };
        if avail == 0 {
            return Err(corrupt(name, "the compressed data ends early"));
        }
        buf.clear();
        let (in0, out0) = (d.total_in(), d.total_out());
        let status = d
            .decompress_vec(&input.cur[..avail], &mut buf, FlushDecompress::None)
            .map_err(|e| corrupt(name, &e.to_string()))?;
        let used = (d.total_in() - in0) as usize;
        let made = (d.total_out() - out0) as usize;
        out.emit(&buf[..made.min(buf.len())])?;
        input.advance(used);
        if status == Status::StreamEnd {
            return Ok(d.total_in());
        }
        if used == 0 && made == 0 {
            return Err(corrupt(name, "the compressed data is invalid"));
        }
    }
}

/// Read a data descriptor after an entry whose sizes are known from its data;
/// the signature is optional and the sizes are 4 or 8 bytes wide. Returns
/// `(crc, compressed, uncompressed)`.
fn read_descriptor(
    input: &mut Input,
    wide: bool,
    compressed: u64,
    uncompressed: u64,
    name: &str,
) -> Result<(u32, u64, u64), AvatarError> {
    if input.peek(4).map(|b| le32(b, 0)) == Some(sig::DESCRIPTOR) {
        input.advance(4);
    }
    let widths: [bool; 2] = [wide, !wide];
    for w in widths {
        let len = if w { 20 } else { 12 };
        let Some(d) = input.peek(len) else { continue };
        let crc = le32(d, 0);
        let (c, u) = if w {
            (le64(d, 4).unwrap_or(0), le64(d, 12).unwrap_or(0))
        } else {
            (u64::from(le32(d, 4)), u64::from(le32(d, 8)))
        };
        if c == compressed && u == uncompressed {
            input.advance(len);
            return Ok((crc, c, u));
        }
    }
    Err(corrupt(name, "its data descriptor does not match its data"))
}

/// A stored entry whose size only follows its data: copy up to the data
/// descriptor whose CRC and sizes match what came before it. Returns `(crc, size)`.
fn stored_until_descriptor(
    input: &mut Input,
    out: &mut Out,
    wide: bool,
) -> Result<(u32, u64), AvatarError> {
    const SIG: &[u8] = b"PK\x07\x08";
    let len = if wide { 24 } else { 16 };
    loop {
        if !input.fill() {
            return Err(truncated());
        }
        match memchr::memmem::find(&input.cur, SIG) {
            Some(i) => {
                let before = input.cur.split_to(i);
                input.offset += i as u64;
                out.emit(&before)?;
                let Some(d) = input.peek(len) else {
                    return Err(truncated());
                };
                let crc = le32(d, 4);
                let (c, u) = if wide {
                    (le64(d, 8).unwrap_or(0), le64(d, 16).unwrap_or(0))
                } else {
                    (u64::from(le32(d, 8)), u64::from(le32(d, 12)))
                };
                if c == out.written && u == out.written && crc == out.crc.clone().finalize() {
                    input.advance(len);
                    return Ok((crc, u));
                }
                // The signature's bytes were data.
                let first = input.cur.split_to(1);
                input.offset += 1;
                out.emit(&first)?;
            }
            None => {
                // Keep a possible partial signature at the end for the next round.
                let n = input.cur.len().saturating_sub(SIG.len() - 1);
                if n == 0 {
                    if input.peek(SIG.len()).is_none() {
                        return Err(truncated());
                    }
                    continue;
                }
                let piece = input.cur.split_to(n);
                input.offset += n as u64;
                out.emit(&piece)?;
            }
        }
    }
}

/// Parse the central directory records at the start of `dir`.
pub fn parse_central(dir: &[u8]) -> Result<Vec<Central>, AvatarError> {
    let damaged = || bad_zip("the archive's central directory is damaged");
    let mut out = Vec::new();
    let mut at = 0usize;
    while le32(dir, at) == sig::CENTRAL {
        let h = dir.get(at..at + 46).ok_or_else(damaged)?;
        let made_by = le16(h, 4);
        let flags = le16(h, 8);
        let crc = le32(h, 16);
        let mut size = u64::from(le32(h, 24));
        let csize = u64::from(le32(h, 20));
        let name_len = le16(h, 28) as usize;
        let extra_len = le16(h, 30) as usize;
        let comment_len = le16(h, 32) as usize;
        let external = le32(h, 38);
        let mut offset = u64::from(le32(h, 42));
        let name_end = at + 46 + name_len;
        let extra_end = name_end + extra_len;
        let end = extra_end + comment_len;
        let name_raw = dir.get(at + 46..name_end).ok_or_else(damaged)?.to_vec();
        let extra = dir.get(name_end..extra_end).ok_or_else(damaged)?;
        if end > dir.len() {
            return Err(damaged());
        }
        if let Some(z) = find_extra(extra, extra_id::ZIP64) {
            let mut p = 0;
            if size == U32_MAX {
                size = le64(z, p).ok_or_else(damaged)?;
                p += 8;
            }
            if csize == U32_MAX {
                p += 8;
            }
            if offset == U32_MAX {
                offset = le64(z, p).ok_or_else(damaged)?;
            }
        }
        let unicode = find_extra(extra, extra_id::UNICODE_PATH).and_then(|u| {
            let ok = u.first() == Some(&1) && le32(u, 1) == crc32fast::hash(&name_raw);
            ok.then(|| u.get(5..).and_then(|n| String::from_utf8(n.to_vec()).ok()))
                .flatten()
        });
        let flagged = (flags & flag::UTF8 != 0)
            .then(|| String::from_utf8(name_raw.clone()).ok())
            .flatten();
        out.push(Central {
            utf8_name: unicode.or(flagged),
            name_raw,
            unix_mode: (made_by >> 8 == UNIX_HOST).then_some(external >> 16),
            encrypted: flags & flag::ENCRYPTED != 0,
            crc,
            size,
            offset,
        });
        at = end;
    }
    Ok(out)
}

/// The IBM PC code page 437, the ZIP format's default for names without the
/// UTF-8 flag (bytes 0x80–0xFF; the lower half is ASCII).
const CP437_HIGH: &str = "ÇüéâäàåçêëèïîìÄÅÉæÆôöòûùÿÖÜ¢£¥₧ƒáíóúñÑªº¿⌐¬½¼¡«»░▒▓│┤╡╢╖╕╣║╗╝╜╛┐└┴┬├─┼╞╟╚╔╩╦╠═╬╧╨╤╥╙╘╒╓╫╪┘┌█▄▌▐▀αßΓπΣσµτΦΘΩδ∞φε∩≡±≥≤⌠⌡÷≈°∙·√ⁿ²■\u{a0}";

/// Decode a name as CP437.
pub fn cp437(raw: &[u8]) -> String {
    raw.iter()
        .map(|&b| {
            if b < 0x80 {
                char::from(b)
            } else {
                CP437_HIGH
                    .chars()
                    .nth(usize::from(b - 0x80))
                    .unwrap_or('\u{fffd}')
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cp437_table_is_complete() {
        assert_eq!(CP437_HIGH.chars().count(), 128);
        assert_eq!(cp437(b"a\x80\x9b\xe1\xff"), "aÇ¢ß\u{a0}");
    }
}

//! A small RGBA8 image: PNG decoding/encoding (the `png` crate), cropping,
//! flipping, resizing and alpha compositing, for the layered adapters.

use std::io::Cursor;

/// Largest decoded image accepted (pixels), so a hostile PNG cannot make the
/// importer allocate without bound.
pub const MAX_PIXELS: u64 = 8192 * 8192;

/// Straight-alpha RGBA, 8 bits per channel, rows top to bottom.
#[derive(Clone, Debug, PartialEq)]
pub struct Rgba {
    pub w: u32,
    pub h: u32,
    pub px: Vec<u8>,
}

impl Rgba {
    /// A transparent image (at least 1×1).
    pub fn new(w: u32, h: u32) -> Result<Rgba, String> {
        let (w, h) = (w.max(1), h.max(1));
        if u64::from(w) * u64::from(h) > MAX_PIXELS {
            return Err(format!("image of {w}x{h} pixels is too large"));
        }
        Ok(Rgba {
            w,
            h,
            px: vec![0; (w as usize) * (h as usize) * 4],
        })
    }

    fn idx(&self, x: u32, y: u32) -> usize {
        ((y as usize) * (self.w as usize) + x as usize) * 4
    }

    pub fn pixel(&self, x: u32, y: u32) -> [u8; 4] {
        let i = self.idx(x, y);
        [self.px[i], self.px[i + 1], self.px[i + 2], self.px[i + 3]]
    }

    /// The `w`×`h` rectangle at (`x`, `y`), clipped to the image.
    pub fn crop(&self, x: u32, y: u32, w: u32, h: u32) -> Rgba {
        let x = x.min(self.w.saturating_sub(1));
        let y = y.min(self.h.saturating_sub(1));
        let w = w.clamp(1, self.w - x);
        let h = h.clamp(1, self.h - y);
        let mut out = Rgba {
            w,
            h,
            px: Vec::with_capacity((w * h * 4) as usize),
        };
        for row in y..y + h {
            let s = self.idx(x, row);
            out.px.extend_from_slice(&self.px[s..s + (w as usize) * 4]);
        }
        out
    }

    pub fn flip_h(&mut self) {
        let w = self.w as usize;
        for row in self.px.chunks_mut(w * 4) {
            for x in 0..w / 2 {
                for c in 0..4 {
                    row.swap(x * 4 + c, (w - 1 - x) * 4 + c);
                }
            }
        }
    }

    pub fn flip_v(&mut self) {
        let stride = self.w as usize * 4;
        let h = self.h as usize;
        for y in 0..h / 2 {
            let (a, b) = self.px.split_at_mut((h - 1 - y) * stride);
            a[y * stride..y * stride + stride].swap_with_slice(&mut b[..stride]);
        }
    }

    /// Bilinear resize to `w`×`h` (each at least 1).
    pub fn resize(&self, w: u32, h: u32) -> Result<Rgba, String> {
        let mut out = Rgba::new(w, h)?;
        if out.w == self.w && out.h == self.h {
            return Ok(self.clone());
        }
        let sx = self.w as f32 / out.w as f32;
        let sy = self.h as f32 / out.h as f32;
        for y in 0..out.h {
            let fy = ((y as f32 + 0.5) * sy - 0.5).clamp(0.0, (self.h - 1) as f32);
            let y0 = fy.floor() as u32;
            let y1 = (y0 + 1).min(self.h - 1);
            let ty = fy - y0 as f32;
            for x in 0..out.w {
                let fx = ((x as f32 + 0.5) * sx - 0.5).clamp(0.0, (self.w - 1) as f32);
                let x0 = fx.floor() as u32;
                let x1 = (x0 + 1).min(self.w - 1);
                let tx = fx - x0 as f32;
                let (p00, p10, p01, p11) = (
                    self.pixel(x0, y0),
                    self.pixel(x1, y0),
                    self.pixel(x0, y1),
                    self.pixel(x1, y1),
                );
                // Interpolate premultiplied colour so transparent edges do not bleed.
                let mut acc = [0f32; 4];
                for (p, wgt) in [
                    (p00, (1.0 - tx) * (1.0 - ty)),
                    (p10, tx * (1.0 - ty)),
                    (p01, (1.0 - tx) * ty),
                    (p11, tx * ty),
                ] {
                    let a = p[3] as f32 / 255.0;
                    acc[0] += p[0] as f32 * a * wgt;
                    acc[1] += p[1] as f32 * a * wgt;
                    acc[2] += p[2] as f32 * a * wgt;
                    acc[3] += a * wgt;
                }
                let i = out.idx(x, y);
                if acc[3] > 0.0 {
                    out.px[i] = (acc[0] / acc[3]).round().clamp(0.0, 255.0) as u8;
                    out.px[i + 1] = (acc[1] / acc[3]).round().clamp(0.0, 255.0) as u8;
                    out.px[i + 2] = (acc[2] / acc[3]).round().clamp(0.0, 255.0) as u8;
                    out.px[i + 3] = (acc[3] * 255.0).round().clamp(0.0, 255.0) as u8;
                }
            }
        }
        Ok(out)
    }

    /// Draw `src` over this image with its top-left corner at (`dx`, `dy`).
    pub fn draw_over(&mut self, src: &Rgba, dx: i64, dy: i64) {
        for sy in 0..src.h {
            let ty = dy.saturating_add(i64::from(sy));
            if ty < 0 || ty >= i64::from(self.h) {
                continue;
            }
            for sx in 0..src.w {
                let tx = dx.saturating_add(i64::from(sx));
                if tx < 0 || tx >= i64::from(self.w) {
                    continue;
                }
                let s = src.pixel(sx, sy);
                if s[3] == 0 {
                    continue;
                }
                let i = self.idx(tx as u32, ty as u32);
                if s[3] == 255 {
                    self.px[i..i + 4].copy_from_slice(&s);
                    continue;
                }
                let sa = s[3] as f32 / 255.0;
                let da = self.px[i + 3] as f32 / 255.0;
                let oa = sa + da * (1.0 - sa);
                for (c, sc) in s.iter().enumerate().take(3) {
                    let v = (*sc as f32 * sa + self.px[i + c] as f32 * da * (1.0 - sa)) / oa;
                    self.px[i + c] = v.round().clamp(0.0, 255.0) as u8;
                }
                self.px[i + 3] = (oa * 255.0).round().clamp(0.0, 255.0) as u8;
            }
        }
    }

    /// Encode as PNG.
    pub fn to_png(&self) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut out, self.w, self.h);
            enc.set_color(png::ColorType::Rgba);
            enc.set_depth(png::BitDepth::Eight);
            let mut wr = enc.write_header().map_err(|e| e.to_string())?;
            wr.write_image_data(&self.px).map_err(|e| e.to_string())?;
            wr.finish().map_err(|e| e.to_string())?;
        }
        Ok(out)
    }
}

/// Does `bytes` start with the PNG signature?
pub fn is_png(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a])
}

/// Decode a PNG (any colour type and depth) into RGBA8; animated PNGs give their first frame.
pub fn decode_png(bytes: &[u8]) -> Result<Rgba, String> {
    if !is_png(bytes) {
        return Err("not a PNG image".into());
    }
    let mut dec = png::Decoder::new_with_limits(
        Cursor::new(bytes),
        png::Limits {
            bytes: (MAX_PIXELS * 4) as usize,
        },
    );
    dec.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = dec.read_info().map_err(|e| format!("bad PNG: {e}"))?;
    let (w, h) = reader.info().size();
    if u64::from(w) * u64::from(h) > MAX_PIXELS || w == 0 || h == 0 {
        return Err(format!("PNG of {w}x{h} pixels is not accepted"));
    }
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader
        .next_frame(&mut buf)
        .map_err(|e| format!("bad PNG: {e}"))?;
    let data = &buf[..info.buffer_size()];
    let (w, h) = (info.width, info.height);
    let n = (w as usize) * (h as usize);
    let mut px = Vec::with_capacity(n * 4);
    let line = info.line_size;
    let channels = match info.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => return Err("unexpanded palette image".into()),
    };
    for y in 0..h as usize {
        let row = data
            .get(y * line..y * line + (w as usize) * channels)
            .ok_or("truncated PNG data")?;
        for p in row.chunks_exact(channels) {
            match channels {
                1 => px.extend_from_slice(&[p[0], p[0], p[0], 255]),
                2 => px.extend_from_slice(&[p[0], p[0], p[0], p[1]]),
                3 => px.extend_from_slice(&[p[0], p[1], p[2], 255]),
                _ => px.extend_from_slice(p),
            }
        }
    }
    Ok(Rgba { w, h, px })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_round_trip_flip_and_composite() {
        let mut a = Rgba::new(3, 2).unwrap();
        a.px[0..4].copy_from_slice(&[255, 0, 0, 255]);
        let b = decode_png(&a.to_png().unwrap()).unwrap();
        assert_eq!(a, b);
        let mut f = a.clone();
        f.flip_h();
        assert_eq!(f.pixel(2, 0), [255, 0, 0, 255]);
        f.flip_v();
        assert_eq!(f.pixel(2, 1), [255, 0, 0, 255]);
        let mut canvas = Rgba::new(4, 4).unwrap();
        canvas.draw_over(&a, 1, 1);
        assert_eq!(canvas.pixel(1, 1), [255, 0, 0, 255]);
        assert_eq!(canvas.pixel(0, 0), [0, 0, 0, 0]);
        let r = a.resize(6, 4).unwrap();
        assert_eq!((r.w, r.h), (6, 4));
        assert_eq!(r.pixel(0, 0)[3], 255);
    }
}

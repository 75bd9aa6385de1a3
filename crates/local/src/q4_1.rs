//! Decoding's matrix-vector product for Q4_1 weights, read as they are in the
//! file.
//!
//! Why our own: candle 0.11 has only a scalar dot product for Q4_1, so Q4_1
//! files were converted to Q8_0 at load, which made every decoded token read
//! 1.7 times the bytes (34 instead of 20 per 32 weights). Decoding a small
//! model on a CPU is bound by those bytes: both engines read about 5.3 GB/s
//! here, companiond 143 MB a token and llama.cpp 84 MB
//! (`cargo bench --bench local`, docs/local-model.md § Numbers). This is the
//! product llama.cpp computes for Q4_1 (the weights' 4-bit values against the
//! activations quantised to 8 bits per 32, with each block's scale and
//! minimum), with AVX2, FMA and F16C, which every x86-64 CPU of the last ten
//! years has; elsewhere (ARM, older x86) the weights are still converted to
//! Q8_0, whose kernels candle has ([`available`]).

/// Bytes of one Q4_1 block: an f16 scale, an f16 minimum, 16 bytes of nibbles.
pub const BLOCK_BYTES: usize = 20;
/// Weights of one block.
pub const BLOCK: usize = 32;

/// Whether this CPU runs the kernel (checked once, at run time).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("fma")
            && std::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// One activation vector quantised the way the kernel reads it: per block of
/// 32, `q = round(x / d)` with `d = max|x| / 127`, and `s = d * sum(q)`.
pub struct Activations {
    q: Vec<i8>,
    d: Vec<f32>,
    s: Vec<f32>,
}

impl Activations {
    /// `x.len()` must be a multiple of [`BLOCK`].
    pub fn quantise(x: &[f32]) -> Activations {
        let nb = x.len() / BLOCK;
        let mut a = Activations {
            q: vec![0; nb * BLOCK],
            d: Vec::with_capacity(nb),
            s: Vec::with_capacity(nb),
        };
        for (xs, qs) in x.chunks_exact(BLOCK).zip(a.q.chunks_exact_mut(BLOCK)) {
            let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let id = if d > 0.0 { 1.0 / d } else { 0.0 };
            let mut sum = 0i32;
            for (q, &v) in qs.iter_mut().zip(xs) {
                let r = (v * id).round().clamp(-127.0, 127.0) as i8;
                *q = r;
                sum += r as i32;
            }
            a.d.push(d);
            a.s.push(d * sum as f32);
        }
        a
    }
}

/// `y[r] = dot(row r of w, x)` for the `y.len()` rows of `w` (Q4_1 blocks,
/// `cols` weights a row). `Err` when the sizes do not agree (never reads out
/// of bounds). Rows are shared out over rayon's current pool.
pub fn matvec(w: &[u8], cols: usize, x: &Activations, y: &mut [f32]) -> Result<(), String> {
    if !cols.is_multiple_of(BLOCK) || x.d.len() != cols / BLOCK {
        return Err(format!(
            "Q4_1 mat-vec: {cols} columns, {} blocks",
            x.d.len()
        ));
    }
    let row_bytes = cols / BLOCK * BLOCK_BYTES;
    if w.len() != y.len() * row_bytes {
        return Err(format!(
            "Q4_1 mat-vec: {} bytes for {} rows of {row_bytes}",
            w.len(),
            y.len()
        ));
    }
    let fast = available();
    let run = |w: &[u8], y: &mut [f32]| {
        for (row, out) in w.chunks_exact(row_bytes).zip(y.iter_mut()) {
            *out = if fast {
                dot(row, x)
            } else {
                dot_scalar(row, x)
            };
        }
    };
    let threads = rayon::current_num_threads();
    if threads <= 1 || y.len() < 64 {
        run(w, y);
    } else {
        use rayon::prelude::*;
        let per = y.len().div_ceil(threads * 4).max(16);
        y.par_chunks_mut(per)
            .zip(w.par_chunks(per * row_bytes))
            .for_each(|(y, w)| run(w, y));
    }
    Ok(())
}

fn dot(row: &[u8], x: &Activations) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `matvec` checked the CPU's features ([`available`]) and
        // that `row` holds `x.d.len()` blocks, `x.q` 32 values per block.
        unsafe { avx2::dot(row, x) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        dot_scalar(row, x)
    }
}

fn f16(b: &[u8]) -> f32 {
    half::f16::from_le_bytes([b[0], b[1]]).to_f32()
}

/// The same product without SIMD: the reference the kernel is tested
/// against, and the path of a CPU without AVX2.
pub fn dot_scalar(row: &[u8], x: &Activations) -> f32 {
    let mut sum = 0f32;
    for (b, blk) in row.chunks_exact(BLOCK_BYTES).enumerate() {
        let d = f16(&blk[0..2]);
        let m = f16(&blk[2..4]);
        let qa = &x.q[b * BLOCK..(b + 1) * BLOCK];
        let mut acc = 0i32;
        for j in 0..BLOCK / 2 {
            let q = blk[4 + j];
            acc += (q & 0x0f) as i32 * qa[j] as i32 + (q >> 4) as i32 * qa[j + BLOCK / 2] as i32;
        }
        sum += d * x.d[b] * acc as f32 + m * x.s[b];
    }
    sum
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Activations, BLOCK, BLOCK_BYTES};
    use std::arch::x86_64::*;

    /// Two blocks an iteration: their loads and products overlap.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot(row: &[u8], x: &Activations) -> f32 {
        let nb = x.d.len();
        debug_assert_eq!(row.len(), nb * BLOCK_BYTES);
        let p = row.as_ptr();
        let qa = x.q.as_ptr();
        let mask = _mm_set1_epi8(0x0f);
        let ones = _mm256_set1_epi16(1);
        let mut acc = _mm256_setzero_ps();
        let mut accm = _mm_setzero_ps();
        for b in 0..nb {
            let blk = p.add(b * BLOCK_BYTES);
            // d and m, the block's two halves, in one conversion.
            let dm = _mm_cvtph_ps(_mm_cvtsi32_si128(std::ptr::read_unaligned(
                blk as *const i32,
            )));
            let ad = _mm_set_ps(0.0, 0.0, *x.s.get_unchecked(b), *x.d.get_unchecked(b));
            // (d * da, m * sa): the scale of the integer sum, the minimum's term.
            let prod = _mm_mul_ps(dm, ad);
            let q = _mm_loadu_si128(blk.add(4) as *const __m128i);
            let lo = _mm_and_si128(q, mask);
            let hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
            let w = _mm256_set_m128i(hi, lo);
            let a = _mm256_loadu_si256(qa.add(b * BLOCK) as *const __m256i);
            let s16 = _mm256_maddubs_epi16(w, a);
            let s32 = _mm256_madd_epi16(s16, ones);
            let scale = _mm256_broadcastss_ps(prod);
            acc = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(s32), acc);
            accm = _mm_add_ps(accm, prod);
        }
        // Horizontal sum of acc, plus lane 1 of accm (the minimums).
        let s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
        _mm_cvtss_f32(s) + _mm_cvtss_f32(_mm_shuffle_ps(accm, accm, 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::{GgmlDType, QTensor};
    use candle_core::{Device, Tensor};

    fn weights(rows: usize, cols: usize) -> (QTensor, Vec<f32>) {
        let v: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * (1.0 + (i % 13) as f32 / 4.0))
            .collect();
        let t = Tensor::from_vec(v, (rows, cols), &Device::Cpu).unwrap();
        let q = QTensor::quantize(&t, GgmlDType::Q4_1).unwrap();
        let deq = q.dequantize(&Device::Cpu).unwrap();
        (q, deq.flatten_all().unwrap().to_vec1().unwrap())
    }

    #[test]
    fn the_kernel_is_the_product_of_the_dequantised_weights() {
        let (rows, cols) = (200, 576);
        let (q, deq) = weights(rows, cols);
        let data = q.data().unwrap();
        let x: Vec<f32> = (0..cols)
            .map(|i| ((i * 31 % 97) as f32 - 48.0) / 30.0)
            .collect();
        let a = Activations::quantise(&x);
        let mut y = vec![0f32; rows];
        matvec(&data, cols, &a, &mut y).unwrap();
        for r in 0..rows {
            let exact: f32 = deq[r * cols..(r + 1) * cols]
                .iter()
                .zip(&x)
                .map(|(w, x)| w * x)
                .sum();
            let reference = dot_scalar(&data[r * cols / 32 * 20..(r + 1) * cols / 32 * 20], &a);
            assert!(
                (y[r] - reference).abs() <= 1e-3 * reference.abs().max(1.0),
                "row {r}: {} vs {reference}",
                y[r]
            );
            // The activations' 8-bit rounding: well under 1 % of the row's scale.
            let scale: f32 = deq[r * cols..(r + 1) * cols]
                .iter()
                .zip(&x)
                .map(|(w, x)| (w * x).abs())
                .sum();
            assert!(
                (y[r] - exact).abs() <= 0.01 * scale,
                "row {r}: {} vs {exact}",
                y[r]
            );
        }
    }

    #[test]
    fn sizes_that_disagree_are_refused() {
        let (q, _) = weights(4, 64);
        let data = q.data().unwrap();
        let a = Activations::quantise(&[0.5; 64]);
        assert!(matvec(&data, 64, &a, &mut [0.0; 5]).is_err());
        assert!(matvec(&data[..70], 64, &a, &mut [0.0; 4]).is_err());
        assert!(matvec(&data, 96, &a, &mut [0.0; 4]).is_err());
        let mut y = [0.0; 4];
        assert!(matvec(&data, 64, &a, &mut y).is_ok());
    }
}

//! Weight matrices (quantised as in the file, with our Q4_1 kernel and the
//! GEMM path of a prompt on the CPU) and the device a model is loaded on.

use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{Device, Module, Result, Tensor};

/// The device a model is loaded on: with the `cuda` or `metal` cargo feature
/// the first GPU (unless `COMPANIOND_LOCAL_DEVICE=cpu`), else the CPU. A GPU
/// that cannot be opened falls back to the CPU with a warning.
pub fn device() -> Device {
    let want = std::env::var("COMPANIOND_LOCAL_DEVICE").unwrap_or_default();
    if want.eq_ignore_ascii_case("cpu") {
        return Device::Cpu;
    }
    #[cfg(feature = "cuda")]
    match Device::new_cuda(0) {
        Ok(d) => return d,
        Err(e) => tracing::warn!("the local model runs on the CPU: no CUDA device ({e})"),
    }
    #[cfg(feature = "metal")]
    match Device::new_metal(0) {
        Ok(d) => return d,
        Err(e) => tracing::warn!("the local model runs on the CPU: no Metal device ({e})"),
    }
    Device::Cpu
}

/// A weight matrix for `x @ w^T`: quantised as in the file for one token
/// at a time (decoding), dequantised per call into an f32 GEMM for a prompt
/// of many tokens (prefill), which is several times faster on the CPU.
/// Q4_1 weights are read as they are by our kernel ([`crate::q4_1`]) where
/// the CPU has AVX2; elsewhere, and for Q5_0 and Q5_1 (no SIMD kernel in
/// candle), they are converted to Q8_0 once at load: more memory and more
/// bytes read a token, but much faster than candle's scalar products.
pub struct Mat {
    /// candle's quantised product; `None` for Q4_1 read by our kernel.
    q: Option<QMatMul>,
    raw: std::sync::Arc<QTensor>,
}

/// Rows from which a call takes the GEMM path.
const GEMM_ROWS: usize = 16;

impl Mat {
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if let (false, Some(q)) = (self.raw.device().is_cpu(), &self.q) {
            return q.forward(x);
        }
        let rows = x.elem_count() / x.dim(candle_core::D::Minus1)?;
        if rows >= GEMM_ROWS {
            let w = self.raw.dequantize(&Device::Cpu)?;
            let (b, t, k) = x.dims3()?;
            let y = x.reshape((b * t, k))?.matmul(&w.t()?)?;
            let n = y.dim(1)?;
            return y.reshape((b, t, n));
        }
        match &self.q {
            Some(q) => q.forward(x),
            None => self.q4_1(x),
        }
    }

    /// `x @ w^T` by [`crate::q4_1::matvec`], one row of `x` at a time.
    fn q4_1(&self, x: &Tensor) -> Result<Tensor> {
        let (n, k) = self.raw.shape().dims2()?;
        let mut dims = x.dims().to_vec();
        let xs = x.flatten_all()?.to_vec1::<f32>()?;
        let data = self.raw.data()?;
        let mut y = vec![0f32; xs.len() / k * n];
        for (x, y) in xs.chunks_exact(k).zip(y.chunks_exact_mut(n)) {
            let a = crate::q4_1::Activations::quantise(x);
            crate::q4_1::matvec(&data, k, &a, y).map_err(candle_core::Error::msg)?;
        }
        if let Some(last) = dims.last_mut() {
            *last = n;
        }
        Tensor::from_vec(y, dims, &Device::Cpu)
    }
}

pub fn matmul(t: QTensor) -> Result<Mat> {
    use candle_core::quantized::GgmlDType as T;
    if !t.device().is_cpu() {
        // A GPU: candle's own kernels for every type.
        let raw = std::sync::Arc::new(t);
        return Ok(Mat {
            q: Some(QMatMul::from_arc(raw.clone())?),
            raw,
        });
    }
    let cols = t.shape().dims().last().copied().unwrap_or(0);
    let whole_blocks = cols.is_multiple_of(32) && t.shape().rank() == 2;
    if t.dtype() == T::Q4_1 && whole_blocks && crate::q4_1::available() {
        return Ok(Mat {
            q: None,
            raw: std::sync::Arc::new(t),
        });
    }
    let slow = matches!(t.dtype(), T::Q4_1 | T::Q5_0 | T::Q5_1);
    let t = if slow && cols.is_multiple_of(32) {
        let w = t.dequantize(&Device::Cpu)?;
        QTensor::quantize(&w, T::Q8_0)?
    } else {
        t
    };
    let raw = std::sync::Arc::new(t);
    Ok(Mat {
        q: Some(QMatMul::from_arc(raw.clone())?),
        raw,
    })
}

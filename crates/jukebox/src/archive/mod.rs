//! Export, import and pack-folder ZIP archives. Archives are written to an
//! anonymous temporary file in the library's scratch folder and streamed from
//! there; imports are read from a staged file and only the entries that the
//! archive's config.json references are extracted, each with its MD5 computed
//! on the way and every size limit enforced on the bytes actually produced.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom};
use std::path::Path;

use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

use crate::error::JukeboxError;
use crate::model::extension;

mod export;
mod import;
mod pack;

pub use export::ExportSelection;
pub use import::Imported;
pub use pack::Packer;

/// Extensions that are deflated in archives: text and motion data that compress
/// well. Everything else (audio, already-compressed or binary media) is stored,
/// which keeps exports and packing at disk speed.
const DEFLATED_EXTENSIONS: &[&str] = &[
    "json", "txt", "vmd", "bvh", "pmx", "pmd", "csv", "xml", "md",
];

fn entry_options(name: &str, size: u64) -> SimpleFileOptions {
    let deflate = DEFLATED_EXTENSIONS.contains(&extension(name).as_str());
    let opts = SimpleFileOptions::default().large_file(size >= u32::MAX as u64);
    if !deflate {
        opts.compression_method(CompressionMethod::Stored)
    } else {
        opts.compression_method(CompressionMethod::Deflated)
            .compression_level(Some(1))
    }
}

fn zip_err(context: &str, e: impl std::fmt::Display) -> JukeboxError {
    JukeboxError::Storage(format!("{context}: {e}"))
}

/// Finish a ZIP written to a temporary file and rewind it for streaming.
fn finish_zip(w: ZipWriter<BufWriter<File>>) -> Result<(File, u64), JukeboxError> {
    let buf = w
        .finish()
        .map_err(|e| zip_err("cannot write the archive", e))?;
    let mut file = buf
        .into_inner()
        .map_err(|e| zip_err("cannot write the archive", e.error()))?;
    let len = file
        .seek(SeekFrom::End(0))
        .map_err(|e| zip_err("cannot write the archive", e))?;
    file.seek(SeekFrom::Start(0))
        .map_err(|e| zip_err("cannot write the archive", e))?;
    Ok((file, len))
}

fn new_zip(tmp_dir: &Path) -> Result<ZipWriter<BufWriter<File>>, JukeboxError> {
    std::fs::create_dir_all(tmp_dir).map_err(|e| zip_err("cannot create the scratch folder", e))?;
    let file =
        tempfile::tempfile_in(tmp_dir).map_err(|e| zip_err("cannot create a temporary file", e))?;
    Ok(ZipWriter::new(BufWriter::with_capacity(1 << 20, file)))
}

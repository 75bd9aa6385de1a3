//! Title and artist from embedded audio tags (ID3v2, Vorbis comments, FLAC,
//! RIFF INFO), through lofty.

use std::io::Read;
use std::path::Path;

use lofty::config::ParseOptions;
use lofty::file::{FileType, TaggedFileExt};
use lofty::probe::Probe;
use lofty::tag::Accessor;

/// What the tags say; empty fields are `None`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AudioTags {
    pub title: Option<String>,
    pub artist: Option<String>,
}

fn clean(s: Option<std::borrow::Cow<'_, str>>) -> Option<String> {
    s.map(|v| v.trim().trim_matches('\0').trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The container type from the first bytes: `None` when it is not one of the
/// song formats (then there is nothing worth handing to the tag reader, which
/// could otherwise scan a large file looking for audio frames).
fn sniff(head: &[u8], ext: &str) -> Option<FileType> {
    if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WAVE" {
        return Some(FileType::Wav);
    }
    if head.starts_with(b"fLaC") {
        return Some(FileType::Flac);
    }
    if head.starts_with(b"OggS") {
        return Some(FileType::Vorbis);
    }
    if head.starts_with(b"ID3") {
        // An ID3v2 tag leads MP3 files (and, rarely, FLAC files).
        return Some(if ext == "flac" {
            FileType::Flac
        } else {
            FileType::Mpeg
        });
    }
    if head.len() >= 2 && head[0] == 0xFF && head[1] & 0xE0 == 0xE0 {
        return Some(FileType::Mpeg);
    }
    None
}

/// Read the title and artist of an audio file (mp3, wav, ogg, flac; `ext` is the
/// uploaded extension, the content decides). Unreadable files simply have no tags.
pub fn read_tags(path: &Path, ext: &str) -> AudioTags {
    let mut head = [0u8; 12];
    let n = match std::fs::File::open(path).and_then(|mut f| {
        let mut n = 0;
        while n < head.len() {
            let r = f.read(&mut head[n..])?;
            if r == 0 {
                break;
            }
            n += r;
        }
        Ok(n)
    }) {
        Ok(n) => n,
        Err(_) => return AudioTags::default(),
    };
    let Some(file_type) = sniff(&head[..n], ext) else {
        return AudioTags::default();
    };
    let probe = match Probe::open(path) {
        Ok(p) => p.set_file_type(file_type),
        Err(_) => return AudioTags::default(),
    };
    let tagged = match probe
        .options(
            ParseOptions::new()
                .read_properties(false)
                .read_cover_art(false),
        )
        .read()
    {
        Ok(t) => t,
        Err(e) => {
            tracing::debug!("jukebox: no tags read from {}: {e}", path.display());
            return AudioTags::default();
        }
    };
    let mut out = AudioTags::default();
    let tags = tagged.primary_tag().into_iter().chain(tagged.tags().iter());
    for tag in tags {
        if out.title.is_none() {
            out.title = clean(tag.title());
        }
        if out.artist.is_none() {
            out.artist = clean(tag.artist());
        }
    }
    out
}

//! Cloud save (`/api/cloudsave`): a character unit (profile + managed memory
//! files + meta record) exported to and imported from a storage target — a
//! local directory (default `<data>/cloud`) or `s3://bucket/prefix`. See
//! docs/cloudsave.md.
//!
//! * [`http`]: the five routes (thin handlers);
//! * `family`: the family state [`CloudSave`](family::CloudSave) and what every answer shares;
//! * `summary`: the comparison of local and cloud units (`summary`, `character/{name}`);
//! * `upload`, `download`: the two transfers; `backup`: the operation backup of a download;
//! * `autocloud`: the `platform_autocloud` document;
//! * [`unit`]: the unit's files, fingerprint, snapshots and verification;
//! * `local_facts`: the cache of local unit facts; `local_state`: this device's state file;
//! * `target`: the object store and its key layout;
//! * `error`: the family's error enum and envelope.

mod autocloud;
mod backup;
mod download;
mod error;
mod family;
mod http;
mod local_facts;
mod local_state;
mod summary;
mod target;
pub mod unit;
mod upload;

use std::sync::Arc;

use companiond_core::{Api, AppState};

use error::CloudSaveError;
use family::{AutocloudAnswer, Succeeded, Transferred};
use summary::{DetailAnswer, Summary};

/// The five routes of this family.
pub fn api(state: &AppState) -> Api {
    Api::new(state, "cloudsave")
        .about("Cloud save: export a character unit (profile, managed memory files, meta record) to a storage target and import it back (docs/cloudsave.md).")
        .get(
            "/api/cloudsave/summary",
            "compare local and cloud character units",
            http::summary,
        )
        .id("summary")
        .ok::<Succeeded<Summary>>()
        .fails::<CloudSaveError>()
        .get(
            "/api/cloudsave/platform-autocloud-config",
            "cloud-save backend and sync state",
            http::autocloud,
        )
        .id("autocloud_config")
        .ok::<Succeeded<AutocloudAnswer>>()
        .get(
            "/api/cloudsave/character/{name}",
            "local and cloud comparison of one character",
            http::detail,
        )
        .id("character_detail")
        .path::<http::CharacterPath>()
        .ok::<Succeeded<DetailAnswer>>()
        .fails::<CloudSaveError>()
        .post(
            "/api/cloudsave/character/{name}/upload",
            "export one character unit to cloud storage",
            http::upload,
        )
        .id("upload")
        .path::<http::CharacterPath>()
        .own_json_body::<Option<http::UploadOptions>>()
        .ok::<Succeeded<Transferred>>()
        .fails::<CloudSaveError>()
        .post(
            "/api/cloudsave/character/{name}/download",
            "import one character unit and reload runtime state",
            http::download,
        )
        .id("download")
        .path::<http::CharacterPath>()
        .own_json_body::<Option<download::DownloadOptions>>()
        .ok::<Succeeded<Transferred>>()
        .fails::<CloudSaveError>()
}

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: companiond_core::server::Family = companiond_core::server::Family { api, start };

/// Start-up work: an upload or download fence left up by a crash is lowered,
/// and the family state is provided to the handlers.
pub fn start(state: &AppState) {
    companiond_core::fence::recover_stale(&state.store);
    state.provide(Arc::new(family::CloudSave::new(state)));
}

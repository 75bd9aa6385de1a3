//! The family state, [`CloudSave`]: the storage target (opened lazily, on
//! first use), the lock that runs one upload or download at a time, the cache
//! of local unit facts, and what every answer shares (the sync backend and
//! the `platform_autocloud` document). Its operations live beside it:
//! [`crate::summary`], [`crate::upload`], [`crate::download`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use companiond_core::task::blocking;
use companiond_core::AppState;
use serde::Serialize;
use utoipa::ToSchema;

use crate::autocloud::{self, PlatformAutocloud};
use crate::error::CloudSaveError;
use crate::local_facts::{LocalFacts, LocalFactsCache};
use crate::local_state;
use crate::summary::{Detail, RenderedItems};
use crate::target::{self, Target, TargetSpec};
use crate::unit::{self, Meta};

/// An answer document with its `success: true` flag first.
#[derive(Debug, Serialize, ToSchema)]
pub struct Succeeded<T> {
    pub success: bool,
    #[serde(flatten)]
    #[schema(inline)]
    pub body: T,
}

impl<T> Succeeded<T> {
    pub fn new(body: T) -> Self {
        Succeeded {
            success: true,
            body,
        }
    }
}

/// `GET platform-autocloud-config` (without `success`).
#[derive(Debug, Serialize, ToSchema)]
pub struct AutocloudAnswer {
    pub sync_backend: &'static str,
    pub platform_autocloud: PlatformAutocloud,
}

/// What a transfer adds to its answer: the published meta record (upload) or
/// the kept backup of the replaced local files (download; null without one).
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum Transfer {
    Upload {
        meta: Box<Meta>,
    },
    Download {
        #[schema(required = true)]
        backup_path: Option<String>,
    },
}

/// `POST character/{name}/upload` and `…/download` (without `success`).
#[derive(Debug, Serialize, ToSchema)]
pub struct Transferred {
    pub character_name: String,
    pub detail: Option<Succeeded<Detail>>,
    #[serde(flatten)]
    pub transfer: Transfer,
    pub sequence_number: u64,
    pub sync_backend: &'static str,
    pub platform_autocloud: PlatformAutocloud,
}

/// The cloud-save family's state (provided in `start()`, reached by handlers
/// through `Ext<CloudSave>`).
pub struct CloudSave {
    pub(crate) state: AppState,
    spec: Result<TargetSpec, String>,
    target: tokio::sync::Mutex<Option<Target>>,
    /// One upload or download at a time.
    pub(crate) op_lock: tokio::sync::Mutex<()>,
    local_facts: Arc<LocalFactsCache>,
    /// The summary's items, rendered once per change.
    pub(crate) rendered_items: RenderedItems,
}

impl CloudSave {
    pub fn new(state: &AppState) -> CloudSave {
        CloudSave {
            state: state.clone(),
            spec: TargetSpec::parse(&state.opts.cloud),
            target: tokio::sync::Mutex::new(None),
            op_lock: tokio::sync::Mutex::new(()),
            local_facts: Arc::default(),
            rendered_items: RenderedItems::default(),
        }
    }

    /// `local_directory` or `s3` (`unconfigured` when `--cloud` cannot be parsed).
    pub fn sync_backend(&self) -> &'static str {
        self.spec
            .as_ref()
            .map(TargetSpec::kind)
            .unwrap_or("unconfigured")
    }

    fn cloud_root_display(&self) -> String {
        match &self.spec {
            Ok(s) => s.display(),
            Err(_) => self.state.opts.cloud.clone(),
        }
    }

    /// The opened target; built on first use and kept once it works.
    pub(crate) async fn target(&self) -> Result<Target, CloudSaveError> {
        let mut slot = self.target.lock().await;
        if let Some(t) = slot.as_ref() {
            return Ok(t.clone());
        }
        let spec = self
            .spec
            .clone()
            .map_err(CloudSaveError::ProviderUnavailable)?;
        let t = blocking(move || target::open(&spec)).await?;
        *slot = Some(t.clone());
        Ok(t)
    }

    /// Private folders of snapshots, downloads and throw-away backups.
    pub(crate) fn staging_root(&self) -> PathBuf {
        self.state.data_dir().join("state").join("cloudsave_tmp")
    }

    pub(crate) fn workshop_dir(&self) -> Option<&Path> {
        self.state.opts.workshop_dir.as_deref()
    }

    /// The facts of each of `names` that is a character, in one blocking task;
    /// unchanged units come from the cache. `every_character`: `names` is the
    /// whole registry.
    pub(crate) async fn local_facts(
        &self,
        names: Vec<String>,
        every_character: bool,
    ) -> BTreeMap<String, Arc<LocalFacts>> {
        let staging = self.staging_root();
        let cache = self.local_facts.clone();
        let state = self.state.clone();
        blocking(move || {
            Ok::<_, CloudSaveError>(cache.facts(&state, &names, every_character, &staging))
        })
        .await
        .unwrap_or_default()
    }

    fn runtime_has_user_content(&self) -> bool {
        self.state
            .characters
            .names()
            .iter()
            .any(|n| !unit::present_files(&self.state.memory_dir(n)).is_empty())
    }

    /// The `platform_autocloud` document. `units` is None when the target
    /// could not be read; `has_content` when already known.
    pub(crate) async fn platform_autocloud(
        &self,
        units: Option<&[Arc<Meta>]>,
        has_content: Option<bool>,
    ) -> PlatformAutocloud {
        let local = local_state::read(&self.state.store).await;
        let runtime_has_user_content =
            has_content.unwrap_or_else(|| self.runtime_has_user_content());
        autocloud::platform_autocloud(autocloud::Inputs {
            backend: self.sync_backend(),
            units: units.unwrap_or(&[]),
            local,
            runtime_has_user_content,
            runtime_root: self.state.data_dir().to_string_lossy().into_owned(),
            cloudsave_root: self.cloud_root_display(),
        })
    }

    /// `GET platform-autocloud-config`: never fails; an unreachable target reads
    /// as "no snapshot" with `provider_available:false`.
    pub async fn autocloud_config(&self) -> AutocloudAnswer {
        let units = match self.target().await {
            Ok(t) => t.list_units().await.map_err(|e| e.message()),
            Err(e) => Err(e.message()),
        };
        let mut pa = self.platform_autocloud(units.as_deref().ok(), None).await;
        pa.provider_available = Some(units.is_ok());
        pa.provider_error = units.err();
        AutocloudAnswer {
            sync_backend: self.sync_backend(),
            platform_autocloud: pa,
        }
    }

    /// The answer of a successful upload or download: the transfer is
    /// recorded with the manifest now in the cloud, and the character's
    /// comparison re-read (null when that fails: the transfer succeeded).
    pub(crate) async fn transferred(
        &self,
        target: &Target,
        name: &str,
        sequence_number: u64,
        transfer: Transfer,
    ) -> Transferred {
        let units = target.list_units().await.ok();
        if let Some(u) = &units {
            let upload = matches!(transfer, Transfer::Upload { .. });
            let manifest = autocloud::manifest_fingerprint(u);
            local_state::record_success(&self.state.store, upload, manifest).await;
        }
        let detail = self.detail_with(target, name).await.ok();
        Transferred {
            character_name: name.to_string(),
            detail: detail.map(Succeeded::new),
            transfer,
            sequence_number,
            sync_backend: self.sync_backend(),
            platform_autocloud: self.platform_autocloud(units.as_deref(), None).await,
        }
    }
}

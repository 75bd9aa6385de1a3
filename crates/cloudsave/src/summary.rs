//! `GET /api/cloudsave/summary` and `GET /api/cloudsave/character/{name}`:
//! the comparison of a character's local unit with its cloud unit — the two
//! side summaries and the item that relates them (matched, diverged, local or
//! cloud only, with the actions that make sense).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

use companiond_core::paths;
use serde::Serialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;

use crate::autocloud::PlatformAutocloud;
use crate::error::CloudSaveError;
use crate::family::CloudSave;
use crate::local_facts::LocalFacts;
use crate::target::Target;
use crate::unit::Meta;

/// One side of a character (`local_summary`, `cloud_summary`): what this
/// device or the cloud has of it.
#[derive(Debug, Serialize, ToSchema)]
pub struct Side {
    pub character_name: String,
    pub display_name: String,
    pub model_type: String,
    pub asset_source: String,
    pub asset_source_id: String,
    pub asset_state: String,
    pub workshop_status: String,
    pub updated_at_utc: String,
    pub fingerprint: String,
    /// Cloud side only: the unit's sequence number on the device that uploaded it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub sequence_number: Option<u64>,
    /// Cloud side only: the device that uploaded the unit.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub source_client_id: Option<String>,
    /// Member file → size.
    pub files: BTreeMap<String, u64>,
    pub warnings: Vec<&'static str>,
}

/// How the two sides relate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    LocalOnly,
    CloudOnly,
    Matched,
    Diverged,
}

/// One row of the summary: the two sides related.
#[derive(Debug, Serialize, ToSchema)]
pub struct Item {
    pub character_name: String,
    pub display_name: String,
    pub relation_state: Relation,
    pub local_exists: bool,
    pub cloud_exists: bool,
    pub model_type: String,
    pub asset_source: String,
    pub asset_source_id: String,
    pub local_asset_source: String,
    pub local_asset_source_id: String,
    pub cloud_asset_source: String,
    pub cloud_asset_source_id: String,
    pub local_asset_state: String,
    pub cloud_asset_state: String,
    pub local_updated_at_utc: String,
    pub cloud_updated_at_utc: String,
    pub local_fingerprint: String,
    pub cloud_fingerprint: String,
    pub cloud_sequence_number: Option<u64>,
    pub available_actions: Vec<&'static str>,
    pub warnings: Vec<&'static str>,
    pub local_workshop_status: String,
    pub local_workshop_title: &'static str,
    pub local_workshop_author_name: &'static str,
    pub cloud_workshop_status: String,
    pub cloud_workshop_title: &'static str,
    pub cloud_workshop_author_name: &'static str,
}

/// `GET summary` (without `success`).
#[derive(Debug, Serialize, ToSchema)]
pub struct Summary {
    pub provider_available: bool,
    pub current_character_name: String,
    /// One [`Item`] per character (rendered once per change of its sides).
    #[schema(value_type = Vec<Item>)]
    pub items: Vec<Box<RawValue>>,
    pub sync_backend: &'static str,
    pub platform_autocloud: PlatformAutocloud,
}

/// One character's comparison (the `detail` of upload and download; without
/// `success`).
#[derive(Debug, Serialize, ToSchema)]
pub struct Detail {
    pub provider_available: bool,
    pub current_character_name: String,
    pub item: Item,
    pub local_summary: Option<Side>,
    pub cloud_summary: Option<Side>,
}

/// `GET character/{name}`: the comparison and the sync fields.
#[derive(Debug, Serialize, ToSchema)]
pub struct DetailAnswer {
    #[serde(flatten)]
    pub detail: Detail,
    pub sync_backend: &'static str,
    pub platform_autocloud: PlatformAutocloud,
}

/// The workshop status and asset state of an asset from the Steam Workshop
/// (empty strings for other sources): installed when its folder exists in
/// the workshop directory, downloadable when not, unknown without one.
pub fn workshop_status(workshop_dir: Option<&Path>, source: &str, id: &str) -> (String, String) {
    if source != "steam_workshop" && source != "workshop" {
        return (String::new(), String::new());
    }
    let Some(dir) = workshop_dir else {
        return ("unknown".into(), String::new());
    };
    match paths::safe_name(id).ok().map(|n| dir.join(n)) {
        Some(p) if p.is_dir() => ("installed_and_subscribed".into(), "ready".into()),
        Some(_) => ("unavailable".into(), "downloadable".into()),
        None => ("unknown".into(), String::new()),
    }
}

/// The local side of `name` from its unit's facts.
pub fn local_side(name: &str, facts: &LocalFacts, workshop_dir: Option<&Path>) -> Side {
    let (ws, state) = workshop_status(workshop_dir, &facts.asset_source, &facts.asset_source_id);
    let asset_state = if !state.is_empty() {
        state
    } else if facts.model_type.is_empty() {
        String::new()
    } else {
        "ready".into()
    };
    let mut warnings = Vec::new();
    if matches!(asset_state.as_str(), "downloadable" | "missing") {
        warnings.push("local_resource_missing_on_this_device");
    }
    Side {
        character_name: name.to_string(),
        display_name: facts.display_name.clone(),
        model_type: facts.model_type.clone(),
        asset_source: facts.asset_source.clone(),
        asset_source_id: facts.asset_source_id.clone(),
        asset_state,
        workshop_status: ws,
        updated_at_utc: facts.updated_at.clone(),
        fingerprint: facts.fingerprint.clone().unwrap_or_default(),
        sequence_number: None,
        source_client_id: None,
        files: facts
            .files
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        warnings,
    }
}

/// The cloud side of `name` from its meta record. Assets imported by hand on
/// the uploading device must be imported again after a download.
pub fn cloud_side(name: &str, m: &Meta, workshop_dir: Option<&Path>) -> Side {
    let (ws, state) = workshop_status(workshop_dir, &m.asset_source, &m.asset_source_id);
    let asset_state = if !state.is_empty() {
        state
    } else if matches!(
        m.asset_source.as_str(),
        "local_imported" | "manual_external"
    ) {
        "import_required".into()
    } else if m.model_type.is_empty() {
        String::new()
    } else {
        "ready".into()
    };
    let mut warnings = Vec::new();
    if matches!(
        asset_state.as_str(),
        "import_required" | "downloadable" | "missing"
    ) {
        warnings.push("cloud_resource_may_be_missing_after_download");
    }
    Side {
        character_name: name.to_string(),
        display_name: if m.display_name.is_empty() {
            name.to_string()
        } else {
            m.display_name.clone()
        },
        model_type: m.model_type.clone(),
        asset_source: m.asset_source.clone(),
        asset_source_id: m.asset_source_id.clone(),
        asset_state,
        workshop_status: ws,
        updated_at_utc: m.updated_at_utc.clone(),
        fingerprint: m.payload_fingerprint.clone(),
        sequence_number: Some(m.sequence_number),
        source_client_id: Some(m.source_client_id.clone()),
        files: m.files.iter().map(|(k, v)| (k.clone(), v.size)).collect(),
        warnings,
    }
}

/// Relate the two sides of `name` (at least one exists): equal fingerprints
/// match; the main side (local when present) gives the shared fields.
pub fn item(name: &str, local: Option<&Side>, cloud: Option<&Side>) -> Item {
    let field =
        |side: Option<&Side>, f: fn(&Side) -> &String| side.map(f).cloned().unwrap_or_default();
    let main = local.or(cloud);
    let lf = field(local, |s| &s.fingerprint);
    let cf = field(cloud, |s| &s.fingerprint);
    let relation = match (local.is_some(), cloud.is_some()) {
        (true, false) => Relation::LocalOnly,
        (false, true) => Relation::CloudOnly,
        _ if !lf.is_empty() && lf == cf => Relation::Matched,
        _ => Relation::Diverged,
    };
    let available_actions = match relation {
        Relation::LocalOnly => vec!["upload"],
        Relation::CloudOnly => vec!["download"],
        Relation::Diverged => vec!["upload", "download"],
        Relation::Matched => vec![],
    };
    let mut warnings: Vec<&'static str> = Vec::new();
    for w in main.into_iter().flat_map(|s| &s.warnings) {
        if !warnings.contains(w) {
            warnings.push(w);
        }
    }
    Item {
        character_name: name.to_string(),
        display_name: field(main, |s| &s.display_name),
        relation_state: relation,
        local_exists: local.is_some(),
        cloud_exists: cloud.is_some(),
        model_type: field(main, |s| &s.model_type),
        asset_source: field(main, |s| &s.asset_source),
        asset_source_id: field(main, |s| &s.asset_source_id),
        local_asset_source: field(local, |s| &s.asset_source),
        local_asset_source_id: field(local, |s| &s.asset_source_id),
        cloud_asset_source: field(cloud, |s| &s.asset_source),
        cloud_asset_source_id: field(cloud, |s| &s.asset_source_id),
        local_asset_state: field(local, |s| &s.asset_state),
        cloud_asset_state: field(cloud, |s| &s.asset_state),
        local_updated_at_utc: field(local, |s| &s.updated_at_utc),
        cloud_updated_at_utc: field(cloud, |s| &s.updated_at_utc),
        local_fingerprint: lf,
        cloud_fingerprint: cf,
        cloud_sequence_number: cloud.and_then(|c| c.sequence_number),
        available_actions,
        warnings,
        local_workshop_status: field(local, |s| &s.workshop_status),
        local_workshop_title: "",
        local_workshop_author_name: "",
        cloud_workshop_status: field(cloud, |s| &s.workshop_status),
        cloud_workshop_title: "",
        cloud_workshop_author_name: "",
    }
}

/// A rendered item and the two values it was rendered from.
struct Rendered {
    local: Option<Arc<LocalFacts>>,
    cloud: Option<Arc<Meta>>,
    json: Box<RawValue>,
}

/// Rendered summary items by character: an item is rendered again only when
/// either side is another value (the facts and records are shared values that
/// their caches replace on every change), so a repeated summary copies the
/// unchanged items instead of building them. Items of Workshop assets are
/// always rendered (their state follows the workshop folder).
#[derive(Default)]
pub struct RenderedItems {
    items: Mutex<HashMap<String, Rendered>>,
}

fn same<T>(a: &Option<Arc<T>>, b: Option<&Arc<T>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

fn from_workshop(source: &str) -> bool {
    source == "steam_workshop" || source == "workshop"
}

impl RenderedItems {
    /// The items of every character on either side, by name; `locals` holds
    /// the facts of every local character, `units` every published cloud unit.
    pub fn items(
        &self,
        locals: &BTreeMap<String, Arc<LocalFacts>>,
        units: &[Arc<Meta>],
        workshop_dir: Option<&Path>,
    ) -> Vec<Box<RawValue>> {
        let mut cloud: BTreeMap<&str, &Arc<Meta>> = BTreeMap::new();
        for m in units {
            // The first record of a name wins (the list is sorted by name).
            cloud.entry(m.character_name.as_str()).or_insert(m);
        }
        let mut names: Vec<&str> = locals.keys().map(String::as_str).collect();
        names.extend(cloud.keys().copied());
        names.sort_unstable();
        names.dedup();
        let mut old = std::mem::take(&mut *self.items.lock().unwrap_or_else(|e| e.into_inner()));
        let mut kept = HashMap::with_capacity(names.len());
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let local = locals.get(name);
            let remote = cloud.get(name).copied();
            if let Some(r) = old.remove(name) {
                if same(&r.local, local) && same(&r.cloud, remote) {
                    out.push(r.json.clone());
                    kept.insert(name.to_string(), r);
                    continue;
                }
            }
            let l = local.map(|f| local_side(name, f, workshop_dir));
            let c = remote.map(|m| cloud_side(name, m, workshop_dir));
            let rendered = serde_json::value::to_raw_value(&item(name, l.as_ref(), c.as_ref()));
            // Serialising plain strings and numbers cannot fail.
            let Ok(json) = rendered else { continue };
            let workshop = local.is_some_and(|f| from_workshop(&f.asset_source))
                || remote.is_some_and(|m| from_workshop(&m.asset_source));
            if !workshop {
                let r = Rendered {
                    local: local.cloned(),
                    cloud: remote.cloned(),
                    json: json.clone(),
                };
                kept.insert(name.to_string(), r);
            }
            out.push(json);
        }
        *self.items.lock().unwrap_or_else(|e| e.into_inner()) = kept;
        out
    }
}

impl CloudSave {
    /// `GET summary`: every character on either side, by name. Unchanged
    /// local units and cloud records come from caches (see
    /// [`crate::local_facts`] and [`Target::list_units`]).
    pub async fn summary(&self) -> Result<Summary, CloudSaveError> {
        let target = self.target().await?;
        // The two sides are read at the same time.
        let (units, locals) = tokio::join!(
            target.list_units(),
            self.local_facts(self.state.characters.names(), true)
        );
        let units = units?;
        let has_content = locals.values().any(|l| !l.files.is_empty());
        let items = self
            .rendered_items
            .items(&locals, &units, self.workshop_dir());
        Ok(Summary {
            provider_available: true,
            current_character_name: self.state.characters.current(),
            items,
            sync_backend: self.sync_backend(),
            platform_autocloud: self
                .platform_autocloud(Some(&units), Some(has_content))
                .await,
        })
    }

    /// The comparison of `name` (either side must exist).
    pub(crate) async fn detail_with(
        &self,
        target: &Target,
        name: &str,
    ) -> Result<Detail, CloudSaveError> {
        let cloud = target.read_meta(name).await?;
        let local = self
            .local_facts(vec![name.to_string()], false)
            .await
            .remove(name);
        if local.is_none() && cloud.is_none() {
            return Err(CloudSaveError::CharacterNotFound);
        }
        let workshop = self.workshop_dir();
        let l = local.map(|f| local_side(name, &f, workshop));
        let c = cloud.map(|m| cloud_side(name, &m, workshop));
        Ok(Detail {
            provider_available: true,
            current_character_name: self.state.characters.current(),
            item: item(name, l.as_ref(), c.as_ref()),
            local_summary: l,
            cloud_summary: c,
        })
    }

    /// `GET character/{name}` (name already validated).
    pub async fn detail(&self, name: &str) -> Result<DetailAnswer, CloudSaveError> {
        let target = self.target().await?;
        let detail = self.detail_with(&target, name).await?;
        let units = target.list_units().await.ok();
        Ok(DetailAnswer {
            detail,
            sync_backend: self.sync_backend(),
            platform_autocloud: self.platform_autocloud(units.as_deref(), None).await,
        })
    }
}

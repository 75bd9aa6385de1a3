//! `/api/model/mmd/…`: uploads, listings, emotion mappings and deletes.

use axum::extract::{Multipart, Request};
use axum::response::{IntoResponse, Response};
use companiond_core::envelope::QueryOf;
use serde_json::Value;

use companiond_core::envelope::{BodyOf, JsonBody};
use companiond_core::Ext;

use super::answers::{
    AnimationList, AnimationUploadedAnswer, MappingAnswer, MappingQuery, Message, MmdConfigAnswer,
    ModelDeleted, ModelList, ModelUploadedAnswer, SaveMapping, UrlParam, UserAnimationList,
    ZipImportedAnswer,
};
use super::{done, fresh, multipart, multipart_error, refused};
use crate::error::AvatarError;
use crate::mmd::Mmd;
use crate::Avatars;

#[derive(Clone, Copy)]
enum Upload {
    Model,
    Animation,
    Zip,
}

/// `POST /api/model/mmd/upload`: a `.pmx`/`.pmd` model.
pub async fn upload_model(Ext(av): Ext<Avatars>, req: Request) -> Response {
    upload(&av.mmd, Upload::Model, req).await
}

/// `POST /api/model/mmd/upload_animation`: a `.vmd` animation.
pub async fn upload_animation(Ext(av): Ext<Avatars>, req: Request) -> Response {
    upload(&av.mmd, Upload::Animation, req).await
}

/// `POST /api/model/mmd/upload_zip`: a ZIP of a model and its textures.
pub async fn upload_zip(Ext(av): Ext<Avatars>, req: Request) -> Response {
    upload(&av.mmd, Upload::Zip, req).await
}

async fn upload(mmd: &Mmd, which: Upload, req: Request) -> Response {
    let mp = match multipart(req).await {
        Ok(mp) => mp,
        Err(e) => return e.into_response(),
    };
    stream_file_part(mmd, which, mp).await
}

/// The file is read from the part named "file" only; other parts (even ones
/// carrying a file) are skipped unread and nothing is stored for them.
async fn stream_file_part(mmd: &Mmd, which: Upload, mut mp: Multipart) -> Response {
    let field = loop {
        match mp.next_field().await {
            Ok(Some(f)) if f.name() == Some("file") => break f,
            Ok(Some(_)) => continue,
            Ok(None) => {
                return refused(AvatarError::invalid(
                    "missing_file",
                    "multipart field file is required",
                ))
            }
            Err(e) => return refused(multipart_error(e)),
        }
    };
    let name = field.file_name().map(str::to_string);
    let mut field = field;
    let name = name.as_deref();
    let answer = match which {
        Upload::Model => mmd
            .upload_model(name, &mut field)
            .await
            .map(|a| done(Ok(ModelUploadedAnswer::from(a)))),
        Upload::Animation => mmd
            .upload_animation(name, &mut field)
            .await
            .map(|a| done(Ok(AnimationUploadedAnswer::from(a)))),
        Upload::Zip => mmd
            .upload_zip(name, &mut field)
            .await
            .map(|a| done(Ok(ZipImportedAnswer::from(a)))),
    };
    drop(field);
    drop(mp);
    answer.unwrap_or_else(refused)
}

/// `GET /api/model/mmd/models`.
pub async fn models(Ext(av): Ext<Avatars>) -> Response {
    fresh(av.mmd.list_models().await.map(ModelList::from))
}

/// `GET /api/model/mmd/animations`.
pub async fn animations(Ext(av): Ext<Avatars>) -> Response {
    fresh(av.mmd.list_animations().await.map(AnimationList::from))
}

/// `GET /api/model/mmd/animations/list`.
pub async fn deletable_animations(Ext(av): Ext<Avatars>) -> Response {
    fresh(
        av.mmd
            .deletable_animations()
            .await
            .map(UserAnimationList::from),
    )
}

/// `GET /api/model/mmd/config`.
pub async fn config(Ext(av): Ext<Avatars>) -> Response {
    done(Ok(MmdConfigAnswer::from(av.mmd.config())))
}

/// `GET /api/model/mmd/emotion_mapping?model=`: `{}` when none is stored.
pub async fn emotion_mapping(Ext(av): Ext<Avatars>, QueryOf(q): QueryOf<MappingQuery>) -> Response {
    fresh(
        av.mmd
            .emotion_mapping(q.model.as_deref())
            .await
            .map(|mapping| MappingAnswer {
                success: true,
                mapping,
            }),
    )
}

/// `POST /api/model/mmd/emotion_mapping` `{model, mapping}`.
pub async fn save_emotion_mapping(
    Ext(av): Ext<Avatars>,
    BodyOf(body): BodyOf<SaveMapping>,
) -> Response {
    let (model, mapping) = match body.checked() {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let saved = av.mmd.save_emotion_mapping(&model, mapping).await;
    done(saved.map(|()| Message::new(format!("emotion mapping of {model} saved"))))
}

/// `DELETE /api/model/mmd/model` with `url` in the query or the JSON body.
///
/// The body stays any JSON value (`JsonBody<Value>`): the query names the file
/// as well, and a body that is not an object must leave the query's `url` in
/// force, which no object type can express ([`UrlParam::under`] reads it).
pub async fn delete_model(
    Ext(av): Ext<Avatars>,
    QueryOf(q): QueryOf<UrlParam>,
    body: JsonBody<Value>,
) -> Response {
    let Some(url) = q.under(&body.0).url else {
        return AvatarError::invalid("missing_url", "url is required").into_response();
    };
    let deleted = av.mmd.delete_model(&url).await;
    done(deleted.map(|deleted_files| ModelDeleted {
        success: true,
        message: "model deleted".to_string(),
        deleted_files,
    }))
}

/// `DELETE /api/model/mmd/animation` with `url` in the query or the JSON body
/// (the body stays any JSON value, as for [`delete_model`]).
pub async fn delete_animation(
    Ext(av): Ext<Avatars>,
    QueryOf(q): QueryOf<UrlParam>,
    body: JsonBody<Value>,
) -> Response {
    let Some(url) = q.under(&body.0).url else {
        return AvatarError::invalid("missing_url", "url is required").into_response();
    };
    let deleted = av.mmd.delete_animation(&url).await;
    done(deleted.map(|name| Message::new(format!("animation {name} deleted"))))
}

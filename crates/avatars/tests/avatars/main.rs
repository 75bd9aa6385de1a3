//! End-to-end tests of the MMD and PNGTuber routes over real HTTP, with real
//! files, multipart bodies and ZIP archives built here; one module a resource.

mod common;
mod mmd;
mod pngtuber;
mod routes;
mod uploads;
mod zip_import;

//! Telling what happened: a run as a story (one narrator per component), the sequence
//! diagram, the demo, the reports and their charts, the replay file format and the failure
//! story. Every file is written whole.

pub mod chart;
pub mod closeness;
pub mod demo;
pub mod diagram;
pub mod failure;
pub mod fix;
pub mod junit;
pub mod money;
pub mod outcomes;
pub mod reports;
pub mod second_act;
pub mod story;
pub mod timeline;

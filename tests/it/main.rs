//! The one integration test binary: a module per area (CONTRIBUTING.md).
//! `common` (the real-binary harness, the lab, Go modules, suite images) is
//! compiled once for all of them.

mod admission;
mod affected;
mod attack;
mod certify;
mod certify_edges;
mod common;
mod config;
mod container;
mod containment;
mod core_remote;
mod dispatch;
mod docker;
mod fleet;
mod git_hardening;
mod hardening;
mod init;
mod junit_report;
mod never_a_lie;
mod operator;
mod pipeline;
mod record_fields;
mod records_show;
mod reliability;
mod remeasure;
mod remote_scripts;
mod repo_config;
mod reports_corpus;
mod reports_e2e;
mod reports_e2e_why;
mod reports_producers;
mod requirements;
mod scratch;
mod seal;
mod seal_modes;
mod signals;
mod slurm_lab;
mod slurm_transport;
mod snapshots;
mod source_rules;
mod split;
mod ssh_config;
mod streams;
mod transport;
mod union_stream;

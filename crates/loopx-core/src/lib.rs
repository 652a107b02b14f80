//! Pure domain owners of loopx.
//!
//! Every durable state change is a typed operation applied by an
//! [`operation::Owner`]: a pure function from the current state and a
//! request to an event and a receipt, or a typed refusal. No IO happens
//! here: clocks and file reads arrive as arguments from the adapters. This
//! crate is what the CLI, the driver, MCP and HTTP all share; it is not a
//! place for storage, processes or rendering to a terminal.

pub mod backoff;
pub mod containment;
pub mod cost;
pub mod digest;
pub mod driver;
pub mod ending;
pub mod error_class;
pub mod focus;
pub mod formal;
pub mod goal;
pub mod hook;
pub mod host_policy;
pub mod ident;
pub mod ledger;
pub mod notify;
pub mod operation;
pub mod panel;
pub mod path;
pub mod pii;
pub mod redact;
pub mod refusals;
pub mod supervisor;
pub mod text;
pub mod window;
pub mod words;
pub mod workers;

//! The loopx application layer: "a loop" and what can be done with it.
//!
//! A loop is opened through its location (the loop directory, and the
//! store that holds its state); every use case the adapters offer (init,
//! append, status, the goal and todo operations, refresh-state, should-run,
//! the task body, iteration detail, the driver's bookkeeping) is one
//! function here returning a typed view. The CLI, the HTTP server, the MCP
//! server and the driver parse, call and render; none of them holds a rule
//! of its own, and none imports another.
//!
//! Below this layer: the pure owners (`loopx-core`) and the durable
//! authority (`loopx-store`). Platform detail (process groups, locks,
//! randomness) is fenced in [`platform`].

pub mod agent_cmd;
pub mod all_loops;
pub mod arming;
pub mod backup;
pub mod bootstrap;
pub mod clock;
pub mod containment;
pub mod continuation;
pub mod cost;
pub mod doctor;
pub mod driver;
pub mod error;
pub mod focus;
pub mod formal;
pub mod fsutil;
pub mod goal;
pub mod goal_priority;
pub mod health;
pub mod host_policy;
pub mod import;
pub mod install;
pub mod iteration_input;
pub mod iterations;
pub mod journal_scan;
pub mod launchers;
pub mod ledger;
pub mod loop_dir;
pub mod migrate;
pub mod notify;
pub mod operation;
pub mod panel;
pub mod platform;
pub mod receipt;
pub mod registry;
pub mod snapshot;
pub mod stop;
pub mod supervisor;
pub mod turns;
pub mod views;
pub mod workers;

pub use error::{AppError, ErrorClass};
pub use receipt::ReceiptView;

#[cfg(test)]
mod tests {
    /// The names are defined beside their owners; the one list of what is
    /// never evidence is the core's, and must not fall behind them.
    #[test]
    fn every_file_loopx_keeps_in_the_loop_directory_is_a_control_file() {
        use crate::{focus, loop_dir, notify, panel};
        for name in [
            loop_dir::DATABASE,
            loop_dir::DRIVER_LOCK,
            loop_dir::DRIVER_LOGS,
            loop_dir::STATUS,
            loop_dir::RECOVERY,
            loop_dir::STOP_REQUESTED,
            loop_dir::BLOCKED,
            loop_dir::PAUSE,
            notify::CONFIG_FILE,
            notify::AUDIT_FILE,
            notify::DELIVERED_FILE,
            panel::ARTIFACTS,
            loopx_core::panel::FILE,
            focus::PROJECTION,
        ] {
            let path = loopx_core::path::LoopPath::parse(name).unwrap();
            assert!(path.control_file().is_some(), "{name} is not listed");
        }
        let evidence = loopx_core::path::LoopPath::parse(loop_dir::PROOF_ARTIFACTS).unwrap();
        assert!(evidence.control_file().is_none());
    }
}

//! Who is asking: the goal's owner (a person at the CLI or the dashboard)
//! or an agent, whose id the identifier grammar must accept.

use super::{input, GoalError};
use serde::{Deserialize, Serialize};

/// Who is asking. The local owner (a person at the CLI or dashboard) has no
/// agent id; an agent always does.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum Actor {
    Owner,
    Agent(String),
}

impl Actor {
    /// The agent `id`, or why it is not an agent id. Adapters build actors
    /// with this, so an empty `--agent-id` is refused rather than taken to
    /// mean the owner.
    pub fn agent(id: &str) -> Result<Actor, GoalError> {
        let actor = Actor::Agent(id.to_owned());
        input::actor(&actor)?;
        Ok(actor)
    }

    pub fn name(&self) -> &str {
        match self {
            Actor::Owner => "owner",
            Actor::Agent(id) => id,
        }
    }

    pub fn agent_id(&self) -> Option<&str> {
        match self {
            Actor::Owner => None,
            Actor::Agent(id) => Some(id),
        }
    }
}

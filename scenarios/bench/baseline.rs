//! The baseline the bench measures a run's cost against: the store as it was before its
//! cost was lowered. Each write returned the row it changed (`RETURNING state, fence`), the
//! state's check was written `state IN (...)`, which SQLite runs through a temporary b-tree
//! on every insert and update, and every run opened its databases anew. Same seeds, same
//! worlds, same traces: only the cost differs, and the bench checks that the traces agree.

use fencesim_model::store::SCHEMA;
use fencesim_model::Statements;
use fencesim_sim::{Connections, Plain, WiredOf, Wiring};
use std::sync::LazyLock;

/// The refund store's schema as it was.
static SCHEMA_BEFORE: LazyLock<String> = LazyLock::new(|| {
    let before = SCHEMA.replace(
        "CHECK (state = 'pending' OR state = 'sending' OR state = 'sent')",
        "CHECK (state IN ('pending', 'sending', 'sent'))",
    );
    assert_ne!(before, SCHEMA, "the state's check is where the baseline expects it");
    before
});

/// The model as written, with the baseline's statements and fresh databases.
pub struct Baseline;

impl Wiring for Baseline {
    type Lease = <Plain as Wiring>::Lease;
    type Tokens = <Plain as Wiring>::Tokens;
    type Store = <Plain as Wiring>::Store;
    type Gateway = <Plain as Wiring>::Gateway;
    type Queue = <Plain as Wiring>::Queue;
    type Settlement = <Plain as Wiring>::Settlement;

    fn wire(&self, connections: Connections) -> WiredOf<Self> {
        Plain.wire(connections)
    }

    fn statements(&self, mechanism: Statements) -> Statements {
        if mechanism == Statements::SQLITE {
            Statements::SQLITE_RETURNING
        } else {
            mechanism
        }
    }

    fn fresh_schema(&self) -> Option<&'static str> {
        Some(&SCHEMA_BEFORE)
    }
}

//! The worked example's world with a gateway whose lookups lag: worker A pays `r_815`,
//! and right then its lease ends early and the queue hands the job to B. B finds `r_815`
//! in `sending` and asks the gateway whether a refund exists; the gateway answers from a
//! copy 400 ms behind its ledger, which has not seen A's refund yet, and says no. What
//! saves the money is then the idempotency key alone.

use crate::scenario::builder::Scenario;
use crate::scenario::worked_example::{worked_example, A, M_4471, R_815};
use fencesim_model::StepKind;
use fencesim_sim::{FaultKind, Trigger};

/// How far the copy lookups read runs behind the ledger.
pub const LOOKUP_LAG_MS: u64 = 400;

/// A pays `r_815`; as its call returns, its lease on `m_4471` expires and the queue hands
/// the job to B, and A freezes for 8 s before it can confirm.
pub fn lagging_lookup() -> Scenario {
    let paid = Trigger::Step { worker: A, step: StepKind::AfterGatewayCall, nth: R_815.0 };
    let mut scenario = worked_example()
        .to_builder()
        .without_faults()
        .lookup_lag_ms(LOOKUP_LAG_MS)
        .fault(FaultKind::ExpireLease { instance: 0, merchant: M_4471 }, paid)
        .fault(FaultKind::Redeliver { worker: A }, paid)
        .fault(FaultKind::Pause { worker: A, duration_ms: 8_000 }, paid)
        .build();
    scenario.name = "lagging-lookup";
    scenario
}

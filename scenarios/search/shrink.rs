//! The shrinker: removes faults from a plan one at a time while the plan still fails the
//! same way, and returns the smallest plan it found.

use fencesim_sim::FaultPlan;

/// Drops each fault in turn and keeps the plan without it whenever `still_fails` says the
/// smaller plan still fails the same way.
pub fn shrink_plan(
    plan: &FaultPlan,
    mut still_fails: impl FnMut(&FaultPlan) -> Result<bool, String>,
) -> Result<FaultPlan, String> {
    let mut plan = plan.clone();
    let mut index = 0;
    while index < plan.faults.len() {
        let mut fewer = plan.clone();
        fewer.faults.remove(index);
        if still_fails(&fewer)? {
            plan = fewer;
        } else {
            index += 1;
        }
    }
    Ok(plan)
}

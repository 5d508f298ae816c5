//! The article's worked example: merchant `m_4471`, 1,200 refunds, worker A frozen right
//! after it claims `r_815`, worker B taking over when the lease expires.

use crate::scenario::builder::Scenario;
use fencesim_model::{Cents, MerchantId, RefundId, StepKind, WorkerId};
use fencesim_sim::{Latency, WallMs};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Worker A and worker B of the story.
pub const A: WorkerId = WorkerId(0);
pub const B: WorkerId = WorkerId(1);

/// The article's merchant.
pub const M_4471: MerchantId = MerchantId(4471);
pub const WORKED_EXAMPLE_REFUNDS: usize = 1200;
pub const WORKED_EXAMPLE_TOTAL: Cents = Cents(8_430_000);
/// The refund A stalls on.
pub const R_815: RefundId = RefundId(815);

/// 1,200 amounts that vary, come out the same every time, make `r_815` 70.25 EUR and add
/// up to exactly 84,300.00 EUR. The mean is 70.25 EUR, so each `r_i` and `r_(1201-i)`
/// are placed the same distance above and below it.
pub fn worked_example_amounts() -> Vec<Cents> {
    let count = WORKED_EXAMPLE_REFUNDS;
    let mean = WORKED_EXAMPLE_TOTAL.0 / count as i64;
    let mut rng = ChaCha8Rng::seed_from_u64(4471);
    let mut amounts = vec![Cents(0); count];
    for i in 1..=count / 2 {
        let mirror = count + 1 - i;
        let spread = if i == R_815.0 as usize || mirror == R_815.0 as usize {
            0
        } else {
            rng.gen_range(-5_500..=5_500)
        };
        amounts[i - 1] = Cents(mean + spread);
        amounts[mirror - 1] = Cents(mean - spread);
    }
    amounts
}

/// Gateway latencies for the worked example: they vary between 24 and 40 ms, and those of
/// `r_001` to `r_814` add up to exactly 26,000 ms, so that worker A, which starts at
/// 10:00:00.000, claims `r_815` at 10:00:26.000 by the simulation's own clock.
pub fn worked_example_latency() -> Latency {
    const BEFORE_STALL_MS: u64 = 26_000;
    let count = WORKED_EXAMPLE_REFUNDS;
    let mut rng = ChaCha8Rng::seed_from_u64(26_000);
    let mut per_refund_ms = vec![0u64; count + 1];
    for ms in per_refund_ms.iter_mut().skip(1) {
        *ms = rng.gen_range(24..=40);
    }
    let before = R_815.0 as usize;
    let mut sum: u64 = per_refund_ms[1..before].iter().sum();
    let mut i = 1;
    while sum != BEFORE_STALL_MS {
        let ms = &mut per_refund_ms[i];
        if sum < BEFORE_STALL_MS && *ms < 40 {
            *ms += 1;
            sum += 1;
        } else if sum > BEFORE_STALL_MS && *ms > 24 {
            *ms -= 1;
            sum -= 1;
        }
        i = if i + 1 == before { 1 } else { i + 1 };
    }
    Latency { default_ms: 30, per_refund_ms }
}

/// The article's worked example: A stalls after claiming `r_815` at 10:00:26, its lease
/// expires at 10:00:30, the queue hands the job to B at 10:00:31, A wakes at 10:00:34.
pub fn worked_example() -> Scenario {
    Scenario::named("worked-example")
        .starts_at(WallMs::hms(10, 0, 0))
        .merchant_with_refunds(M_4471, &worked_example_amounts())
        .fence_counter_stands_at(M_4471, 32)
        .lease_ttl_ms(30_000)
        .visibility_timeout_ms(31_000)
        .workers(2)
        .gateway_latency(worked_example_latency())
        .lookup_latency_ms(5)
        .pause_at_step(A, StepKind::AfterClaim, R_815.0, 8_000)
        .settles_within_ms(120_000)
        .build()
}

/// The second act: the same story, in a world where settling a refund also posts it to
/// a second store, the merchant's settlement ledger (between the gateway call and the
/// confirm). A wakes at 10:00:34 and posts r_815 before its confirm: with the ledger
/// unfenced that posting goes through beside B's; fenced, it is turned away.
pub fn worked_example_two_stores() -> Scenario {
    let mut scenario = worked_example().to_builder().settlement_ledger(0).build();
    scenario.name = "worked-example-two-stores";
    scenario
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_amounts_vary_total_84_300_eur_and_r_815_is_70_25() {
        let amounts = worked_example_amounts();
        assert_eq!(amounts.len(), 1200);
        assert_eq!(amounts.iter().copied().sum::<Cents>(), WORKED_EXAMPLE_TOTAL);
        assert_eq!(amounts[814], Cents(7025));
        assert!(amounts.iter().all(|amount| amount.0 > 0));
        let distinct: std::collections::BTreeSet<_> = amounts.iter().collect();
        assert!(distinct.len() > 500, "amounts should vary, got {} distinct", distinct.len());
        assert_eq!(amounts, worked_example_amounts());
    }

    #[test]
    fn the_latencies_before_the_stall_add_up_to_26_seconds() {
        let latency = worked_example_latency();
        let before: u64 = (1..815).map(|i| latency.of(RefundId(i))).sum();
        assert_eq!(before, 26_000);
        assert!((1..=1200).all(|i| (24..=40).contains(&latency.of(RefundId(i)))));
    }
}

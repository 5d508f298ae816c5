//! The conductor's order and its cancellations (`foreign::conductor`).

use super::*;
use std::sync::Arc;

fn conductor(test: &str, seed: u64) -> Arc<Conductor> {
    let file = std::env::temp_dir().join(format!("fencesim-conductor-{test}-{}", std::process::id()));
    Arc::new(Conductor::new(seed, file).expect("the clock file"))
}

/// Two copies' requests, each held for its turn from its own thread: the conductor lets
/// them go in story order once both wait, moves the clock to each, and a pause holds a
/// copy's request past its own time.
#[test]
fn requests_go_on_in_story_order_once_every_copy_waits() {
    let conductor = conductor("order", 1);
    let (a, b) = (WorkerId(0), WorkerId(1));
    conductor.set_live([a, b].into_iter().collect());
    conductor.begin(Duration::ZERO);
    assert!(conductor.wait_quiet(Duration::from_millis(20)).is_err(), "nobody waits yet");
    conductor.pause(a, 9_000);
    let holders: Vec<_> = [(a, 5_000), (b, 7_000)]
        .into_iter()
        .map(|(worker, at)| {
            let conductor = conductor.clone();
            std::thread::spawn(move || {
                conductor.arrive(worker);
                let went = conductor.hold(Some(worker), format!("{worker} redis 1"), at, Held::Turn);
                conductor.leave(worker);
                went
            })
        })
        .collect();
    let (mut order, mut live) = (Vec::new(), BTreeSet::from([a, b]));
    while order.len() < 2 {
        conductor.wait_quiet(Duration::from_secs(5)).expect("every live copy waits");
        let (at, name) = conductor.fire_next().expect("the clock file").expect("a ticket");
        // the copy whose request went on works until its next one: this one sends none
        live.remove(if name.starts_with('A') { &a } else { &b });
        conductor.set_live(live.clone());
        order.push((at, name));
    }
    assert!(holders.into_iter().all(|h| h.join().expect("a holder")), "both went on");
    assert_eq!(order, vec![(7_000, "B redis 1".to_owned()), (9_000, "A redis 1".to_owned())]);
    assert_eq!(conductor.story_us(), 9_000);
}

/// A crash cancels what the copy holds; the run's end cancels everything else.
#[test]
fn a_crash_and_the_end_cancel_what_is_held() {
    let conductor = conductor("cancel", 1);
    let a = WorkerId(0);
    conductor.begin(Duration::ZERO);
    let held = {
        let conductor = conductor.clone();
        std::thread::spawn(move || conductor.hold(Some(a), "A redis 1".into(), 10, Held::Turn))
    };
    while conductor.next_wake().is_none() {
        std::thread::sleep(Duration::from_millis(1));
    }
    conductor.crashed(a, 1_000);
    assert!(!held.join().expect("the holder"), "a crashed copy's request never goes on");
    assert!(
        !conductor.hold(Some(a), "A redis 2".into(), 20, Held::Turn),
        "nor any it sends before its restart"
    );
    assert_eq!(conductor.take_restarts(), vec![(a, 1_000)]);
    conductor.finish();
    assert!(!conductor.hold(Some(WorkerId(1)), "B redis 1".into(), 30, Held::Turn), "the run is over");
}

/// A wait for a job ends, with nothing, once `POLL_TURNS` other tickets have gone on; its
/// copy waits until then.
#[test]
fn a_take_waited_out_in_turns_ends() {
    let conductor = conductor("poll", 1);
    let (a, b) = (WorkerId(0), WorkerId(1));
    conductor.set_live([a].into_iter().collect());
    conductor.begin(Duration::ZERO);
    let take = {
        let conductor = conductor.clone();
        std::thread::spawn(move || {
            conductor.arrive(a);
            let ended = conductor.hold(Some(a), "A queue 1 waits for a change".into(), 1_000_000, Held::Poll);
            conductor.leave(a);
            ended
        })
    };
    conductor.wait_quiet(Duration::from_secs(5)).expect("the take waits");
    for nth in 1..POLL_TURNS {
        let conductor_b = conductor.clone();
        let turn = std::thread::spawn(move || {
            conductor_b.hold(Some(b), format!("B redis {nth}"), nth as u64, Held::Turn)
        });
        while conductor.next_wake() != Some(nth as u64) {
            std::thread::sleep(Duration::from_micros(200));
        }
        conductor.fire_next().expect("the clock file").expect("B's ticket");
        assert!(turn.join().expect("B's turn"), "B's request went on");
        assert!(conductor.wait_quiet(Duration::ZERO).is_ok(), "A still waits after {nth} turns");
    }
    let conductor_b = conductor.clone();
    let last = std::thread::spawn(move || conductor_b.hold(Some(b), "B redis last".into(), 100, Held::Turn));
    while conductor.next_wake() != Some(100) {
        std::thread::sleep(Duration::from_micros(200));
    }
    conductor.fire_next().expect("the clock file").expect("B's last ticket");
    assert!(last.join().expect("B's turn"));
    assert!(!take.join().expect("the take"), "the take is waited out after {POLL_TURNS} turns");
}

/// A request held on its way out (a delay the plan armed) is cut short by its copy's
/// crash and never goes on; the copy started again, with nothing of its old process left
/// held, is waited for while it starts up.
#[test]
fn a_crash_ends_a_delayed_request_and_the_copy_started_again_is_waited_for() {
    let conductor = conductor("delay", 1);
    let a = WorkerId(0);
    conductor.set_live([a].into_iter().collect());
    conductor.begin(Duration::ZERO);
    let delayed = {
        let conductor = conductor.clone();
        std::thread::spawn(move || {
            conductor.arrive(a);
            acting_for(a, "A database 3".into());
            let went = conductor.delay_until(EPOCH_US + 348_000);
            conductor.leave(a);
            went
        })
    };
    conductor.wait_quiet(Duration::from_secs(5)).expect("A waits: its request is held");
    conductor.crashed(a, 161_000);
    assert!(!delayed.join().expect("the holder"), "a killed copy's delayed request never goes on");
    conductor.revived(a);
    // the driver counts the running copies again
    conductor.set_live([a].into_iter().collect());
    assert_eq!(
        conductor.wait_quiet(Duration::from_millis(20)),
        Err(vec![Some(a)]),
        "the copy started again is working, and the run waits for it"
    );
}

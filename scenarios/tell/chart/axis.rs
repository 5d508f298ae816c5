//! A chart's axes: linear, log over whole decades, or log ticked at chosen values; where a
//! value falls on one; and numbers and coordinates written with fixed precision.

/// About how many ticks a linear axis gets.
const TICKS: f64 = 5.0;
/// A log axis ticked at its values leaves this share of their span free at either end.
const LOG_PAD: f64 = 0.08;

/// One axis: its label, its scale, the range it shows and its ticks with their labels.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    pub(super) label: String,
    pub(super) log: bool,
    pub(super) lo: f64,
    pub(super) hi: f64,
    pub(super) ticks: Vec<(f64, String)>,
}

/// A number as a tick or a hover text shows it: at most three decimals, none trailing.
pub fn number(value: f64) -> String {
    let text = format!("{:.3}", value + 0.0);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" || text.is_empty() {
        "0".to_owned()
    } else {
        text.to_owned()
    }
}

/// A coordinate, with one decimal whatever the arithmetic left behind.
pub(super) fn px(value: f64) -> String {
    let rounded = (value * 10.0).round() / 10.0 + 0.0;
    format!("{rounded:.1}")
}

/// A step of 1, 2 or 5 times a power of ten, at least `raw`.
fn round_step(raw: f64) -> f64 {
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|step| *step >= raw * (1.0 - 1e-9))
        .unwrap_or(raw)
}

/// The smallest and largest of the positive, finite values.
fn positive_range(values: &[f64]) -> Option<(f64, f64)> {
    let positive = values.iter().copied().filter(|v| v.is_finite() && *v > 0.0);
    positive.fold(None, |range, v| match range {
        None => Some((v, v)),
        Some((low, high)) => Some((f64::min(low, v), f64::max(high, v))),
    })
}

impl Axis {
    /// A linear axis from 0 to a round number at or above every value, ticked at round steps.
    pub fn linear(label: &str, values: &[f64], unit: &str) -> Axis {
        let top = values.iter().copied().filter(|v| v.is_finite()).fold(0.0, f64::max);
        let top = if top > 0.0 { top } else { 1.0 };
        let step = round_step(top / TICKS);
        let count = (top / step - 1e-9).ceil().max(1.0) as u32;
        let ticks = (0..=count).map(|i| step * f64::from(i)).map(|v| (v, format!("{}{unit}", number(v))));
        Axis {
            label: label.to_owned(),
            log: false,
            lo: 0.0,
            hi: step * f64::from(count),
            ticks: ticks.collect(),
        }
    }

    /// A log axis over whole decades around the positive values, ticked at each decade.
    pub fn log_decades(label: &str, values: &[f64], unit: &str) -> Axis {
        let (low, high) = positive_range(values).unwrap_or((1.0, 10.0));
        let mut from = low.log10().floor();
        // a value on the axis' very end would draw a bar of no length: leave half a decade
        if low.log10() - from < 0.25 {
            from -= 0.5;
        }
        let to = high.log10().ceil().max(from.floor() + 1.0);
        let ticks = (from.ceil() as i32..=to as i32)
            .map(|power| 10f64.powi(power))
            .map(|v| (v, format!("{}{unit}", number(v))));
        let (lo, hi) = (10f64.powf(from), 10f64.powf(to));
        Axis { label: label.to_owned(), log: true, lo, hi, ticks: ticks.collect() }
    }

    /// A log axis ticked at the positive values themselves (a few chosen settings).
    pub fn log_at(label: &str, values: &[f64], unit: &str) -> Axis {
        let mut at: Vec<f64> = values.iter().copied().filter(|v| v.is_finite() && *v > 0.0).collect();
        at.sort_by(f64::total_cmp);
        at.dedup();
        let (low, high) = positive_range(&at).map_or((0.0, 1.0), |(low, high)| (low.log10(), high.log10()));
        let pad = if high > low { (high - low) * LOG_PAD } else { 0.5 };
        let ticks = at.into_iter().map(|v| (v, format!("{}{unit}", number(v))));
        let (lo, hi) = (10f64.powf(low - pad), 10f64.powf(high + pad));
        Axis { label: label.to_owned(), log: true, lo, hi, ticks: ticks.collect() }
    }

    /// Where `value` falls between `from` (the axis' low end) and `to`, in pixels. A value
    /// beyond the axis, or not positive on a log axis, is held at the nearer end.
    pub fn position(&self, value: f64, from: f64, to: f64) -> f64 {
        let scaled = |v: f64| if self.log { v.log10() } else { v };
        let share = (scaled(value) - scaled(self.lo)) / (scaled(self.hi) - scaled(self.lo));
        let share = if share.is_nan() { 0.0 } else { share.clamp(0.0, 1.0) };
        from + (to - from) * share
    }

    /// The ticks, with their labels.
    pub fn ticks(&self) -> &[(f64, String)] {
        &self.ticks
    }
}

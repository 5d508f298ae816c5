//! Charts as self-contained SVG: plain numbers and labels in, one string out. A fixed size,
//! axes with ticks and labels, a legend, a `<title>` on every mark for hover text, the
//! generic sans-serif font, no script and nothing fetched. The same data gives the same
//! bytes: every coordinate is written with one decimal.

mod axis;

use axis::px;
pub use axis::{number, Axis};
use std::fmt::Write as _;

/// The series' colours, in order (told apart by a colour-blind reader too), and their marks.
const COLOURS: [&str; 4] = ["#d55e00", "#0072b2", "#009e73", "#cc79a7"];
const INK: &str = "#222222";
const GRID: &str = "#e3e3e3";
const MUTED: &str = "#b8b8b8";

/// Where the title, the legend and the plots go, in pixels from the top and sides.
const TITLE_Y: f64 = 24.0;
const LEGEND_Y: f64 = 50.0;
const PLOT_TOP: f64 = 92.0;
const PLOT_BOTTOM_MARGIN: f64 = 54.0;
const PANEL_LEFT_MARGIN: f64 = 68.0;
const PANEL_RIGHT_MARGIN: f64 = 20.0;
/// About how wide a character of the 12 px font is: enough to keep labels apart.
const CHAR_PX: f64 = 6.8;
/// How far apart the series' points at one x are drawn, so that equal values stay visible.
const DODGE_PX: f64 = 7.0;
/// A bar's row and the bar itself.
const ROW_PX: f64 = 20.0;
const BAR_PX: f64 = 12.0;
/// Room right of the bars for the column of notes, which ends this far from the edge.
const NOTE_MARGIN: f64 = 110.0;
const NOTE_END: f64 = 24.0;

/// Text made safe for an element or an attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}

/// A rectangle of the drawing, in pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Area {
    pub left: f64,
    pub top: f64,
    pub right: f64,
    pub bottom: f64,
}

/// What a legend entry shows beside its words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// The n-th series of points: its colour and its marker.
    Series(usize),
    /// A bar.
    Bar,
    /// A bar for a search that found nothing.
    Missed,
    /// The spread of a bar's value, as a whisker.
    Range,
    /// A reference line across the bars.
    Reference,
}

fn text(out: &mut String, x: f64, y: f64, anchor: &str, extra: &str, words: &str) {
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\"{extra}>{}</text>",
        px(x),
        px(y),
        escape(words)
    );
}

fn line(out: &mut String, from: (f64, f64), to: (f64, f64), stroke: &str, extra: &str) {
    let _ = writeln!(
        out,
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{stroke}\"{extra}/>",
        px(from.0),
        px(from.1),
        px(to.0),
        px(to.1)
    );
}

/// The opening of a chart: its size, its title (for the eye and for hover), a white ground.
fn open(title: &str, width: f64, height: f64) -> String {
    let (w, h) = (px(width), px(height));
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" \
         font-family=\"sans-serif\" font-size=\"12\" role=\"img\">\n<title>{}</title>\n\
         <rect width=\"{w}\" height=\"{h}\" fill=\"#ffffff\"/>\n",
        escape(title)
    );
    text(&mut out, width / 2.0, TITLE_Y, "middle", " font-size=\"15\" font-weight=\"bold\"", title);
    out
}

/// A series' marker at (x, y), with its hover text (none in the legend).
fn marker(index: usize, x: f64, y: f64, hover: &str) -> String {
    let colour = COLOURS[index % COLOURS.len()];
    let paint = format!("fill=\"{colour}\" stroke=\"#ffffff\" stroke-width=\"1\"");
    let (tag, shape) = match index % 3 {
        0 => ("circle", format!("cx=\"{}\" cy=\"{}\" r=\"4.5\"", px(x), px(y))),
        1 => ("rect", format!("x=\"{}\" y=\"{}\" width=\"8.0\" height=\"8.0\"", px(x - 4.0), px(y - 4.0))),
        _ => {
            let corners = [(x, y - 5.0), (x + 5.0, y + 4.0), (x - 5.0, y + 4.0)];
            let corners: Vec<String> =
                corners.iter().map(|(x, y)| format!("{},{}", px(*x), px(*y))).collect();
            ("polygon", format!("points=\"{}\"", corners.join(" ")))
        }
    };
    match hover {
        "" => format!("<{tag} {shape} {paint}/>\n"),
        _ => format!("<{tag} {shape} {paint}><title>{}</title></{tag}>\n", escape(hover)),
    }
}

/// A legend entry's swatch, 18 px wide, centred on `y`.
fn swatch(out: &mut String, mark: Mark, x: f64, y: f64) {
    match mark {
        Mark::Series(index) => {
            let colour = COLOURS[index % COLOURS.len()];
            line(out, (x, y), (x + 18.0, y), colour, " stroke-width=\"1.5\"");
            out.push_str(&marker(index, x + 9.0, y, ""));
        }
        Mark::Bar | Mark::Missed => {
            let (fill, extra) = bar_paint(mark == Mark::Missed);
            let _ = writeln!(
                out,
                "<rect x=\"{}\" y=\"{}\" width=\"18.0\" height=\"{}\" fill=\"{fill}\"{extra}/>",
                px(x),
                px(y - BAR_PX / 2.0),
                px(BAR_PX)
            );
        }
        Mark::Range => whisker(out, (x, y), (x + 18.0, y), true),
        Mark::Reference => reference_line(out, x + 9.0, y - 7.0, y + 7.0),
    }
}

/// The legend, centred in one row under the title.
fn legend(out: &mut String, width: f64, entries: &[(Mark, String)]) {
    let widths: Vec<f64> =
        entries.iter().map(|(_, words)| 24.0 + CHAR_PX * words.chars().count() as f64).collect();
    let gap = 22.0;
    let total = widths.iter().sum::<f64>() + gap * widths.len().saturating_sub(1) as f64;
    let mut x = (width - total) / 2.0;
    for ((mark, words), entry_width) in entries.iter().zip(widths) {
        swatch(out, *mark, x, LEGEND_Y - 4.0);
        text(out, x + 24.0, LEGEND_Y, "start", "", words);
        x += entry_width + gap;
    }
}

/// A whisker between two points, with caps across its ends.
fn whisker(out: &mut String, from: (f64, f64), to: (f64, f64), across: bool) {
    line(out, from, to, INK, " stroke-width=\"1.2\"");
    for (x, y) in [from, to] {
        let cap = if across { ((x, y - 4.0), (x, y + 4.0)) } else { ((x - 4.0, y), (x + 4.0, y)) };
        line(out, cap.0, cap.1, INK, " stroke-width=\"1.2\"");
    }
}

fn reference_line(out: &mut String, x: f64, top: f64, bottom: f64) {
    line(out, (x, top), (x, bottom), INK, " stroke-width=\"1.2\" stroke-dasharray=\"4 3\"");
}

fn bar_paint(missed: bool) -> (&'static str, &'static str) {
    match missed {
        true => (MUTED, " stroke=\"#555555\" stroke-dasharray=\"3 2\""),
        false => (COLOURS[1], ""),
    }
}

/// The horizontal axis of `area`: ticks, their labels, the axis' label, and a grid line up
/// from each tick when asked.
fn x_axis(out: &mut String, area: Area, axis: &Axis, grid: bool) {
    for (value, label) in axis.ticks() {
        let x = axis.position(*value, area.left, area.right);
        if grid {
            line(out, (x, area.top), (x, area.bottom), GRID, "");
        }
        line(out, (x, area.bottom), (x, area.bottom + 5.0), INK, "");
        text(out, x, area.bottom + 18.0, "middle", " font-size=\"11\"", label);
    }
    line(out, (area.left, area.bottom), (area.right, area.bottom), INK, "");
    text(out, (area.left + area.right) / 2.0, area.bottom + 40.0, "middle", "", &axis.label);
}

/// The vertical axis of `area`, as `x_axis` draws the horizontal one.
fn y_axis(out: &mut String, area: Area, axis: &Axis, grid: bool) {
    for (value, label) in axis.ticks() {
        let y = axis.position(*value, area.bottom, area.top);
        if grid {
            line(out, (area.left, y), (area.right, y), GRID, "");
        }
        line(out, (area.left - 5.0, y), (area.left, y), INK, "");
        text(out, area.left - 8.0, y + 4.0, "end", " font-size=\"11\"", label);
    }
    line(out, (area.left, area.top), (area.left, area.bottom), INK, "");
    let (x, y) = (area.left - 52.0, (area.top + area.bottom) / 2.0);
    let turn = format!(" transform=\"rotate(-90 {} {})\"", px(x), px(y));
    text(out, x, y, "middle", &turn, &axis.label);
}

/// One point of a series: where it is, how far its whisker reaches up, and its hover text.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub upper: Option<f64>,
    pub title: String,
}

/// A named series of points, joined by a line.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<Point>,
}

/// One panel of points: its title, its axes and its series (every panel of a chart has the
/// same series, in the same order, and one legend names them).
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
}

/// Where the plot of panel `index` of `count` side by side goes.
pub fn panel_area(width: f64, height: f64, count: usize, index: usize) -> Area {
    let share = width / count.max(1) as f64;
    let left = share * index as f64;
    Area {
        left: left + PANEL_LEFT_MARGIN,
        top: PLOT_TOP,
        right: left + share - PANEL_RIGHT_MARGIN,
        bottom: height - PLOT_BOTTOM_MARGIN,
    }
}

fn draw_series(out: &mut String, panel: &Panel, area: Area, index: usize) {
    let series = &panel.series[index];
    let shift = (index as f64 - (panel.series.len() as f64 - 1.0) / 2.0) * DODGE_PX;
    let colour = COLOURS[index % COLOURS.len()];
    let at = |x: f64, y: f64| {
        (panel.x.position(x, area.left, area.right) + shift, panel.y.position(y, area.bottom, area.top))
    };
    if series.points.len() > 1 {
        let path: Vec<String> = series
            .points
            .iter()
            .map(|point| at(point.x, point.y))
            .map(|(x, y)| format!("{},{}", px(x), px(y)))
            .collect();
        let _ = writeln!(
            out,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" \
             stroke-opacity=\"0.7\"/>",
            path.join(" ")
        );
    }
    for point in &series.points {
        let (x, y) = at(point.x, point.y);
        if let Some(upper) = point.upper.filter(|upper| *upper > point.y) {
            whisker(out, (x, y), (x, at(point.x, upper).1), false);
        }
        out.push_str(&marker(index, x, y, &point.title));
    }
}

/// Panels of points side by side under one title, `width` by `height` pixels; the legend
/// names the series, then what `more` says of the other marks.
pub fn point_panels(
    title: &str,
    width: f64,
    height: f64,
    panels: &[Panel],
    more: &[(Mark, String)],
) -> String {
    let mut out = open(title, width, height);
    let names = panels.first().map(|panel| panel.series.as_slice()).unwrap_or_default();
    let mut entries: Vec<(Mark, String)> =
        names.iter().enumerate().map(|(index, series)| (Mark::Series(index), series.name.clone())).collect();
    entries.extend(more.iter().cloned());
    legend(&mut out, width, &entries);
    for (index, panel) in panels.iter().enumerate() {
        let area = panel_area(width, height, panels.len(), index);
        let middle = (area.left + area.right) / 2.0;
        text(&mut out, middle, area.top - 12.0, "middle", " font-weight=\"bold\"", &panel.title);
        y_axis(&mut out, area, &panel.y, true);
        x_axis(&mut out, area, &panel.x, false);
        for series in 0..panel.series.len() {
            draw_series(&mut out, panel, area, series);
        }
    }
    out.push_str("</svg>\n");
    out
}

/// One bar: its label, its value, the spread of what it summarises, whether it stands for
/// a search that found nothing, its note in the right-hand column, and its hover text.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    pub label: String,
    pub value: f64,
    pub range: Option<(f64, f64)>,
    pub missed: bool,
    pub note: String,
    pub title: String,
}

/// Horizontal bars along one axis, with a legend, at most one reference line, and the bars'
/// notes in a column of their own on the right, under its heading.
#[derive(Clone, Debug, PartialEq)]
pub struct BarChart {
    pub title: String,
    pub axis: Axis,
    pub bars: Vec<Bar>,
    pub note_heading: String,
    pub legend: Vec<(Mark, String)>,
    /// A value marked across every bar, and its hover text.
    pub reference: Option<(f64, String)>,
}

/// Where the bars of `chart`, `width` pixels wide, go: room on the left for the longest label.
pub fn bar_area(chart: &BarChart, width: f64) -> Area {
    let longest = chart.bars.iter().map(|bar| bar.label.chars().count()).max().unwrap_or(0);
    Area {
        left: 16.0 + CHAR_PX * longest as f64,
        top: PLOT_TOP,
        right: width - NOTE_MARGIN,
        bottom: PLOT_TOP + ROW_PX * chart.bars.len().max(1) as f64,
    }
}

fn draw_bar(out: &mut String, axis: &Axis, (area, notes_x): (Area, f64), row: usize, bar: &Bar) {
    let middle = area.top + ROW_PX * (row as f64 + 0.5);
    let end = axis.position(bar.value, area.left, area.right);
    let (fill, extra) = bar_paint(bar.missed);
    let _ = writeln!(
        out,
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{fill}\"{extra}><title>{}</title></rect>",
        px(area.left),
        px(middle - BAR_PX / 2.0),
        px(end - area.left),
        px(BAR_PX),
        escape(&bar.title)
    );
    if let Some((low, high)) = bar.range.filter(|(low, high)| high > low) {
        let (from, to) =
            (axis.position(low, area.left, area.right), axis.position(high, area.left, area.right));
        whisker(out, (from, middle), (to, middle), true);
    }
    text(out, area.left - 8.0, middle + 4.0, "end", "", &bar.label);
    text(out, notes_x, middle + 4.0, "end", " font-size=\"11\"", &bar.note);
}

/// Horizontal bars, one row each, `width` pixels wide (the height follows from the rows).
pub fn bar_chart(chart: &BarChart, width: f64) -> String {
    let area = bar_area(chart, width);
    let height = area.bottom + PLOT_BOTTOM_MARGIN;
    let mut out = open(&chart.title, width, height);
    legend(&mut out, width, &chart.legend);
    x_axis(&mut out, area, &chart.axis, true);
    line(&mut out, (area.left, area.top), (area.left, area.bottom), INK, "");
    let notes_x = width - NOTE_END;
    text(&mut out, notes_x, area.top - 8.0, "end", " font-weight=\"bold\"", &chart.note_heading);
    for (row, bar) in chart.bars.iter().enumerate() {
        draw_bar(&mut out, &chart.axis, (area, notes_x), row, bar);
    }
    if let Some((value, hover)) = &chart.reference {
        let x = chart.axis.position(*value, area.left, area.right);
        let _ = writeln!(out, "<g><title>{}</title>", escape(hover));
        reference_line(&mut out, x, area.top - 4.0, area.bottom);
        out.push_str("</g>\n");
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tags of `svg` balance: every element opened is closed, in order.
    fn balanced(svg: &str) -> Result<usize, String> {
        let mut open: Vec<&str> = Vec::new();
        let mut elements = 0;
        for piece in svg.split('<').skip(1) {
            let (tag, _) = piece.split_once('>').ok_or(format!("unclosed tag {piece:?}"))?;
            if let Some(closing) = tag.strip_prefix('/') {
                let opened = open.pop().ok_or(format!("</{closing}> closes nothing"))?;
                if opened != closing {
                    return Err(format!("<{opened}> closed by </{closing}>"));
                }
            } else if !tag.ends_with('/') {
                open.push(tag.split_whitespace().next().unwrap_or_default());
            }
            elements += 1;
        }
        match open.is_empty() {
            true => Ok(elements),
            false => Err(format!("never closed: {open:?}")),
        }
    }

    fn panel(points: Vec<Point>) -> Panel {
        let xs: Vec<f64> = points.iter().map(|point| point.x).collect();
        let ys: Vec<f64> = points.iter().map(|point| point.y).collect();
        Panel {
            title: "a panel".to_owned(),
            x: Axis::log_at("x", &xs, " s"),
            y: Axis::linear("y", &ys, "%"),
            series: vec![Series { name: "one".to_owned(), points }],
        }
    }

    fn point(x: f64, y: f64) -> Point {
        Point { x, y, upper: None, title: format!("{x} & {y} <here>") }
    }

    #[test]
    fn a_value_lands_where_its_axis_puts_it() {
        let linear = Axis::linear("share", &[45.0], "%");
        assert_eq!((linear.lo, linear.hi), (0.0, 50.0));
        assert_eq!(linear.position(25.0, 100.0, 300.0), 200.0);
        assert_eq!(linear.position(50.0, 300.0, 100.0), 100.0, "an upward axis runs from the bottom");
        let decades = Axis::log_decades("seconds", &[2.0, 301.0], " s");
        assert_eq!((decades.lo, decades.hi), (1.0, 1000.0));
        assert!((decades.position(10.0, 0.0, 300.0) - 100.0).abs() < 1e-9);
        let labels: Vec<&str> = decades.ticks().iter().map(|(_, label)| label.as_str()).collect();
        assert_eq!(labels, ["1 s", "10 s", "100 s", "1000 s"]);
        // beyond the axis, or not positive on a log axis: held at the nearer end
        assert_eq!(decades.position(0.0, 0.0, 300.0), 0.0);
        assert_eq!(decades.position(1e9, 0.0, 300.0), 300.0);
        assert_eq!(linear.position(f64::NAN, 0.0, 300.0), 0.0);
    }

    #[test]
    fn a_point_at_a_known_value_is_drawn_at_its_coordinate() {
        let (width, height) = (400.0, 300.0);
        let svg = point_panels("t", width, height, &[panel(vec![point(1.0, 0.0), point(100.0, 50.0)])], &[]);
        let area = panel_area(width, height, 1, 0);
        // a log axis ticked at its values leaves 8% of their span (two decades) at each end
        let x = area.left + (area.right - area.left) * (2.0 + 0.16) / (2.0 + 0.32);
        let expected = format!("<circle cx=\"{}\" cy=\"{}\"", px(x), px(area.top));
        assert!(svg.contains(&expected), "{expected} in\n{svg}");
        let origin = format!("<circle cx=\"{}\" cy=\"{}\"", px(area.right + area.left - x), px(area.bottom));
        assert!(svg.contains(&origin), "{origin} in\n{svg}");
    }

    #[test]
    fn empty_and_single_points_draw_without_dividing_by_zero() {
        for points in [vec![], vec![point(5.0, 0.0)], vec![point(5.0, 3.0)]] {
            let svg = point_panels("t", 400.0, 300.0, &[panel(points)], &[(Mark::Range, "r".to_owned())]);
            assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
            balanced(&svg).unwrap();
        }
        for values in [&[][..], &[0.0], &[-3.0], &[7.0], &[f64::NAN]] {
            for axis in [
                Axis::linear("", values, ""),
                Axis::log_decades("", values, ""),
                Axis::log_at("", values, ""),
            ] {
                assert!(axis.lo < axis.hi, "{axis:?}");
                assert!(axis.position(values.first().copied().unwrap_or(1.0), 0.0, 10.0).is_finite());
            }
        }
        let chart = BarChart {
            title: "none".to_owned(),
            axis: Axis::log_decades("seeds", &[], ""),
            bars: vec![],
            note_heading: String::new(),
            legend: vec![],
            reference: None,
        };
        balanced(&bar_chart(&chart, 500.0)).unwrap();
    }

    #[test]
    fn a_chart_is_well_formed_self_contained_and_the_same_every_time() {
        let bars = vec![
            Bar {
                label: "quick".to_owned(),
                value: 1.0,
                range: Some((1.0, 4.0)),
                missed: false,
                note: "1".to_owned(),
                title: "quick: 1".to_owned(),
            },
            Bar {
                label: "never".to_owned(),
                value: 2000.0,
                range: None,
                missed: true,
                note: "not caught".to_owned(),
                title: "\"never\" <caught>".to_owned(),
            },
        ];
        let chart = BarChart {
            title: "bars".to_owned(),
            axis: Axis::log_decades("seeds", &[1.0, 4.0, 2000.0], ""),
            bars,
            note_heading: "seeds".to_owned(),
            legend: vec![(Mark::Bar, "median".to_owned()), (Mark::Missed, "missed".to_owned())],
            reference: Some((50.0, "target".to_owned())),
        };
        let svg = bar_chart(&chart, 500.0);
        assert_eq!(svg, bar_chart(&chart.clone(), 500.0));
        assert!(balanced(&svg).unwrap() > 20);
        assert!(svg.contains("font-family=\"sans-serif\""));
        assert!(svg.contains("<title>&quot;never&quot; &lt;caught&gt;</title>"));
        for outside in ["<script", "href", "@import", "url("] {
            assert!(!svg.contains(outside), "{outside}");
        }
        let points = point_panels("t", 400.0, 300.0, &[panel(vec![point(1.0, 2.0), point(3.0, 4.0)])], &[]);
        assert!(points.contains("<title>1 &amp; 2 &lt;here&gt;</title>"));
        assert!(balanced("<a><b></a></b>").is_err() && balanced("<a>").is_err());
    }

    #[test]
    fn numbers_are_written_with_fixed_precision() {
        assert_eq!(number(0.1 * 3.0), "0.3");
        assert_eq!(number(300.0), "300");
        assert_eq!(number(-0.0), "0");
        assert_eq!(px(-0.01), "0.0");
        assert_eq!(px(2.0 / 3.0), "0.7");
    }
}

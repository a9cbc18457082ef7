//! The loss curve of `gradlift fit --plot`, drawn with plotters.
//!
//! Text is laid out with DejaVu Sans, shipped in `assets/` with its
//! license, so that drawing needs no system font library.

use plotters::prelude::*;
use std::path::Path;

/// An image format, from the file's extension.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Format {
    Svg,
    Png,
}

impl Format {
    /// The format of `path`, checked before any work: a known extension
    /// in a directory that exists.
    pub(crate) fn of(path: &Path) -> Result<Format, String> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.is_dir() {
                return Err(format!(
                    "error: --plot `{}`: the directory `{}` does not exist",
                    path.display(),
                    dir.display()
                ));
            }
        }
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("svg") => Ok(Format::Svg),
            Some(e) if e.eq_ignore_ascii_case("png") => Ok(Format::Png),
            _ => Err(format!(
                "error: --plot `{}`: the file name must end in .svg or .png",
                path.display()
            )),
        }
    }
}

const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Draws `history` (the loss at the start and after each iteration) to
/// `path` under `caption`: on a log scale when every loss is positive.
pub(crate) fn loss_curve(
    path: &Path,
    format: Format,
    history: &[f64],
    caption: &str,
) -> Result<(), String> {
    // Registering twice is harmless: the second replaces the first.
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
        .map_err(|_| "error: the shipped font does not load".to_string())?;
    let size = (800, 500);
    let result = match format {
        Format::Svg => draw(
            SVGBackend::new(path, size).into_drawing_area(),
            history,
            caption,
        ),
        Format::Png => draw(
            BitMapBackend::new(path, size).into_drawing_area(),
            history,
            caption,
        ),
    };
    result.map_err(|e| format!("error: --plot `{}`: {e}", path.display()))
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    history: &[f64],
    caption: &str,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let finite: Vec<(u64, f64)> = history
        .iter()
        .enumerate()
        .filter(|(_, y)| y.is_finite())
        .map(|(i, &y)| (i as u64, y))
        .collect();
    let log = finite.iter().all(|&(_, y)| y > 0.0);
    let points: Vec<(u64, f64)> = finite
        .iter()
        .map(|&(i, y)| (i, if log { y.log10() } else { y }))
        .collect();
    let (lo, hi) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &(_, y)| {
            (lo.min(y), hi.max(y))
        });
    let (lo, hi) = if lo.is_finite() && hi > lo {
        (lo, hi)
    } else if lo.is_finite() {
        (lo - 1.0, lo + 1.0)
    } else {
        (0.0, 1.0)
    };
    let pad = (hi - lo) * 0.05;
    let last = (history.len().max(2) - 1) as u64;
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0..last, (lo - pad)..(hi + pad))?;
    let y_desc = if log { "loss (log scale)" } else { "loss" };
    chart
        .configure_mesh()
        .x_desc("iteration")
        .y_desc(y_desc)
        .label_style(("sans-serif", 14))
        .y_label_formatter(&|y| {
            if log {
                format!("1e{y:.0}")
            } else {
                format!("{y:.3e}")
            }
        })
        .draw()?;
    chart.draw_series(LineSeries::new(
        points.iter().copied(),
        BLUE.stroke_width(2),
    ))?;
    root.present()?;
    Ok(())
}

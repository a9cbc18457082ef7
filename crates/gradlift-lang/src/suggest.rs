//! "Did you mean …?": the closest of a set of names to a misspelt one.
//!
//! Distance is the optimal string alignment distance (insertions,
//! deletions, substitutions and swaps of two neighbours, each costing one),
//! over characters. A name is suggested when it is within a third of the
//! longer name's length (at least one edit, at most three), so `mpa` finds
//! `map` and `wieghts` finds `weights`, but `x` does not find `y`. Ties go
//! to the candidate listed first.

/// The candidate closest to `name`, if one is close enough.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        if c == name {
            continue;
        }
        let longer = name.chars().count().max(c.chars().count());
        let allowed = (longer / 3).clamp(1, 3);
        let d = distance(name, c);
        if d <= allowed && d < longer && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// `; did you mean `x`?` for the closest candidate, or nothing.
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    match closest(name, candidates) {
        Some(c) => format!("; did you mean `{c}`?"),
        None => String::new(),
    }
}

/// The optimal string alignment distance between `a` and `b`.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        d[i * w] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(w) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1)
                .min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
        }
    }
    d[a.len() * w + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_swaps_and_typos_not_strangers() {
        assert_eq!(distance("mpa", "map"), 1);
        assert_eq!(closest("mpa", ["map2", "map", "reduce"]), Some("map"));
        assert_eq!(closest("wieghts", ["weights", "bias"]), Some("weights"));
        assert_eq!(closest("sine", ["sin", "sign", "sqrt"]), Some("sin"));
        assert_eq!(closest("x", ["y", "z"]), None);
        assert_eq!(closest("foo", ["bar"]), None);
        assert_eq!(closest("map", ["map"]), None);
        assert_eq!(
            did_you_mean("redcue", ["reduce"]),
            "; did you mean `reduce`?"
        );
    }
}

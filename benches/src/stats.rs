//! Order statistics of repeated timings: median, quartiles (the spread the reports show) and
//! extremes.

/// A summary of repeated measurements of one quantity (seconds per operation, or GB/s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    pub median: f64,
    /// 25th and 75th percentiles (linear interpolation between order statistics).
    pub p25: f64,
    pub p75: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// The summary of `samples` (`None` when there are none or one is not finite).
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|s| !s.is_finite()) {
            return None;
        }
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        Some(Summary {
            n: v.len(),
            median: percentile(&v, 0.5),
            p25: percentile(&v, 0.25),
            p75: percentile(&v, 0.75),
            min: v[0],
            max: v[v.len() - 1],
        })
    }

    /// Seconds per operation turned into a rate of `units / second` (e.g. bytes/s): the median
    /// maps to the median; the quartiles and extremes swap ends (a slower time is a lower rate).
    pub fn rate(&self, units: f64) -> Summary {
        let r = |s: f64| if s > 0.0 { units / s } else { f64::INFINITY };
        Summary {
            n: self.n,
            median: r(self.median),
            p25: r(self.p75),
            p75: r(self.p25),
            min: r(self.max),
            max: r(self.min),
        }
    }

    /// Half the interquartile range relative to the median, in percent.
    pub fn iqr_pct(&self) -> f64 {
        if self.median > 0.0 { 50.0 * (self.p75 - self.p25) / self.median } else { 0.0 }
    }
}

/// The `q`-quantile of sorted `v` (non-empty), interpolating linearly.
fn percentile(v: &[f64], q: f64) -> f64 {
    let pos = q * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    v[lo] + (v[hi] - v[lo]) * frac
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quartiles() {
        let s = Summary::of(&[4.0, 1.0, 3.0, 2.0, 5.0]).unwrap();
        assert_eq!((s.n, s.median, s.p25, s.p75, s.min, s.max), (5, 3.0, 2.0, 4.0, 1.0, 5.0));
        let r = s.rate(10.0);
        assert_eq!((r.median, r.p25, r.p75, r.min, r.max), (10.0 / 3.0, 2.5, 5.0, 2.0, 10.0));
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
        assert_eq!(Summary::of(&[2.0]).unwrap().median, 2.0);
    }
}

//! Speedup models: how many times faster than on one CPU a parallel phase runs on `p` CPUs.
//!
//! `p` is real, not whole: under the `os` baseline a program's threads get a fraction of the
//! machine. Below one CPU every model is linear (`p` of a CPU does `p` of the work).

use serde::{Deserialize, Serialize};

/// A speedup model, as written in workload files (`{ model = "amdahl", serial = 0.05 }`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "lowercase", deny_unknown_fields)]
pub enum SpeedupModel {
    /// Amdahl's law: a fraction `serial` of the work does not parallelise;
    /// `S(p) = 1 / (serial + (1 − serial) / p)`. `serial = 0` is linear speedup, `1` a serial phase.
    Amdahl {
        /// Serial fraction, 0 to 1.
        serial: f64,
    },
    /// Downey's model (1997): average parallelism `a` and variance of parallelism `sigma`; the
    /// speedup grows to `a` and stays there.
    Downey {
        /// Average parallelism (≥ 1).
        a: f64,
        /// Variance of parallelism (≥ 0).
        sigma: f64,
    },
    /// A measured table: `values[k]` is the speedup on `k + 1` CPUs; linear interpolation between
    /// entries and flat after the last.
    Table {
        /// Speedups on 1, 2, 3, ... CPUs.
        values: Vec<f64>,
    },
}

impl SpeedupModel {
    /// Linear speedup (Amdahl with no serial part).
    pub const LINEAR: SpeedupModel = SpeedupModel::Amdahl { serial: 0.0 };

    /// A serial phase: one CPU's speed whatever it holds.
    pub const SERIAL: SpeedupModel = SpeedupModel::Amdahl { serial: 1.0 };

    /// The speedup on `p` CPUs.
    pub fn speedup(&self, p: f64) -> f64 {
        if p <= 0.0 {
            return 0.0;
        }
        match self {
            SpeedupModel::Amdahl { serial } => {
                if p < 1.0 {
                    p
                } else {
                    1.0 / (serial + (1.0 - serial) / p)
                }
            }
            SpeedupModel::Downey { a, sigma } => downey(*a, *sigma, p),
            SpeedupModel::Table { values } => table(values, p),
        }
    }

    /// Why the model's parameters are unusable, if they are.
    #[inline]
    pub fn check(&self) -> Result<(), String> {
        match self {
            SpeedupModel::Amdahl { serial } if !(0.0..=1.0).contains(serial) => {
                Err(format!("amdahl serial fraction {serial} is not between 0 and 1"))
            }
            SpeedupModel::Downey { a, sigma }
                if !(a.is_finite() && *a >= 1.0 && sigma.is_finite() && *sigma >= 0.0) =>
            {
                Err(format!("downey needs a >= 1 and sigma >= 0, got a = {a}, sigma = {sigma}"))
            }
            SpeedupModel::Table { values } if values.is_empty() => {
                Err("a speedup table needs at least one value".into())
            }
            SpeedupModel::Table { values } => match values.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
                Some(v) => Err(format!("speedup {v} in the table is not a positive number")),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }
}

/// Downey's speedup model for average parallelism `a` and variance `sigma`.
fn downey(a: f64, sigma: f64, n: f64) -> f64 {
    if n < 1.0 {
        return n;
    }
    if sigma <= 1.0 {
        if n <= a {
            a * n / (a + sigma / 2.0 * (n - 1.0))
        } else if n <= 2.0 * a - 1.0 {
            a * n / (sigma * (a - 0.5) + n * (1.0 - sigma / 2.0))
        } else {
            a
        }
    } else if n <= a + a * sigma - sigma {
        n * a * (sigma + 1.0) / (sigma * (n + a - 1.0) + a)
    } else {
        a
    }
}

fn table(values: &[f64], p: f64) -> f64 {
    if p < 1.0 {
        return p * values[0];
    }
    let k = p.floor() as usize;
    if k >= values.len() {
        return values[values.len() - 1];
    }
    let lo = values[k - 1];
    let hi = values[k];
    lo + (hi - lo) * (p - k as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn amdahl_limits() {
        let m = SpeedupModel::Amdahl { serial: 0.1 };
        assert!(close(m.speedup(1.0), 1.0));
        assert!(close(m.speedup(10.0), 1.0 / (0.1 + 0.09)));
        assert!(m.speedup(1e9) < 10.0);
        assert!(close(SpeedupModel::LINEAR.speedup(7.0), 7.0));
        assert!(close(SpeedupModel::SERIAL.speedup(64.0), 1.0));
        assert!(close(m.speedup(0.5), 0.5), "fractions of a CPU are linear");
    }

    #[test]
    fn downey_is_continuous_and_caps_at_a() {
        for sigma in [0.0, 0.5, 1.0, 2.0] {
            let m = SpeedupModel::Downey { a: 16.0, sigma };
            assert!(close(m.speedup(1.0), 1.0), "sigma {sigma}");
            let mut last = 0.0;
            for k in 1..200 {
                let s = m.speedup(k as f64 * 0.25);
                assert!(s + 1e-9 >= last, "monotone at sigma {sigma}");
                assert!(s <= 16.0 + 1e-9);
                last = s;
            }
            assert!(close(m.speedup(1000.0), 16.0));
        }
        // sigma = 0: linear up to A.
        assert!(close(SpeedupModel::Downey { a: 8.0, sigma: 0.0 }.speedup(8.0), 8.0));
    }

    #[test]
    fn table_interpolates_and_stays_flat() {
        let m = SpeedupModel::Table { values: vec![1.0, 1.8, 2.4] };
        assert!(close(m.speedup(2.0), 1.8));
        assert!(close(m.speedup(2.5), 2.1));
        assert!(close(m.speedup(9.0), 2.4));
        assert!(m.check().is_ok());
        assert!(SpeedupModel::Table { values: vec![] }.check().is_err());
        assert!(SpeedupModel::Amdahl { serial: 1.5 }.check().is_err());
    }
}

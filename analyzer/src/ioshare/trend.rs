//! Each process's share as a sequence over the whole run, fitted once: bounded least
//! squares with an L1 penalty on the share's jumps and on its bends (linear trend
//! filtering with a fused term),
//!
//! ```text
//! min ½ Σₜ wₜ (yₜ − Σᵢ βᵢₜ xᵢₜ)² + Σᵢ x̄ᵢ (λ₁ Σₜ |βᵢ,ₜ₊₁ − βᵢₜ| + λ₂ Σₜ |βᵢ,ₜ₊₁ − 2βᵢₜ + βᵢ,ₜ₋₁|),  0 ≤ β ≤ 1
//! ```
//!
//! with `y` and `x` in units of the noise σ, `x̄ᵢ` the process's mean bytes per busy
//! interval (a change of its share moves the server's load by that much per interval, so
//! the penalties compare like with like across processes), and `wₜ` 0 on unsure
//! intervals, Huber weights elsewhere. The problem is convex: the jumps and bends kept are
//! those the data pay for over the whole run, each local (a bend is a kink between two
//! slopes), where the greedy change-point search ([`super::breaks`]) adds them one at a
//! time, each reaching to the end of its block.
//!
//! Solved by ADMM (Boyd et al., *Distributed optimization and statistical learning via
//! the alternating direction method of multipliers*, 2011, §6.4.1 for the generalized
//! lasso) with splitting `z₁ = D₁β`, `z₂ = D₂β`, `z₃ = β`: the β-step is the linear
//! system `(AᵀWA + ρ(D₁ᵀD₁ + D₂ᵀD₂ + I)) β = …`; ordered by interval it is block
//! pentadiagonal — per interval the processes' rank-one `w x xᵀ` plus `ρ` times the band
//! of `D₁ᵀD₁ + D₂ᵀD₂ + I` on the diagonal, scalar multiples of the identity beside it —
//! so its block Cholesky factor costs O(n p³) once per weighting and each solve O(n p²).
//! The `z`-steps are soft thresholds and a clip.

use super::series::Series;
use nalgebra::DMatrix;

/// Over-relaxation of the ADMM steps (Boyd et al. §3.4.3: 1.5–1.8 usually speeds
/// convergence); on the benchmark's synthetic 10 minutes of 16 drifting shares it cut the
/// iterations of the last round from 1 007 to 661 (with 2 368 to 1 440 in steps).
const RELAX: f64 = 1.6;

/// Penalties and solver limits.
#[derive(Clone, Copy, Debug)]
pub struct TrendOptions {
    /// λ₁: cost of a jump of the share by 1, in units of the process's mean bytes per
    /// interval over σ.
    pub jump: f64,
    /// λ₂: cost of a bend (change of the share's slope per interval) by 1, same units.
    pub bend: f64,
    /// Noise σ of the server's counter per interval, bytes (the robust spread of a
    /// least-squares fit's residuals); `y` and `x` are divided by it.
    pub sigma: f64,
    /// ADMM iterations at most.
    pub iterations: usize,
    /// Refits with Huber weights from the previous fit's residuals.
    pub huber_rounds: usize,
}

impl Default for TrendOptions {
    fn default() -> Self {
        TrendOptions {
            jump: 1.0,
            bend: 3.0,
            sigma: 1.0,
            iterations: 3000,
            huber_rounds: 2,
        }
    }
}

/// The fitted shares, `beta[column][interval]`, each in [0, 1].
#[derive(Clone, Debug)]
pub struct Trend {
    /// Share per column per interval.
    pub beta: Vec<Vec<f64>>,
    /// ADMM iterations run in the last fit.
    pub iterations: usize,
}

/// Fits the trend of every column's share (see the module). `None` when there is nothing
/// to fit (no column, fewer than three intervals, or no noise scale).
pub fn fit(s: &Series, o: &TrendOptions) -> Option<Trend> {
    let p = s.columns.len();
    let n = s.y.len();
    if p == 0 || n < 3 || o.sigma.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return None;
    }
    let x: Vec<Vec<f64>> = s
        .columns
        .iter()
        .map(|c| c.x.iter().map(|v| v / o.sigma).collect())
        .collect();
    let y: Vec<f64> = s.y.iter().map(|v| v / o.sigma).collect();
    // x̄ᵢ / σ per process (1 for a process with no busy interval: its share is free and
    // costs nothing to hold).
    let scale: Vec<f64> = x
        .iter()
        .map(|xi| {
            let busy: Vec<f64> = xi.iter().copied().filter(|&v| v > 0.0).collect();
            if busy.is_empty() {
                1.0
            } else {
                busy.iter().sum::<f64>() / busy.len() as f64
            }
        })
        .collect();
    let usable: Vec<f64> = (0..n).map(|t| f64::from(u8::from(s.usable(t)))).collect();
    let mut w = usable.clone();
    let mut state: Option<Admm> = None;
    for round in 0..=o.huber_rounds {
        let mut a = match state.take() {
            Some(prev) => prev.reweighted(&w),
            None => Admm::new(&x, &y, &w, &scale, o),
        };
        a.run(o.iterations);
        if round < o.huber_rounds {
            let r: Vec<f64> = (0..n)
                .map(|t| {
                    if usable[t] == 0.0 {
                        return 0.0;
                    }
                    y[t] - (0..p).map(|i| a.z3[i * n + t] * x[i][t]).sum::<f64>()
                })
                .collect();
            let (hw, _) = super::segments::huber_weights(&r);
            w = (0..n).map(|t| usable[t] * hw[t] * hw[t]).collect();
        }
        state = Some(a);
    }
    let a = state?;
    Some(Trend {
        beta: (0..p).map(|i| a.z3[i * n..(i + 1) * n].to_vec()).collect(),
        iterations: a.iterations,
    })
}

/// Bend penalties λ₂ tried by [`choose_bend`]: the default's 3 (round `trend`, shares
/// that drift) and below it, down to a tenth of it.
pub const BENDS: [f64; 3] = [0.3, 1.0, 3.0];

/// How much the shares bend, read from the run: the bend penalty among `bends` whose
/// fit, made without every fifth usable busy interval, predicts the server's load in
/// those intervals best (mean absolute error). A step of a share costs one jump and two
/// bends, so a bend penalty fit for drifting shares draws each step as a ramp of a
/// second or more and leaves the levels on both sides off while the other shares
/// compensate; shares that move in steps choose a smaller one, drifting shares keep it.
/// Returns the choice and each candidate's held-out error (bytes per interval); `None`
/// when nothing could be held out or fitted.
pub fn choose_bend(s: &Series, o: &TrendOptions, bends: &[f64]) -> Option<BendChoice> {
    let held: Vec<usize> = (0..s.y.len())
        .filter(|&t| s.usable(t) && s.y[t] > 0.0 && t % 5 == 2)
        .collect();
    if held.is_empty() {
        return None;
    }
    let mut fold = s.clone();
    for &t in &held {
        fold.unsure[t] = true;
    }
    let mut errors = Vec::with_capacity(bends.len());
    for &bend in bends {
        let tr = fit(&fold, &TrendOptions { bend, ..*o })?;
        let e: f64 = held
            .iter()
            .map(|&t| {
                let ex: f64 = (0..s.columns.len())
                    .map(|c| tr.beta[c][t] * s.columns[c].x[t])
                    .sum();
                (s.y[t] - ex).abs()
            })
            .sum::<f64>()
            / held.len() as f64;
        errors.push(e);
    }
    let best = (0..bends.len()).min_by(|&a, &b| errors[a].total_cmp(&errors[b]))?;
    Some(BendChoice {
        bend: bends[best],
        candidates: bends.to_vec(),
        held_out_errors: errors,
    })
}

/// The bend penalty chosen by [`choose_bend`].
#[derive(Clone, Debug, serde::Serialize)]
pub struct BendChoice {
    /// λ₂ chosen.
    pub bend: f64,
    /// λ₂ tried.
    pub candidates: Vec<f64>,
    /// Mean absolute error of each candidate's fit in the held-out intervals, bytes.
    pub held_out_errors: Vec<f64>,
}

/// The ADMM state of one fit. Vectors are process-major: entry `i·n + t` (`z₁`, `z₂`
/// per process `n − 1` and `n − 2` long).
struct Admm<'a> {
    x: &'a [Vec<f64>],
    y: &'a [f64],
    w: Vec<f64>,
    n: usize,
    rho: f64,
    lambda1: Vec<f64>,
    lambda2: Vec<f64>,
    band: Band,
    factor: Option<BlockCholesky>,
    beta: Vec<f64>,
    z1: Vec<f64>,
    z2: Vec<f64>,
    z3: Vec<f64>,
    u1: Vec<f64>,
    u2: Vec<f64>,
    u3: Vec<f64>,
    iterations: usize,
}

impl<'a> Admm<'a> {
    fn new(x: &'a [Vec<f64>], y: &'a [f64], w: &[f64], scale: &[f64], o: &TrendOptions) -> Self {
        let p = x.len();
        let n = y.len();
        // ρ of the data term's scale, so that neither side of the splitting lags the
        // other (with ρ = 1 and x̄/σ ≈ 40, 1 000 iterations left the objective 75 % above
        // its minimum on a recorded run).
        let rho = scale.iter().map(|s| s * s).sum::<f64>() / p as f64;
        let band = Band::new(n);
        let mut a = Admm {
            x,
            y,
            w: w.to_vec(),
            n,
            rho,
            lambda1: scale.iter().map(|s| o.jump * s).collect(),
            lambda2: scale.iter().map(|s| o.bend * s).collect(),
            factor: None,
            band,
            beta: vec![0.5; p * n],
            z1: vec![0.0; p * (n - 1)],
            z2: vec![0.0; p * (n - 2)],
            z3: vec![0.5; p * n],
            u1: vec![0.0; p * (n - 1)],
            u2: vec![0.0; p * (n - 2)],
            u3: vec![0.0; p * n],
            iterations: 0,
        };
        a.factor();
        a
    }

    /// The same problem with new interval weights, started from this solution.
    fn reweighted(mut self, w: &[f64]) -> Self {
        self.w = w.to_vec();
        self.factor();
        self
    }

    /// The β-step's matrix, factored.
    fn factor(&mut self) {
        self.factor = BlockCholesky::new(self.x, &self.w, self.rho, &self.band);
    }

    fn run(&mut self, max_iterations: usize) {
        let p = self.x.len();
        let n = self.n;
        let len = (p * n) as f64;
        // Aᵀ W y.
        let aty: Vec<f64> = (0..p * n)
            .map(|k| {
                let (i, t) = (k / n, k % n);
                self.x[i][t] * self.w[t] * self.y[t]
            })
            .collect();
        let mut rhs = vec![0.0; p * n];
        let mut d1 = vec![0.0; p * (n - 1)];
        let mut d2 = vec![0.0; p * (n - 2)];
        for it in 0..max_iterations {
            // β-step.
            for i in 0..p {
                let r = &mut rhs[i * n..(i + 1) * n];
                r.fill(0.0);
                let (z1, u1) = (&self.z1[i * (n - 1)..], &self.u1[i * (n - 1)..]);
                for k in 0..n - 1 {
                    let v = z1[k] - u1[k];
                    r[k] -= v;
                    r[k + 1] += v;
                }
                let (z2, u2) = (&self.z2[i * (n - 2)..], &self.u2[i * (n - 2)..]);
                for k in 0..n - 2 {
                    let v = z2[k] - u2[k];
                    r[k] += v;
                    r[k + 1] -= 2.0 * v;
                    r[k + 2] += v;
                }
                for (t, rt) in r.iter_mut().enumerate() {
                    let k = i * n + t;
                    *rt = aty[k] + self.rho * (*rt + self.z3[k] - self.u3[k]);
                }
            }
            self.solve(&rhs);
            // z-steps and dual updates.
            let mut primal = 0.0;
            let mut dual = 0.0;
            for i in 0..p {
                let b = &self.beta[i * n..(i + 1) * n];
                for k in 0..n - 1 {
                    d1[i * (n - 1) + k] = b[k + 1] - b[k];
                }
                for k in 0..n - 2 {
                    d2[i * (n - 2) + k] = b[k + 2] - 2.0 * b[k + 1] + b[k];
                }
            }
            let step =
                |d: &[f64], z: &mut [f64], u: &mut [f64], lam: &[f64], m: usize, rho: f64| {
                    let (mut pr, mut du) = (0.0, 0.0);
                    for (k, ((dk, zk), uk)) in
                        d.iter().zip(z.iter_mut()).zip(u.iter_mut()).enumerate()
                    {
                        let kappa = lam[k / m] / rho;
                        let relaxed = RELAX * dk + (1.0 - RELAX) * *zk;
                        let v = relaxed + *uk;
                        let new = v.signum() * (v.abs() - kappa).max(0.0);
                        du += (new - *zk) * (new - *zk);
                        *zk = new;
                        *uk += relaxed - new;
                        pr += (dk - new) * (dk - new);
                    }
                    (pr, du)
                };
            let rho = self.rho;
            let (a1, b1) = step(&d1, &mut self.z1, &mut self.u1, &self.lambda1, n - 1, rho);
            let (a2, b2) = step(&d2, &mut self.z2, &mut self.u2, &self.lambda2, n - 2, rho);
            primal += a1 + a2;
            dual += b1 + b2;
            for k in 0..p * n {
                let relaxed = RELAX * self.beta[k] + (1.0 - RELAX) * self.z3[k];
                let v = relaxed + self.u3[k];
                let new = v.clamp(0.0, 1.0);
                dual += (new - self.z3[k]) * (new - self.z3[k]);
                self.z3[k] = new;
                self.u3[k] += relaxed - new;
                primal += (self.beta[k] - new) * (self.beta[k] - new);
            }
            self.iterations = it + 1;
            // Shares are wanted to 10⁻⁴; stop when the splitting agrees and has stopped
            // moving to well below that, per entry.
            if (primal / len).sqrt() < 1e-5 && (dual / len).sqrt() < 1e-5 {
                break;
            }
        }
    }

    /// β ← M⁻¹ rhs (left as it is if the factor failed: M is positive definite, so
    /// only non-finite input can make it fail).
    fn solve(&mut self, rhs: &[f64]) {
        if let Some(f) = &self.factor {
            f.solve(rhs, &mut self.beta);
        }
    }
}

/// `H = D₁ᵀD₁ + D₂ᵀD₂ + I` over `n` intervals, by its bands: `d0[t] = H(t, t)`,
/// `d1[t] = H(t, t+1)`, `d2[t] = H(t, t+2)`.
struct Band {
    d0: Vec<f64>,
    d1: Vec<f64>,
    d2: Vec<f64>,
}

impl Band {
    fn new(n: usize) -> Band {
        let mut b = Band {
            d0: vec![1.0; n],
            d1: vec![0.0; n.saturating_sub(1)],
            d2: vec![0.0; n.saturating_sub(2)],
        };
        // Each row of D₁ (−1, 1 at k, k+1) and of D₂ (1, −2, 1 at k‥k+2) adds its outer
        // product.
        for k in 0..n.saturating_sub(1) {
            b.d0[k] += 1.0;
            b.d0[k + 1] += 1.0;
            b.d1[k] -= 1.0;
        }
        for k in 0..n.saturating_sub(2) {
            let c = [1.0, -2.0, 1.0];
            for (a, ca) in c.iter().enumerate() {
                b.d0[k + a] += ca * ca;
            }
            b.d1[k] += c[0] * c[1];
            b.d1[k + 1] += c[1] * c[2];
            b.d2[k] += c[0] * c[2];
        }
        b
    }

    /// `H v` (to check the factor against).
    #[cfg(test)]
    fn apply(&self, v: &[f64], out: &mut [f64]) {
        let n = v.len();
        for t in 0..n {
            let mut s = self.d0[t] * v[t];
            if t + 1 < n {
                s += self.d1[t] * v[t + 1];
            }
            if t >= 1 {
                s += self.d1[t - 1] * v[t - 1];
            }
            if t + 2 < n {
                s += self.d2[t] * v[t + 2];
            }
            if t >= 2 {
                s += self.d2[t - 2] * v[t - 2];
            }
            out[t] = s;
        }
    }
}

/// The block Cholesky factor `L` of `M = AᵀWA + ρH` ordered by interval: per interval
/// `t` a p × p lower-triangular `L(t,t)` and the dense blocks `L(t,t−1)`, `L(t,t−2)`.
struct BlockCholesky {
    p: usize,
    diag: Vec<DMatrix<f64>>,
    sub1: Vec<DMatrix<f64>>,
    sub2: Vec<DMatrix<f64>>,
}

impl BlockCholesky {
    fn new(x: &[Vec<f64>], w: &[f64], rho: f64, band: &Band) -> Option<BlockCholesky> {
        let p = x.len();
        let n = w.len();
        let eye = DMatrix::<f64>::identity(p, p);
        let zero = DMatrix::<f64>::zeros(p, p);
        let mut f = BlockCholesky {
            p,
            diag: Vec::with_capacity(n),
            sub1: Vec::with_capacity(n),
            sub2: Vec::with_capacity(n),
        };
        for t in 0..n {
            // L(t,t−2) = M(t,t−2) L(t−2,t−2)⁻ᵀ, with M(t,t−2) = ρ H(t,t−2) I.
            let l2 = if t >= 2 {
                let inv = f.diag[t - 2].solve_lower_triangular(&(&eye * (rho * band.d2[t - 2])))?;
                inv.transpose()
            } else {
                zero.clone()
            };
            // L(t,t−1) = (M(t,t−1) − L(t,t−2) L(t−1,t−2)ᵀ) L(t−1,t−1)⁻ᵀ.
            let l1 = if t >= 1 {
                let mut c = &eye * (rho * band.d1[t - 1]);
                if t >= 2 {
                    c -= &l2 * f.sub1[t - 1].transpose();
                }
                f.diag[t - 1]
                    .solve_lower_triangular(&c.transpose())?
                    .transpose()
            } else {
                zero.clone()
            };
            let mut m = DMatrix::from_fn(p, p, |i, j| w[t] * x[i][t] * x[j][t]);
            for i in 0..p {
                m[(i, i)] += rho * band.d0[t];
            }
            m -= &l1 * l1.transpose() + &l2 * l2.transpose();
            f.diag.push(m.cholesky()?.l());
            f.sub1.push(l1);
            f.sub2.push(l2);
        }
        Some(f)
    }

    /// `out ← M⁻¹ rhs`, both process-major (`i·n + t`). Forward then backward block
    /// substitution on the matrices' column-major storage (entry (i, j) at `j·p + i`),
    /// in plain loops: thousands of solves per fit, each a few hundred p × p products.
    fn solve(&self, rhs: &[f64], out: &mut [f64]) {
        let p = self.p;
        let n = self.diag.len();
        let mut v = vec![0.0; n * p];
        let mut b = vec![0.0; p];
        for t in 0..n {
            for (i, bi) in b.iter_mut().enumerate() {
                *bi = rhs[i * n + t];
            }
            let (done, _) = v.split_at(t * p);
            for (k, m) in [(1, &self.sub1), (2, &self.sub2)] {
                if t >= k {
                    let (l, prev) = (m[t].as_slice(), &done[(t - k) * p..(t - k + 1) * p]);
                    for (j, &pj) in prev.iter().enumerate() {
                        for (i, bi) in b.iter_mut().enumerate() {
                            *bi -= l[j * p + i] * pj;
                        }
                    }
                }
            }
            let l = self.diag[t].as_slice();
            for i in 0..p {
                let s: f64 = (0..i).map(|j| l[j * p + i] * b[j]).sum();
                b[i] = (b[i] - s) / l[i * p + i];
            }
            v[t * p..(t + 1) * p].copy_from_slice(&b);
        }
        for t in (0..n).rev() {
            b.copy_from_slice(&v[t * p..(t + 1) * p]);
            for (k, m) in [(1, &self.sub1), (2, &self.sub2)] {
                if t + k < n {
                    let (l, next) = (m[t + k].as_slice(), &v[(t + k) * p..(t + k + 1) * p]);
                    for (j, bj) in b.iter_mut().enumerate() {
                        *bj -= (0..p).map(|i| l[j * p + i] * next[i]).sum::<f64>();
                    }
                }
            }
            let l = self.diag[t].as_slice();
            for i in (0..p).rev() {
                let s: f64 = (i + 1..p).map(|j| l[i * p + j] * b[j]).sum();
                b[i] = (b[i] - s) / l[i * p + i];
            }
            v[t * p..(t + 1) * p].copy_from_slice(&b);
        }
        for t in 0..n {
            for i in 0..p {
                out[i * n + t] = v[t * p + i];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_noise_scale_there_is_nothing_to_fit() {
        let s = Series {
            t_end: (1..=5).collect(),
            t_start: (0..5).collect(),
            y: vec![1.0; 5],
            columns: vec![super::super::series::Column {
                pid: 1,
                exe: String::new(),
                comm: String::new(),
                x: vec![2.0; 5],
            }],
            server: Vec::new(),
            small_bytes: 0.0,
            backlog: None,
            backlog_max: 0.0,
            backlog_added: false,
            intake: None,
            intake_closes: Vec::new(),
            intake_used: false,
            unsure: vec![false; 5],
        };
        let fitted = |sigma| {
            fit(
                &s,
                &TrendOptions {
                    sigma,
                    ..Default::default()
                },
            )
        };
        assert!(fitted(0.0).is_none());
        let b = fitted(0.1).unwrap().beta;
        assert!(b[0].iter().all(|v| (v - 0.5).abs() < 1e-3), "{b:?}");
    }

    /// Three clients over 600 intervals whose shares move in steps (`drift` false) or
    /// drift between the same levels; the server's load is their bytes times the shares
    /// plus noise. Returns the series and the true shares.
    fn clients(drift: bool) -> (Series, Vec<Vec<f64>>) {
        let (p, n) = (3, 600);
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let levels = [0.2, 0.9, 0.5, 0.1, 0.7];
        let share = |i: usize, t: usize| {
            let period = 90 + 23 * i;
            let k = t / period + i;
            let (a, b) = (levels[k % 5], levels[(k + 1) % 5]);
            if drift {
                a + (b - a) * (t % period) as f64 / period as f64
            } else {
                a
            }
        };
        let beta: Vec<Vec<f64>> = (0..p)
            .map(|i| (0..n).map(|t| share(i, t)).collect())
            .collect();
        let x: Vec<Vec<f64>> = (0..p)
            .map(|_| (0..n).map(|_| 20_000.0 + 60_000.0 * next()).collect())
            .collect();
        let y: Vec<f64> = (0..n)
            .map(|t| (0..p).map(|i| beta[i][t] * x[i][t]).sum::<f64>() + 4_000.0 * (next() - 0.5))
            .collect();
        let s = Series {
            t_end: (1..=n as u64).collect(),
            t_start: (0..n as u64).collect(),
            y,
            columns: x
                .into_iter()
                .enumerate()
                .map(|(i, x)| super::super::series::Column {
                    pid: i as u32 + 1,
                    exe: String::new(),
                    comm: String::new(),
                    x,
                })
                .collect(),
            server: Vec::new(),
            small_bytes: 0.0,
            backlog: None,
            backlog_max: 0.0,
            backlog_added: false,
            intake: None,
            intake_closes: Vec::new(),
            intake_used: false,
            unsure: vec![false; n],
        };
        (s, beta)
    }

    fn error(fit: &Trend, truth: &[Vec<f64>]) -> f64 {
        let (p, n) = (truth.len(), truth[0].len());
        (0..p)
            .flat_map(|i| (0..n).map(move |t| (i, t)))
            .map(|(i, t)| (fit.beta[i][t] - truth[i][t]).abs())
            .sum::<f64>()
            / (p * n) as f64
    }

    #[test]
    fn shares_in_steps_choose_a_smaller_bend_penalty_and_follow_the_steps_closer() {
        let (s, truth) = clients(false);
        let o = TrendOptions {
            sigma: 1_155.0,
            ..Default::default()
        };
        let c = choose_bend(&s, &o, &BENDS).unwrap();
        assert!(c.bend < o.bend, "{c:?}");
        let chosen = error(
            &fit(&s, &TrendOptions { bend: c.bend, ..o }).unwrap(),
            &truth,
        );
        let default = error(&fit(&s, &o).unwrap(), &truth);
        assert!(chosen < 0.8 * default, "{chosen} {default}");
    }

    #[test]
    fn drifting_shares_are_not_made_worse_by_the_choice() {
        let (s, truth) = clients(true);
        let o = TrendOptions {
            sigma: 1_155.0,
            ..Default::default()
        };
        let c = choose_bend(&s, &o, &BENDS).unwrap();
        let chosen = error(
            &fit(&s, &TrendOptions { bend: c.bend, ..o }).unwrap(),
            &truth,
        );
        let default = error(&fit(&s, &o).unwrap(), &truth);
        assert!(chosen < 1.1 * default, "{c:?} {chosen} {default}");
    }

    #[test]
    fn the_block_factor_solves_the_beta_step() {
        // M v computed directly from its definition, then solved back.
        let (p, n) = (3, 11);
        let x: Vec<Vec<f64>> = (0..p)
            .map(|i| (0..n).map(|t| ((i * 7 + t * 3) % 5) as f64 + 0.5).collect())
            .collect();
        let w: Vec<f64> = (0..n).map(|t| if t == 4 { 0.0 } else { 1.0 }).collect();
        let rho = 0.7;
        let band = Band::new(n);
        let want: Vec<f64> = (0..p * n).map(|k| (k as f64 * 0.37).sin()).collect();
        let mut mv = vec![0.0; p * n];
        for i in 0..p {
            let mut h = vec![0.0; n];
            band.apply(&want[i * n..(i + 1) * n], &mut h);
            for t in 0..n {
                let s: f64 = (0..p).map(|j| x[j][t] * want[j * n + t]).sum();
                mv[i * n + t] = rho * h[t] + w[t] * x[i][t] * s;
            }
        }
        let f = BlockCholesky::new(&x, &w, rho, &band).unwrap();
        let mut got = vec![0.0; p * n];
        f.solve(&mv, &mut got);
        for k in 0..p * n {
            assert!(
                (got[k] - want[k]).abs() < 1e-10,
                "{k}: {} {}",
                got[k],
                want[k]
            );
        }
    }
}

//! Shrinking a failing chunking to the fewest cuts that still fail.

/// Removes cuts from `cuts` while `fails` keeps returning true, within `budget` calls of it.
///
/// First every single cut is tried alone (most chunk-boundary bugs need exactly one cut), then
/// delta debugging removes ever smaller groups, then single cuts are dropped one by one. The
/// result always fails, and is never longer than the input.
pub fn minimize<T: Clone>(
    cuts: Vec<T>,
    budget: usize,
    mut fails: impl FnMut(&[T]) -> bool,
) -> Vec<T> {
    let mut calls = 0usize;
    let mut check = |c: &[T]| {
        calls += 1;
        fails(c)
    };
    if cuts.len() <= 1 {
        return cuts;
    }
    if check(&[]) {
        return Vec::new();
    }
    // 1. One cut alone, sampled evenly when there are many.
    let singles = cuts.len().min(budget / 2).max(1);
    for i in 0..singles {
        let idx = if singles == cuts.len() {
            i
        } else {
            i * (cuts.len() - 1) / (singles - 1).max(1)
        };
        if check(std::slice::from_ref(&cuts[idx])) {
            return vec![cuts[idx].clone()];
        }
    }
    // 2. Delta debugging on complements.
    let mut cur = cuts;
    let mut n = 2usize;
    let mut spent = singles + 1;
    while cur.len() >= 2 && spent < budget {
        let size = cur.len().div_ceil(n);
        let mut reduced = false;
        for start in (0..cur.len()).step_by(size) {
            if spent >= budget {
                break;
            }
            let complement: Vec<T> = cur[..start]
                .iter()
                .chain(cur[(start + size).min(cur.len())..].iter())
                .cloned()
                .collect();
            spent += 1;
            if !complement.is_empty() && check(&complement) {
                cur = complement;
                n = (n - 1).max(2);
                reduced = true;
                break;
            }
        }
        if !reduced {
            if n >= cur.len() {
                break;
            }
            n = (2 * n).min(cur.len());
        }
    }
    // 3. Drop single cuts one by one.
    let mut i = 0;
    while i < cur.len() && cur.len() > 1 && spent < budget {
        let mut without = cur.clone();
        without.remove(i);
        spent += 1;
        if check(&without) {
            cur = without;
        } else {
            i += 1;
        }
    }
    cur
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_single_culprit() {
        let cuts: Vec<usize> = (1..1000).collect();
        assert_eq!(minimize(cuts, 2000, |c| c.contains(&417)), vec![417]);
    }

    #[test]
    fn finds_a_pair_that_must_fail_together() {
        let cuts: Vec<usize> = (1..200).collect();
        let m = minimize(cuts, 5000, |c| c.contains(&17) && c.contains(&150));
        assert_eq!(m, vec![17, 150]);
    }

    #[test]
    fn keeps_the_input_when_nothing_smaller_fails() {
        assert_eq!(minimize(vec![3], 10, |c| c.len() == 1), vec![3]);
    }
}

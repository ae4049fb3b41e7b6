//! A set of `u64` values stored as disjoint half-open ranges.

use std::collections::BTreeMap;
use std::ops::Range;

/// A few ranges, inline.
pub type Ranges = smallvec::SmallVec<[Range<u64>; 2]>;

/// Disjoint, non-adjacent half-open ranges, keyed by start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    map: BTreeMap<u64, u64>,
}

impl RangeSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of disjoint ranges.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Adds `r`, merging with neighbours.
    pub fn insert(&mut self, r: Range<u64>) {
        if r.start >= r.end {
            return;
        }
        // At or after the start of the last range (values mostly arrive in order): one
        // lookup instead of a search on each side.
        if let Some(mut last) = self.map.last_entry()
            && r.start >= *last.key()
        {
            if r.start <= *last.get() {
                let e = last.get_mut();
                *e = (*e).max(r.end);
            } else {
                self.map.insert(r.start, r.end);
            }
            return;
        }
        let mut start = r.start;
        let mut end = r.end;
        // A range starting before `start` that reaches it.
        if let Some((&s, &e)) = self.map.range(..=start).next_back()
            && e >= start
        {
            start = s;
            end = end.max(e);
            self.map.remove(&s);
        }
        // Ranges starting inside [start, end].
        while let Some((&s, &e)) = self.map.range(start..=end).next() {
            end = end.max(e);
            self.map.remove(&s);
        }
        self.map.insert(start, end);
    }

    /// Removes `r` from the set.
    pub fn remove(&mut self, r: Range<u64>) {
        if r.start >= r.end {
            return;
        }
        // Nothing to remove when `r` ends before the first range or starts after the last.
        match (self.map.first_key_value(), self.map.last_key_value()) {
            (Some((&first, _)), Some((_, &last_end))) if r.end > first && r.start < last_end => {}
            _ => return,
        }
        if let Some((&s, &e)) = self.map.range(..r.start).next_back()
            && e > r.start
        {
            self.map.insert(s, r.start);
            if e > r.end {
                self.map.insert(r.end, e);
            }
        }
        while let Some((&s, &e)) = self.map.range(r.start..r.end).next() {
            self.map.remove(&s);
            if e > r.end {
                self.map.insert(r.end, e);
            }
        }
    }

    /// Whether every value of `r` is in the set (true for an empty `r`).
    pub fn contains_range(&self, r: Range<u64>) -> bool {
        if r.start >= r.end {
            return true;
        }
        match self.map.range(..=r.start).next_back() {
            Some((_, &e)) => e >= r.end,
            None => false,
        }
    }

    /// Whether `v` is in the set.
    pub fn contains(&self, v: u64) -> bool {
        self.contains_range(v..v.saturating_add(1))
    }

    /// The parts of `r` that are not in the set, in order.
    pub fn missing_in(&self, r: Range<u64>) -> Ranges {
        let mut out = Ranges::new();
        let mut cur = r.start;
        if let Some((_, &e)) = self.map.range(..=cur).next_back() {
            cur = cur.max(e);
        }
        if cur >= r.end {
            return out;
        }
        for (&s, &e) in self.map.range(cur..r.end) {
            if s > cur {
                out.push(cur..s);
            }
            cur = cur.max(e);
        }
        if cur < r.end {
            out.push(cur..r.end);
        }
        out
    }

    /// The smallest range.
    pub fn first(&self) -> Option<Range<u64>> {
        self.map.iter().next().map(|(&s, &e)| s..e)
    }

    /// The largest range.
    pub fn last(&self) -> Option<Range<u64>> {
        self.map.iter().next_back().map(|(&s, &e)| s..e)
    }

    /// Removes the smallest range.
    pub fn pop_first(&mut self) -> Option<Range<u64>> {
        self.map.pop_first().map(|(s, e)| s..e)
    }

    /// Ranges from the largest down.
    pub fn iter_rev(&self) -> impl Iterator<Item = Range<u64>> + '_ {
        self.map.iter().rev().map(|(&s, &e)| s..e)
    }

    /// Ranges in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = Range<u64>> + '_ {
        self.map.iter().map(|(&s, &e)| s..e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        #[test]
        fn matches_a_plain_set(ops in vec((any::<bool>(), 0u64..200, 0u64..20), 0..60)) {
            let mut rs = RangeSet::new();
            let mut model = BTreeSet::new();
            for (add, s, l) in ops {
                if add { rs.insert(s..s + l); model.extend(s..s + l); }
                else { rs.remove(s..s + l); for v in s..s + l { model.remove(&v); } }
            }
            for v in 0..230 { prop_assert_eq!(rs.contains(v), model.contains(&v)); }
            // Canonical form: disjoint and non-adjacent.
            let rs_vec: Vec<_> = rs.iter().collect();
            for w in rs_vec.windows(2) { prop_assert!(w[0].end < w[1].start); }
            let missing: u64 = rs.missing_in(0..230).iter().map(|r| r.end - r.start).sum();
            prop_assert_eq!(missing, 230 - model.len() as u64);
        }
    }
}

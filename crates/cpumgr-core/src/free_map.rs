//! The placer's map of free CPU positions: one bit per position, and one bit per word of those
//! telling whether the word has a free position at all.
//!
//! The placer takes the lowest free positions of a domain first, so a busy machine fills from the
//! bottom and its free positions gather near the top: a search that walked the words one by one
//! from the start of a domain walked past every full word below them, for every program it grew
//! (on 100 000 CPUs, up to 1 563 words). The second level finds the next word with a free
//! position a 64-word stretch at a time.

use crate::cpuset::word_masks;

/// Free positions, with a summary of the words that hold any.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct FreeMap {
    /// Per position, whether it is free.
    words: Vec<u64>,
    /// Per word of `words`, whether it is not zero.
    nonempty: Vec<u64>,
}

impl FreeMap {
    /// Resets the map to `n` positions, all free if `full`, else none.
    pub(crate) fn reset(&mut self, n: usize, full: bool) {
        let len = n.div_ceil(64);
        self.words.clear();
        self.words.resize(len, 0);
        self.nonempty.clear();
        self.nonempty.resize(len.div_ceil(64), 0);
        if full {
            for (k, mask) in word_masks(0, n as u32) {
                self.words[k] = mask;
            }
            for (k, mask) in word_masks(0, len as u32) {
                self.nonempty[k] = mask;
            }
        }
    }

    /// Number of words (positions / 64, rounded up).
    pub(crate) fn len(&self) -> usize {
        self.words.len()
    }

    /// The free positions of word `k`.
    pub(crate) fn word(&self, k: usize) -> u64 {
        self.words[k]
    }

    /// Whether position `p` is free.
    pub(crate) fn is_free(&self, p: u32) -> bool {
        self.words[(p / 64) as usize] & (1 << (p % 64)) != 0
    }

    /// Marks the positions of `mask` (not empty) in word `k` free or taken.
    pub(crate) fn set(&mut self, k: usize, mask: u64, free: bool) {
        debug_assert_ne!(mask, 0, "no positions to mark in word {k}");
        let w = &mut self.words[k];
        let s = &mut self.nonempty[k / 64];
        if free {
            // The word holds the positions freed now: its summary bit is set, with no test.
            *w |= mask;
            *s |= 1 << (k % 64);
        } else {
            *w &= !mask;
            // Without a branch: whether the word is empty now is as likely either way.
            *s &= !(u64::from(*w == 0) << (k % 64));
        }
    }

    /// The first word from `k` on (and before `end`) with a free position.
    pub(crate) fn next_nonempty(&self, k: usize, end: usize) -> Option<usize> {
        let mut s = k / 64;
        let mut bits = *self.nonempty.get(s)? & (u64::MAX << (k % 64));
        while bits == 0 {
            s += 1;
            if s * 64 >= end {
                return None;
            }
            bits = *self.nonempty.get(s)?;
        }
        let w = s * 64 + bits.trailing_zeros() as usize;
        (w < end).then_some(w)
    }

    /// The lowest free position in `first..end`.
    pub(crate) fn first_free(&self, first: u32, end: u32) -> Option<u32> {
        let mut k = (first / 64) as usize;
        let last = end.div_ceil(64) as usize;
        loop {
            k = self.next_nonempty(k, last)?;
            let mut word = self.words[k];
            if k == (first / 64) as usize {
                word &= u64::MAX << (first % 64);
            }
            if word != 0 {
                let p = k as u32 * 64 + word.trailing_zeros();
                return (p < end).then_some(p);
            }
            k += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FreeMap;

    /// The lowest free position of `first..end`, one position at a time.
    fn naive_first(m: &FreeMap, first: u32, end: u32) -> Option<u32> {
        (first..end).find(|&p| m.is_free(p))
    }

    #[test]
    fn finds_free_positions_past_full_words() {
        let n = 64 * 70 + 5;
        let mut m = FreeMap::default();
        m.reset(n, true);
        assert_eq!(m.len(), 71);
        // Take everything but a few scattered positions, a word at a time.
        for k in 0..m.len() {
            m.set(k, u64::MAX, false);
        }
        assert_eq!(m.first_free(0, n as u32), None, "nothing free");
        for p in [3u32, 64 * 66 + 1, 64 * 70 + 4] {
            m.set((p / 64) as usize, 1 << (p % 64), true);
        }
        for (first, end) in
            [(0, n as u32), (4, n as u32), (64 * 66 + 2, n as u32), (0, 3), (64 * 66, 64 * 66 + 1), (100, 64 * 70)]
        {
            assert_eq!(m.first_free(first, end), naive_first(&m, first, end), "{first}..{end}");
        }
        assert_eq!(m.next_nonempty(1, m.len()), Some(66));
        assert_eq!(m.next_nonempty(1, 66), None, "the end bounds the search");
        m.set(66, 1 << 1, false);
        assert_eq!(m.next_nonempty(1, m.len()), Some(70), "a word emptied leaves the summary");
    }

    #[test]
    fn a_full_reset_frees_exactly_the_positions() {
        let mut m = FreeMap::default();
        m.reset(130, true);
        assert!(m.is_free(129) && m.first_free(129, 130) == Some(129));
        assert_eq!(m.word(2), 0b11, "positions past the machine are not free");
        m.reset(130, false);
        assert_eq!(m.first_free(0, 130), None);
    }
}

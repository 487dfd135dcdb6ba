//! Records that stay where they are while the list that orders them changes.
//!
//! The engine keeps its programs in id order (the order the policy sees them in) and removes
//! finished ones at every tick. Its per-job records are large (the job's description, counters,
//! the fast-forward's history): moving them with the list cost a `memmove` of every record above
//! the first finished one at every tick, and boxing them cost an allocation per job and a pointer
//! chase on every walk. [`Slots`] keeps the records in a slab, reuses the slot of a removed one
//! for the next, and orders them through a dense list of slot numbers, which is all that moves.

use std::ops::{Index, IndexMut};

/// Records of type `T` in stable slots, indexed by position in an ordered list.
#[derive(Debug)]
pub(crate) struct Slots<T> {
    /// The records, by slot; those in `free` are left over from removed entries.
    records: Vec<T>,
    /// Per position in the list, the slot of its record.
    order: Vec<u32>,
    /// Per slot, the position of its record in the list (the inverse of `order`; stale for
    /// free slots).
    position: Vec<u32>,
    /// Slots whose records were removed, to be written again.
    free: Vec<u32>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots { records: Vec::new(), order: Vec::new(), position: Vec::new(), free: Vec::new() }
    }
}

impl<T> Slots<T> {
    /// Entries in the list.
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    /// Appends `record` at the end of the list, in a free slot if there is one (dropping what the
    /// slot held).
    pub(crate) fn push(&mut self, record: T) {
        let slot = match self.free.pop() {
            Some(s) => {
                self.records[s as usize] = record;
                s
            }
            None => {
                self.records.push(record);
                self.position.push(0);
                u32::try_from(self.records.len() - 1).expect("fewer than 2^32 records at once")
            }
        };
        self.position[slot as usize] = self.order.len() as u32;
        self.order.push(slot);
    }

    /// The slot of the record at position `i`: where [`Slots::in_slot`] finds it while it is
    /// listed, whatever moves before it.
    pub(crate) fn slot(&self, i: usize) -> u32 {
        self.order[i]
    }

    /// The position in the list of the record in slot `slot`, which must be listed: what finds
    /// a record's place from its slot without a search.
    pub(crate) fn position(&self, slot: u32) -> usize {
        self.position[slot as usize] as usize
    }

    /// The record in slot `slot` (a listed one, or one left over from a removed entry).
    pub(crate) fn in_slot(&self, slot: u32) -> &T {
        &self.records[slot as usize]
    }

    /// Removes the entries at the positions `gone` (strictly increasing) from the list, keeping
    /// the others' order; their slots are reused by later [`Slots::push`]es.
    pub(crate) fn remove_sorted(&mut self, gone: &[usize]) {
        self.free.extend(gone.iter().map(|&i| self.order[i]));
        remove_sorted(&mut self.order, gone);
        // The entries from the first removed one on moved down.
        let first = gone.first().copied().unwrap_or(self.order.len());
        for (k, &slot) in self.order.iter().enumerate().skip(first) {
            self.position[slot as usize] = k as u32;
        }
    }
}

impl<T> Index<usize> for Slots<T> {
    type Output = T;

    /// The record at position `i` of the list.
    fn index(&self, i: usize) -> &T {
        &self.records[self.order[i] as usize]
    }
}

impl<T> IndexMut<usize> for Slots<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.records[self.order[i] as usize]
    }
}

/// Removes the elements at the indices `gone` (strictly increasing, all below `v.len()`) from
/// `v`, keeping the others' order. The survivors between two removed elements move as one block
/// (one `memmove` each): `retain` copies them one by one, and the program list's records are
/// large, so compacting it at every tick with a few finished jobs cost three times as much.
pub(crate) fn remove_sorted<T>(v: &mut Vec<T>, gone: &[usize]) {
    let len = v.len();
    assert!(gone.windows(2).all(|w| w[0] < w[1]) && gone.last().is_none_or(|&g| g < len), "indices not increasing or out of range");
    let Some(&first) = gone.first() else { return };
    let base = v.as_mut_ptr();
    // SAFETY: every index in `gone` is in bounds and appears once (checked above), so each removed
    // element is dropped exactly once, and each survivor above `first` is moved exactly once, to a
    // lower index, by `ptr::copy` (overlap-safe). The length is zero meanwhile, so a panicking
    // destructor leaks the rest instead of dropping a moved or dropped element again.
    unsafe {
        v.set_len(0);
        for &g in gone {
            std::ptr::drop_in_place(base.add(g));
        }
        let mut write = first;
        for (k, &g) in gone.iter().enumerate() {
            let next = gone.get(k + 1).copied().unwrap_or(len);
            let n = next - g - 1;
            std::ptr::copy(base.add(g + 1), base.add(write), n);
            write += n;
        }
        v.set_len(write);
    }
}

#[cfg(test)]
mod tests {
    use super::{remove_sorted, Slots};

    #[test]
    fn removing_sorted_indices_keeps_the_rest_in_order_and_drops_each_once() {
        use std::rc::Rc;
        for gone in [vec![], vec![0], vec![9], vec![0, 1, 2], vec![1, 4, 5, 8], vec![0, 9], (0..10).collect()] {
            let items: Vec<Rc<u32>> = (0..10).map(Rc::new).collect();
            let mut v = items.clone();
            remove_sorted(&mut v, &gone);
            let want: Vec<u32> = (0..10).filter(|x| !gone.contains(&(*x as usize))).collect();
            assert_eq!(v.iter().map(|r| **r).collect::<Vec<_>>(), want, "{gone:?}");
            for (i, r) in items.iter().enumerate() {
                let held = if gone.contains(&i) { 1 } else { 2 };
                assert_eq!(Rc::strong_count(r), held, "element {i} after removing {gone:?}");
            }
        }
    }

    #[test]
    #[should_panic(expected = "not increasing")]
    fn removing_unsorted_indices_is_refused() {
        remove_sorted(&mut vec![1, 2, 3], &[1, 0]);
    }

    #[test]
    fn positions_follow_the_list_and_slots_are_reused() {
        let mut s = Slots::default();
        for x in 0..6u32 {
            s.push(x);
        }
        s.remove_sorted(&[1, 4]);
        assert_eq!((0..s.len()).map(|i| s[i]).collect::<Vec<_>>(), vec![0, 2, 3, 5]);
        s.push(10);
        s.push(11);
        s.push(12);
        assert_eq!(*s.in_slot(s.slot(4)), 10, "a slot finds its record");
        assert!((0..s.len()).all(|i| s.position(s.slot(i)) == i), "and its position");
        assert_eq!((0..s.len()).map(|i| s[i]).collect::<Vec<_>>(), vec![0, 2, 3, 5, 10, 11, 12]);
        assert_eq!(s.records.len(), 7, "two of the three pushes reused the removed slots");
        s[0] = 7;
        assert_eq!(s[0], 7);
    }
}

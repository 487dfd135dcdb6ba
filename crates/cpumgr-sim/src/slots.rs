//! Records that stay where they are while the list that orders them changes.
//!
//! The engine keeps its programs in id order (the order the policy sees them in) and removes
//! finished ones at every tick. Its per-job records are large (the job's description, the
//! program the policy sees, counters, the fast-forward's history): moving them with the list cost
//! a `memmove` of every record above the first finished one at every tick, and boxing them cost
//! an allocation per job and a pointer chase on every walk. [`Slots`] keeps the records in a
//! slab, reuses the slot of a removed one for the next, and orders them through a dense list of
//! slot numbers, which is all that moves. Everything else the engine keeps per job is indexed by
//! slot too, so that a job is found from its slot (the heap of phase ends holds slots) without
//! knowing its place in the list.

use std::ops::{Index, IndexMut};

/// Records of type `T` in stable slots, listed in an order of their own.
#[derive(Debug)]
pub(crate) struct Slots<T> {
    /// The records, by slot; those in `free` are left over from removed entries.
    records: Vec<T>,
    /// The slots of the listed records, in list order.
    order: Vec<u32>,
    /// Slots whose records were removed, to be written again.
    free: Vec<u32>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots { records: Vec::new(), order: Vec::new(), free: Vec::new() }
    }
}

impl<T> Slots<T> {
    /// Entries in the list.
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    /// The listed slots, in list order.
    pub(crate) fn order(&self) -> &[u32] {
        &self.order
    }

    /// Appends `record` at the end of the list, in a free slot if there is one (dropping what the
    /// slot held), and returns its slot: the number of slots before, when there was none free.
    pub(crate) fn push(&mut self, record: T) -> u32 {
        let slot = match self.free.pop() {
            Some(s) => {
                self.records[s as usize] = record;
                s
            }
            None => {
                self.records.push(record);
                u32::try_from(self.records.len() - 1).expect("fewer than 2^32 records at once")
            }
        };
        self.order.push(slot);
        slot
    }

    /// Removes the listed slots for which `keep` says no, keeping the others' order; their
    /// slots are reused by later [`Slots::push`]es.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(u32) -> bool) {
        let free = &mut self.free;
        self.order.retain(|&s| {
            let kept = keep(s);
            if !kept {
                free.push(s);
            }
            kept
        });
    }
}

impl<T> Index<u32> for Slots<T> {
    type Output = T;

    /// The record in slot `slot` (a listed one, or one left over from a removed entry).
    fn index(&self, slot: u32) -> &T {
        &self.records[slot as usize]
    }
}

impl<T> IndexMut<u32> for Slots<T> {
    fn index_mut(&mut self, slot: u32) -> &mut T {
        &mut self.records[slot as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::Slots;

    #[test]
    fn the_list_keeps_its_order_and_slots_are_reused() {
        let mut s = Slots::default();
        let slots: Vec<u32> = (0..6u32).map(|x| s.push(x * 10)).collect();
        assert_eq!(slots, vec![0, 1, 2, 3, 4, 5]);
        let listed = |s: &Slots<u32>| s.order().iter().map(|&k| s[k]).collect::<Vec<_>>();
        s.retain(|slot| slot != 1 && slot != 4);
        assert_eq!(listed(&s), vec![0, 20, 30, 50]);
        let a = s.push(100);
        let b = s.push(110);
        let c = s.push(120);
        assert!([1, 4].contains(&a) && [1, 4].contains(&b) && a != b, "the removed slots are written again");
        assert_eq!(c, 6, "then the slab grows");
        assert_eq!(s[a], 100, "a slot finds its record");
        assert_eq!(listed(&s), vec![0, 20, 30, 50, 100, 110, 120]);
        assert_eq!(s.len(), 7);
        s[0] = 7;
        assert_eq!(listed(&s)[0], 7);
    }
}

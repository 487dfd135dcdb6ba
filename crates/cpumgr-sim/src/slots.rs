//! Records that stay where they are while the list that orders them changes.
//!
//! The engine keeps its programs in id order (the order the policy sees them in) and removes
//! finished ones at every step. Its per-job records are large (the job's description, counters,
//! the fast-forward's history): moving them with the list cost a `memmove` of every record above
//! the first finished one at every step, and boxing them cost an allocation per job and a pointer
//! chase on every walk. [`Slots`] keeps the records in a slab, reuses the slot of a removed one
//! for the next, and orders them through a dense list of slot numbers, which is all that moves.
//! Beside each slot number the list holds a small value of the caller's (the engine's: what the
//! step's walks over every job read), so that one removal moves both.
//! A slot does not know its position: the engine finds a job's position by its id (the list is
//! in id order), which costs a search per phase end instead of renumbering, at every step, the
//! entries a removal moved.

use std::ops::{Index, IndexMut};

use crate::list::{List, Removal};

/// Records of type `T` in stable slots, indexed by position in an ordered list, with a value of
/// type `B` beside each position.
#[derive(Debug)]
pub(crate) struct Slots<T, B> {
    /// The records, by slot; those in `free` are left over from removed entries.
    records: Vec<T>,
    /// Per position in the list, the slot of its record and the value beside it.
    order: List<(u32, B)>,
    /// Slots whose records were removed, to be written again.
    free: Vec<u32>,
}

impl<T, B> Default for Slots<T, B> {
    fn default() -> Self {
        Slots { records: Vec::new(), order: List::default(), free: Vec::new() }
    }
}

impl<T, B> Slots<T, B> {
    /// Entries in the list.
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    /// Stores the record `make` builds in a free slot if there is one (dropping what the slot
    /// held), without listing it (an arrived job waiting for admission), and returns its slot.
    /// The record is built inside the arm that stores it: built by the caller before the choice
    /// of slot, a large record (the engine's is over 300 bytes) would be staged in one more copy
    /// on the stack.
    pub(crate) fn insert(&mut self, make: impl FnOnce() -> T) -> u32 {
        match self.free.pop() {
            Some(s) => {
                self.records[s as usize] = make();
                s
            }
            None => {
                self.records.push(make());
                u32::try_from(self.records.len() - 1).expect("fewer than 2^32 records at once")
            }
        }
    }

    /// Appends the record in slot `slot` (from [`Slots::insert`], not listed yet), with `beside`
    /// beside it, at the end of the list.
    pub(crate) fn list(&mut self, slot: u32, beside: B) {
        debug_assert!(
            (slot as usize) < self.records.len() && !self.free.contains(&slot),
            "slot {slot} holds an inserted record"
        );
        self.order.push((slot, beside));
    }

    /// The slot of the record at position `i`: where [`Slots::in_slot`] finds it while it is
    /// listed, whatever moves before it.
    pub(crate) fn slot(&self, i: usize) -> u32 {
        self.order[i].0
    }

    /// The value beside position `i`.
    pub(crate) fn beside(&self, i: usize) -> &B {
        &self.order[i].1
    }

    /// The value beside position `i`, to change.
    pub(crate) fn beside_mut(&mut self, i: usize) -> &mut B {
        &mut self.order[i].1
    }

    /// The values beside the positions, in order.
    pub(crate) fn besides(&self) -> impl Iterator<Item = &B> {
        self.besides_from(0)
    }

    /// The values beside the positions from `from` on, in order.
    pub(crate) fn besides_from(&self, from: usize) -> impl Iterator<Item = &B> {
        self.order[from..].iter().map(|(_, b)| b)
    }

    /// The record in slot `slot` (a listed one, one inserted and not listed yet, or one left
    /// over from a removed entry).
    pub(crate) fn in_slot(&self, slot: u32) -> &T {
        &self.records[slot as usize]
    }

    /// The record in slot `slot`, to change.
    pub(crate) fn in_slot_mut(&mut self, slot: u32) -> &mut T {
        &mut self.records[slot as usize]
    }

    /// Removes the entries `plan` names (made for a list of this length) from the list, keeping
    /// the others' order; their slots are reused by later [`Slots::insert`]s.
    pub(crate) fn remove(&mut self, plan: &Removal) {
        self.free.extend(plan.gone().iter().map(|&i| self.order[i].0));
        self.order.remove(plan);
    }
}

impl<T, B> Index<usize> for Slots<T, B> {
    type Output = T;

    /// The record at position `i` of the list.
    fn index(&self, i: usize) -> &T {
        &self.records[self.order[i].0 as usize]
    }
}

impl<T, B> IndexMut<usize> for Slots<T, B> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.records[self.order[i].0 as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::Slots;
    use crate::list::Removal;

    #[test]
    fn positions_follow_the_list_and_slots_are_reused() {
        let mut s = Slots::default();
        let push = |s: &mut Slots<u32, i32>, x: u32| {
            let slot = s.insert(|| x);
            s.list(slot, -(x as i32));
        };
        for x in 0..6u32 {
            push(&mut s, x);
        }
        s.remove(&Removal::new(6, &[1, 4]));
        assert_eq!((0..s.len()).map(|i| s[i]).collect::<Vec<_>>(), vec![0, 2, 3, 5]);
        let waiting = s.insert(|| 10);
        assert_eq!(s.len(), 4, "an inserted record is not listed");
        *s.in_slot_mut(waiting) += 1;
        s.list(waiting, -10);
        push(&mut s, 11);
        push(&mut s, 12);
        assert_eq!(*s.in_slot(s.slot(4)), 11, "a slot finds its record");
        assert_eq!((0..s.len()).map(|i| s[i]).collect::<Vec<_>>(), vec![0, 2, 3, 5, 11, 11, 12]);
        assert_eq!(
            s.besides().copied().collect::<Vec<_>>(),
            vec![0, -2, -3, -5, -10, -11, -12],
            "the values beside move with them"
        );
        *s.beside_mut(1) = 1;
        assert_eq!(*s.beside(1), 1);
        assert_eq!(s.records.len(), 7, "two of the three pushes reused the removed slots");
        s[0] = 7;
        assert_eq!(s[0], 7);
    }
}
